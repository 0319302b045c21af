"""Each worker its own certificate (docs/security.md, "A certificate per worker"), through the
real command line: `bulletin up --tls` keeps the cluster CA's key for the runtime, the owner
mints single-use join tokens (`bulletin worker join-token`), `bulletin worker` exchanges one
for a certificate and attaches with it (on the owner's own machine it asks for one itself),
the shared worker token is refused with what to do instead, and `bulletin worker revoke` cuts a
worker off. The Java side's rules (single use, expiry, A as B, renewal, restarts) are tested in
WorkerIdentityTest."""

from __future__ import annotations

import os

import pytest

from cluster_support import (ALICE, cli_env, run_cli, start_cluster, start_configured_cluster,
                             wait_until)
from test_workers import ATTACH_SECONDS, Worker, attached

pytestmark = pytest.mark.timeout(300)


@pytest.fixture(scope="module")
def head(tmp_path_factory):
    home = tmp_path_factory.mktemp("bulletin-identity")
    c = start_configured_cluster(home, f"""
users:
  - {{name: alice, group: vision, token: "{ALICE}"}}
""", "--tls", gpus=0, cpus=1, env={**cli_env(home), "BULLETIN_WORKER_GRACE": "0",
                                    "BULLETIN_LINK_LOSS_GRACE": "0"})
    try:
        yield c
    finally:
        c.stop()


@pytest.fixture
def owner(head):
    with head.client(set_as_default=False, ca=head.home / "ca.pem") as client:
        yield client


@pytest.fixture
def started(head, owner):
    workers: list[Worker] = []

    def start(worker_id: str, *extra: str, env: dict | None = None, wait: bool = True):
        worker = Worker(head, worker_id, *extra, env=env)
        workers.append(worker)
        if wait:
            wait_until(lambda: attached(owner, worker_id) or worker.proc.poll() is not None,
                       timeout=ATTACH_SECONDS, what=f"worker {worker_id} to attach")
        return worker

    yield start
    for worker in workers:
        worker.kill()


def says_so(worker: Worker) -> None:
    wait_until(lambda: "with its own certificate" in worker.output(), timeout=30,
               what=f"worker {worker.worker_id} to say it attached with its own certificate")


def elsewhere(head, tmp_path, **extra) -> dict:
    """A worker host's environment: the cluster's CA, no home shared with the head."""
    env = cli_env(tmp_path / "far-home")
    env.update(BULLETIN_CA=str(head.home / "ca.pem"), **extra)
    return env


def test_a_worker_joins_with_a_token_from_a_file_and_attaches_with_its_own_certificate(
        head, owner, started, tmp_path):
    minted = run_cli(head.home, "worker", "join-token", "far-1", "--ttl", "5m")
    assert minted.returncode == 0, minted.stderr
    token = minted.stdout.strip()
    assert token.startswith("bjt_") and "--join-file" in minted.stderr
    token_file = tmp_path / "join"
    token_file.write_text(token)
    token_file.chmod(0o600)
    worker = started("far-1", "--simulate-gpus", "1", "--join-file", str(token_file),
                     env=elsewhere(head, tmp_path))
    assert worker.proc.poll() is None, worker.output()
    says_so(worker)
    folder = tmp_path / "far-home" / "workers" / "far-1"
    for name in ("worker.pem", "worker-key.pem"):
        assert (folder / name).stat().st_mode & 0o777 == 0o600
    assert token not in " ".join(open(f"/proc/{worker.proc.pid}/cmdline").read().split("\0"))
    assert owner.submit(lambda x: x + 1, 41, gpus=1).result(timeout=120) == 42

    # Used once: a second worker with the same token is refused, saying why.
    again = started("far-1b", "--join-file", str(token_file), wait=False,
                    env=elsewhere(head, tmp_path / "b"))
    assert again.proc.wait(timeout=120) == 3, again.output()
    assert "already used" in again.output()


def test_a_worker_given_the_ca_as_text_joins_as_a_kubernetes_pods_worker_does(
        head, owner, started, tmp_path):
    """A Pod shares no file with the head: its Secret gives the CA's text ($BULLETIN_CA_PEM)
    and the join token in the environment, and nothing else."""
    minted = run_cli(head.home, "worker", "join-token", "pod-1", "--ttl", "5m")
    assert minted.returncode == 0, minted.stderr
    env = cli_env(tmp_path / "pod-home")
    env.update(BULLETIN_CA_PEM=(head.home / "ca.pem").read_text(),
               BULLETIN_JOIN_TOKEN=minted.stdout.strip())
    worker = started("pod-1", "--simulate-gpus", "1", env=env)
    assert worker.proc.poll() is None, worker.output()
    says_so(worker)
    assert owner.submit(lambda x: x * 2, 21, gpus=1).result(timeout=120) == 42


def test_the_owner_starting_a_worker_on_the_head_needs_no_token(head, owner, started):
    worker = started("near-1", "--simulate-gpus", "1")
    assert attached(owner, "near-1"), worker.output()
    says_so(worker)


def test_the_shared_worker_token_is_refused_with_what_to_do(head, started, tmp_path):
    worker = started("old-style", wait=False, env=elsewhere(
        head, tmp_path, BULLETIN_WORKER_TOKEN=(head.home / "worker-token").read_text().strip()))
    assert worker.proc.wait(timeout=120) == 3, worker.output()
    assert "bulletin worker join-token" in worker.output()


def test_only_the_owner_mints_tokens_and_revokes(head):
    env = {**cli_env(head.home), "BULLETIN_TOKEN": ALICE}
    for command in (("join-token", "x"), ("revoke", "x")):
        result = run_cli(head.home, "worker", *command, env=env)
        assert result.returncode == 1 and "only the cluster's owner" in result.stderr, \
            result.stderr
    unknown = run_cli(head.home, "worker", "revoke", "nobody")
    assert unknown.returncode == 1 and "no worker 'nobody'" in unknown.stderr, unknown.stderr


def test_a_revoked_worker_is_cut_off_and_cannot_come_back(head, owner, started, tmp_path):
    worker = started("gone-1", "--simulate-gpus", "1")
    assert attached(owner, "gone-1"), worker.output()
    revoked = run_cli(head.home, "worker", "revoke", "gone-1")
    assert revoked.returncode == 0 and "its link is closed" in revoked.stdout, revoked.stderr
    wait_until(lambda: worker.proc.poll() is not None, timeout=60,
               what="the revoked worker to stop")
    assert not attached(owner, "gone-1")
    minted = run_cli(head.home, "worker", "join-token", "gone-1")
    assert minted.returncode == 1 and "revoked" in minted.stderr, minted.stderr


def test_a_local_pool_gives_each_worker_it_starts_a_join_token(tmp_path):
    config = tmp_path / "pools.yaml"
    config.write_text("pools:\n  - name: gpu\n    provider: local\n"
                      "    worker: {gpus: 1, cpus: 1}\n    max_workers: 1\n"
                      "    idle_timeout: 60s\n    local: {simulate_gpus: true}\n")
    home = tmp_path / "home"
    pooled = start_cluster(home, "--tls", "--config", str(config), gpus=0, cpus=1)
    try:
        with pooled.client(set_as_default=False, ca=home / "ca.pem") as client:
            # The shared worker token is refused in this cluster: a pool worker that runs the
            # call attached with the certificate its join token got it.
            assert client.submit(lambda x: x * 2, 21, gpus=1).result(timeout=180) == 42
            logs = list((home / "pools").rglob("*.log"))
            assert any("with its own certificate" in log.read_text(errors="replace")
                       for log in logs), [log.read_text(errors="replace") for log in logs]
    finally:
        pooled.stop()
