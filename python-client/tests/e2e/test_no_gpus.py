"""A first try on a machine without GPUs: a GPU call on a cluster that has none fails at once,
and says how to get simulated GPUs (README, "From the demo to your own notebook")."""

from __future__ import annotations

import operator

import pytest

import bulletin
from cluster_support import CALL_SECONDS, start_cluster


def test_a_gpu_call_on_a_cluster_without_gpus_says_that_simulate_gpus_exists(tmp_path):
    cluster = start_cluster(tmp_path / "home", gpus=0, cpus=1)
    try:
        with cluster.client() as client:
            with pytest.raises(bulletin.InfeasibleError) as info:
                client.submit(operator.add, 1, 2, gpus=1).result(timeout=CALL_SECONDS)
            message = str(info.value)
            assert "asks for 1 GPU" in message and "has 0 GPUs" in message
            assert "bulletin up --simulate-gpus N" in message
            # A CPU call on the same cluster runs, and a CPU-sized refusal does not mention GPUs.
            assert client.submit(operator.add, 1, 2).result(timeout=CALL_SECONDS) == 3
            with pytest.raises(bulletin.InfeasibleError) as info:
                client.submit(operator.add, 1, 2, cpus=8).result(timeout=CALL_SECONDS)
            assert "simulate-gpus" not in str(info.value)
    finally:
        cluster.stop()
