"""TLS on both ports of a real runtime (the gRPC API and the data port): `bulletin up --tls` on
loopback, and TLS by default for a runtime that listens beyond loopback, with a worker in
another network namespace that checks it with a copy of the cluster's CA."""

from __future__ import annotations

import json
import shutil
import socket
import struct
import subprocess
import sys
import textwrap

import grpc
import numpy as np
import pytest

import bulletin
from bulletin import _tls
from bulletin._data import _bulk
from bulletin._proto import bulletin_pb2 as pb
from bulletin._proto import bulletin_pb2_grpc as pb_grpc
from cluster_support import REPO, cli_env, free_port, run_cli, start_cluster

sys.path.insert(0, str(REPO / "examples"))
import _netns  # noqa: E402

pytestmark = pytest.mark.timeout(240)


@pytest.fixture(scope="module")
def tls_head(tmp_path_factory):
    c = start_cluster(tmp_path_factory.mktemp("bulletin-tls"), "--tls", gpus=1, cpus=1)
    try:
        yield c
    finally:
        c.stop()


@pytest.fixture
def other_ca(tmp_path):
    """The CA of another cluster: a certificate it signed is not ours."""
    return _tls.ensure_server_files(tmp_path / "other-cluster", "127.0.0.1").ca


def test_up_tls_records_the_ca_for_local_clients_and_keeps_the_keys_private(tls_head):
    assert tls_head.info["tls"] is True
    assert tls_head.info["ca"] == str(tls_head.home / "ca.pem")
    for key in ("ca-key.pem", "server-key.pem"):
        assert (tls_head.home / key).stat().st_mode & 0o777 == 0o600
    assert "TLS, CA" in tls_head.up_output


def test_a_client_with_the_cluster_ca_calls_and_moves_objects_over_both_ports(tls_head,
                                                                               monkeypatch):
    monkeypatch.setenv("BULLETIN_DATA_PATH", "bulk")  # the data port, not same-host files
    a = np.random.default_rng(5).random(1 << 20)  # 8 MiB: above the inline limit
    with tls_head.client(ca=tls_head.home / "ca.pem") as client:
        assert client._conn.tls.enabled
        doubled = client.submit(lambda x: x * 2, a).result(timeout=60)
        assert np.array_equal(doubled, a * 2)
        assert client._transfer.last_path == "bulk"  # the result came over the TLS data port
        assert client._transfer.uploaded_bytes >= a.nbytes  # and the argument went up on it
        assert client._transfer.bulk_unreachable is None


def test_the_dashboard_and_metrics_speak_https_with_the_same_certificate(tls_head):
    import http.client
    import ssl
    import urllib.request
    url = tls_head.info["dashboard_url"]
    assert url == f"https://127.0.0.1:{tls_head.info['http_port']}/"
    trusted = ssl.create_default_context(cafile=str(tls_head.home / "ca.pem"))
    with urllib.request.urlopen(url + "metrics", context=trusted, timeout=10) as response:
        assert response.status == 200 and b"bulletin_gpus{" in response.read()
    # Plain HTTP gets no page from it.
    with pytest.raises((OSError, http.client.HTTPException)):
        urllib.request.urlopen(url.replace("https:", "http:") + "metrics", timeout=10).read()


def test_plaintext_is_refused_on_both_ports(tls_head):
    with pytest.raises(bulletin.TlsError, match="speaks TLS") as refused:
        tls_head.client(ca=False)
    assert "BULLETIN_CA" in str(refused.value) and "ca.pem" in str(refused.value)
    # A plaintext gRPC client gets no answer at all.
    with grpc.insecure_channel(tls_head.address) as channel:
        with pytest.raises(grpc.RpcError) as plain:
            pb_grpc.BulletinStub(channel).Hello(pb.HelloRequest(), timeout=5)
        assert plain.value.code() == grpc.StatusCode.UNAVAILABLE
    # Nor does a plaintext data connection: the header is not TLS, the port closes it unread.
    with socket.create_connection(("127.0.0.1", tls_head.info["data_port"]), timeout=10) as raw:
        raw.sendall(struct.pack(">II", _bulk.MAGIC, _bulk.VERSION) + bytes(32))
        try:
            assert raw.recv(64) == b""
        except ConnectionResetError:
            pass


def test_a_wrong_ca_is_refused_naming_the_ca_used(tls_head, other_ca):
    with pytest.raises(bulletin.TlsError, match="does not trust the certificate") as refused:
        tls_head.client(ca=other_ca)
    assert str(other_ca) in str(refused.value) and "BULLETIN_CA" in str(refused.value)
    # `bulletin worker` checks the head before it starts anything.
    worker = run_cli(tls_head.home, "worker", "--head", tls_head.address, "--ca", str(other_ca),
                     "--cpus", "1", timeout=60)
    assert worker.returncode == 1, worker.stdout + worker.stderr
    assert "this worker does not trust the certificate" in worker.stderr
    assert f"{other_ca} (from --ca)" in worker.stderr


def _own_certificate(folder):
    """A CA of the site's and an RSA certificate it signed for localhost, the key in PKCS#1
    (`BEGIN RSA PRIVATE KEY`): what an admin brings, unlike what `bulletin up` makes."""
    import datetime
    import ipaddress

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import rsa
    from cryptography.x509.oid import NameOID

    now = datetime.datetime.now(datetime.timezone.utc)
    ca_key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "site CA")])
    ca = (x509.CertificateBuilder().subject_name(ca_name).issuer_name(ca_name)
          .public_key(ca_key.public_key()).serial_number(1)
          .not_valid_before(now - datetime.timedelta(hours=1))
          .not_valid_after(now + datetime.timedelta(days=2))
          .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
          .sign(ca_key, hashes.SHA256()))
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    cert = (x509.CertificateBuilder()
            .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "localhost")]))
            .issuer_name(ca_name).public_key(key.public_key()).serial_number(2)
            .not_valid_before(now - datetime.timedelta(hours=1))
            .not_valid_after(now + datetime.timedelta(days=2))
            .add_extension(x509.SubjectAlternativeName([
                x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
                critical=False)
            .sign(ca_key, hashes.SHA256()))
    paths = folder / "site-ca.pem", folder / "own.pem", folder / "own-key.pem"
    paths[0].write_bytes(ca.public_bytes(serialization.Encoding.PEM))
    paths[1].write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    paths[2].write_bytes(key.private_bytes(serialization.Encoding.PEM,
                                           serialization.PrivateFormat.TraditionalOpenSSL,
                                           serialization.NoEncryption()))
    return paths


def test_up_serves_your_own_certificate_and_records_its_ca(tmp_path, monkeypatch):
    site_ca, cert, key = _own_certificate(tmp_path)
    home = tmp_path / "home"
    cluster = start_cluster(home, "--tls-cert", str(cert), "--tls-key", str(key), "--tls-ca",
                            str(site_ca), gpus=0, cpus=1)
    try:
        assert cluster.info["tls"] is True and cluster.info["ca"] == str(site_ca)
        assert not (home / "ca.pem").exists()  # no cluster CA made: the site's is used
        monkeypatch.setenv("BULLETIN_HOME", str(home))
        with cluster.client() as client:  # finds the site's CA through runtime.json
            assert client._conn.tls.path == site_ca
            assert client.submit(pow, 2, 10).result(timeout=60) == 1024
    finally:
        cluster.stop()


DRIVER = textwrap.dedent("""
    import json, socket, time
    import numpy as np
    import bulletin

    client = bulletin.Client(connect_timeout=10)  # on the head's host: runtime.json names the CA
    deadline = time.monotonic() + 90
    while not any(w.worker_id == "far" for w in client.status().workers):
        assert time.monotonic() < deadline, "the worker did not attach"
        time.sleep(0.2)
    a = np.random.default_rng(9).random(1 << 20)
    # The head has no GPU: the call runs on the far worker, which fetches the argument from
    # the runtime's data port and, when the result is asked for, uploads it there.
    value = client.submit(lambda x: x * 2, a, gpus=1).result(timeout=120)
    print(json.dumps({"tls": client._conn.tls.enabled, "round_trip": bool(np.array_equal(value, a * 2))}))
    client.close()
""")


def test_a_remote_worker_in_a_network_namespace_attaches_over_tls(tmp_path):
    why = _netns.available()
    if why:
        pytest.skip(f"cannot make network namespaces here: {why}")
    home = tmp_path / "head"
    env = cli_env(home)
    env.pop("BULLETIN_CA", None)
    port = free_port()
    head = f"{_netns.SERVER_IP}:{port}"
    with _netns.two_hosts() as (server_ns, client_ns):
        up = subprocess.run(_netns.in_ns(server_ns, [
            sys.executable, "-m", "bulletin._cli", "up", "--host", "0.0.0.0", "--port", str(port),
            "--simulate-gpus", "0", "--cpus", "1"]), env=env, capture_output=True, text=True,
            timeout=120)
        assert up.returncode == 0, up.stdout + up.stderr
        worker = None
        try:
            info = json.loads((home / "runtime.json").read_text())
            assert info["tls"] is True  # listening beyond loopback: TLS without asking
            # The worker's host shares nothing with the head: no home, a copy of the CA.
            copied_ca = tmp_path / "copied-ca.pem"
            shutil.copy(home / "ca.pem", copied_ca)
            worker_env = dict(env, BULLETIN_HOME=str(tmp_path / "worker-home"),
                              BULLETIN_WORKER_TOKEN=(home / "worker-token").read_text().strip())
            command = [sys.executable, "-m", "bulletin", "worker", "--head", head, "--cpus", "1",
                       "--simulate-gpus", "1"]
            refused = subprocess.run(_netns.in_ns(client_ns, command + ["--worker-id", "plain"]),
                                     env=worker_env, capture_output=True, text=True, timeout=120)
            assert refused.returncode != 0, refused.stdout + refused.stderr
            assert "BULLETIN_CA" in refused.stderr, refused.stderr
            # A worker on another host attaches with a certificate of its own: the owner mints
            # it a join token on the head (docs/security.md, "A certificate per worker").
            minted = subprocess.run(_netns.in_ns(server_ns, [
                sys.executable, "-m", "bulletin._cli", "worker", "join-token", "far"]), env=env,
                capture_output=True, text=True, timeout=60)
            assert minted.returncode == 0, minted.stderr
            log = tmp_path / "worker.log"
            with open(log, "wb") as out:
                worker = subprocess.Popen(_netns.in_ns(client_ns, command + ["--worker-id", "far"]),
                                          env=dict(worker_env, BULLETIN_CA=str(copied_ca),
                                                   BULLETIN_JOIN_TOKEN=minted.stdout.strip()),
                                          stdout=out, stderr=subprocess.STDOUT)
            run = subprocess.run(_netns.in_ns(server_ns, [sys.executable, "-c", DRIVER]),
                                 env=env, capture_output=True, text=True, timeout=200)
            assert run.returncode == 0, run.stderr + log.read_text(errors="replace")
            assert json.loads(run.stdout.strip().splitlines()[-1]) == {"tls": True,
                                                                       "round_trip": True}
            assert f"attached to {head} over TLS" in log.read_text(errors="replace")
        finally:
            if worker is not None:
                worker.terminate()
                worker.wait(30)
            subprocess.run(_netns.in_ns(server_ns, [sys.executable, "-m", "bulletin._cli",
                                                    "down"]), env=env, capture_output=True,
                           timeout=60)
