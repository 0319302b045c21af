"""The examples a newcomer runs first (`make demo`), end to end on a cluster of their own."""

from __future__ import annotations

import subprocess
import sys

import pytest

from cluster_support import REPO, cli_env

pytestmark = pytest.mark.timeout(180)


def test_the_quickstart_runs_and_names_no_file_it_removes(tmp_path):
    # An empty BULLETIN_HOME: no runtime to reuse, so the example starts a throwaway cluster.
    result = subprocess.run([sys.executable, str(REPO / "examples" / "quickstart.py")],
                            env=cli_env(tmp_path), capture_output=True, text=True, timeout=150,
                            stdin=subprocess.DEVNULL)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "train(10) -> 285" in result.stdout
    assert "remote exception came back as ZeroDivisionError" in result.stdout
    # The throwaway cluster's folder is removed at the end: its log path must not be shown.
    assert "runtime.log" not in result.stdout + result.stderr
