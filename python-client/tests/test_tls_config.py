"""TLS without a runtime: the CA and server certificate `bulletin up` makes (checked by real
handshakes on a loopback socket), which CA a client picks, and what a failed handshake says."""

from __future__ import annotations

import json
import os
import socket
import ssl
import threading
from pathlib import Path

import pytest

import bulletin
from bulletin import _launch, _tls


@pytest.fixture
def tls_env(bulletin_env, monkeypatch):
    monkeypatch.delenv("BULLETIN_CA", raising=False)
    return bulletin_env


class TlsServer:
    """A loopback TLS server presenting the certificate `bulletin up` issued; it completes
    handshakes and closes (what a client makes of the certificate is the client's)."""

    def __init__(self, files: _tls.ServerFiles):
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(files.cert, files.key)
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.address = f"127.0.0.1:{self._listener.getsockname()[1]}"
        self._context = context
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def _serve(self):
        while True:
            try:
                conn, _ = self._listener.accept()
            except OSError:
                return
            try:
                with self._context.wrap_socket(conn, server_side=True):
                    pass
            except (ssl.SSLError, OSError):
                pass  # the client refused us: its side of the story is the test's

    def close(self):
        self._listener.close()


@pytest.fixture
def head_files(tls_env):
    return _tls.ensure_server_files(tls_env, "127.0.0.1")


def _handshake(files_or_ca, host: str, address: str) -> None:
    context = _tls.ssl_context(_tls.resolve_ca(files_or_ca))
    port = int(address.rpartition(":")[2])
    with socket.create_connection(("127.0.0.1", port), timeout=10) as raw:
        context.wrap_socket(raw, server_hostname=host).close()


def test_up_makes_a_ca_once_and_issues_a_server_certificate_for_this_host(tls_env):
    first = _tls.ensure_server_files(tls_env, "0.0.0.0")
    ca_bytes, cert_bytes = first.ca.read_bytes(), first.cert.read_bytes()
    again = _tls.ensure_server_files(tls_env, "0.0.0.0")
    assert again.ca.read_bytes() == ca_bytes, "the CA survives a restart: clients' copies stay valid"
    assert again.cert.read_bytes() != cert_bytes, "the server certificate is issued anew"
    for secret in (tls_env / "ca-key.pem", first.key):
        assert secret.stat().st_mode & 0o777 == 0o600
    from cryptography import x509
    cert = x509.load_pem_x509_certificate(again.cert.read_bytes())
    san = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    names = set(san.get_values_for_type(x509.DNSName))
    addresses = {str(a) for a in san.get_values_for_type(x509.IPAddress)}
    assert {"localhost", socket.gethostname()} <= names
    assert "127.0.0.1" in addresses and "0.0.0.0" not in addresses
    ca = x509.load_pem_x509_certificate(ca_bytes)
    assert ca.extensions.get_extension_for_class(x509.BasicConstraints).value.ca


def test_the_host_given_to_up_is_in_the_certificate(tls_env):
    from cryptography import x509
    for host, kind, value in (("head.example.org", x509.DNSName, "head.example.org"),
                              ("192.0.2.77", x509.IPAddress, "192.0.2.77")):
        files = _tls.ensure_server_files(tls_env, host)
        cert = x509.load_pem_x509_certificate(files.cert.read_bytes())
        san = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
        assert value in {str(v) for v in san.get_values_for_type(kind)}


def test_the_certificate_passes_a_real_handshake_by_address_and_name_and_no_other(head_files):
    server = TlsServer(head_files)
    try:
        _handshake(head_files.ca, "127.0.0.1", server.address)
        _handshake(head_files.ca, "localhost", server.address)
        with pytest.raises(ssl.SSLCertVerificationError, match="mismatch"):
            _handshake(head_files.ca, "elsewhere.invalid", server.address)
    finally:
        server.close()


def test_a_client_says_which_ca_it_used_when_the_certificate_is_not_trusted(head_files, tmp_path):
    server = TlsServer(head_files)
    other = _tls.ensure_server_files(tmp_path / "other-cluster", "127.0.0.1")
    try:
        with pytest.raises(ssl.SSLCertVerificationError):
            _handshake(other.ca, "127.0.0.1", server.address)
        why = _tls.diagnose(server.address, _tls.resolve_ca(other.ca), timeout=5)
        assert "does not trust the certificate" in why and str(other.ca) in why
        assert "BULLETIN_CA" in why and "ca.pem" in why
        plain = _tls.diagnose(server.address, _tls.CaChoice(False, None, "no CA found",
                                                            ("$BULLETIN_CA",)), timeout=5)
        assert "speaks TLS" in plain and "BULLETIN_CA" in plain
        assert _tls.diagnose(server.address, _tls.resolve_ca(head_files.ca), timeout=5) is None
    finally:
        server.close()


def test_a_plaintext_server_is_named_as_such_to_a_client_that_expects_tls(head_files):
    listener = socket.create_server(("127.0.0.1", 0))

    def answer_in_plaintext():
        conn, _ = listener.accept()
        with conn:
            conn.recv(1024)
            conn.sendall(b"HTTP/1.1 400 Bad Request\r\n\r\n")

    threading.Thread(target=answer_in_plaintext, daemon=True).start()
    try:
        address = f"127.0.0.1:{listener.getsockname()[1]}"
        why = _tls.diagnose(address, _tls.resolve_ca(head_files.ca), timeout=5)
        assert "did not complete a TLS handshake" in why and "BULLETIN_CA=none" in why
    finally:
        listener.close()


def test_which_ca_a_client_trusts(tls_env, monkeypatch, tmp_path):
    assert not _tls.resolve_ca(None, "10.0.0.1:8770").enabled  # nothing found: plaintext
    files = _tls.ensure_server_files(tls_env, "127.0.0.1")
    copy = _tls.resolve_ca(None, "10.0.0.1:8770")
    assert (copy.enabled, copy.path) == (True, tls_env / "ca.pem")  # the head's, or a copy
    (tls_env / "runtime.json").write_text(json.dumps(
        {"address": "127.0.0.1:9", "tls": False, "ca": None}))
    assert not _tls.resolve_ca(None, "127.0.0.1:9").enabled  # the local runtime: plaintext
    assert not _tls.resolve_ca(None, "localhost:9").enabled  # by another name of this host
    assert not _tls.resolve_ca(None, f"{socket.gethostname()}:9").enabled
    assert _tls.resolve_ca(None, "10.0.0.1:8770").enabled  # another address: the copy
    assert _tls.resolve_ca(None, "localhost:10").enabled  # another port: not that runtime
    (tls_env / "runtime.json").write_text(json.dumps(
        {"address": "127.0.0.1:9", "tls": True, "ca": str(files.ca)}))
    assert _tls.resolve_ca(None, "127.0.0.1:9").source.endswith("runtime.json")
    elsewhere = tmp_path / "mine.pem"
    elsewhere.write_bytes(files.ca.read_bytes())
    monkeypatch.setenv("BULLETIN_CA", str(elsewhere))
    assert _tls.resolve_ca(None, "127.0.0.1:9").path == elsewhere
    assert _tls.resolve_ca(files.ca, "127.0.0.1:9").path == files.ca  # the argument first
    assert not _tls.resolve_ca(False, "127.0.0.1:9").enabled
    monkeypatch.setenv("BULLETIN_CA", "none")
    assert not _tls.resolve_ca(None, "127.0.0.1:9").enabled
    monkeypatch.setenv("BULLETIN_CA", "system")
    assert _tls.resolve_ca(None, "127.0.0.1:9") == _tls.CaChoice(True, None, "BULLETIN_CA=system")
    # The CA's text (a Kubernetes Pod's, from its Secret), after a BULLETIN_CA file.
    monkeypatch.delenv("BULLETIN_CA")
    monkeypatch.setenv("BULLETIN_CA_PEM", files.ca.read_text())
    given = _tls.resolve_ca(None, "127.0.0.1:9")
    assert (given.source, given.path, given.roots()) == ("$BULLETIN_CA_PEM", None,
                                                         files.ca.read_bytes())
    written = given.as_file(tmp_path / "w" / "ca.pem")
    assert written.path.read_bytes() == files.ca.read_bytes()
    assert written.path.stat().st_mode & 0o777 == 0o644
    given.ssl_context()  # loads as a CA
    monkeypatch.setenv("BULLETIN_CA_PEM", "not a certificate")
    with pytest.raises(bulletin.TlsError, match=r"\$BULLETIN_CA_PEM holds no PEM certificate"):
        _tls.resolve_ca(None, "127.0.0.1:9")
    monkeypatch.delenv("BULLETIN_CA_PEM")
    monkeypatch.setenv("BULLETIN_CA", str(tmp_path / "missing.pem"))
    with pytest.raises(bulletin.TlsError, match=r"\$BULLETIN_CA names the CA file .*missing.pem"):
        _tls.resolve_ca(None, "127.0.0.1:9")


@pytest.mark.parametrize("host, on", [
    ("127.0.0.1", False), ("localhost", False), ("::1", False), ("127.0.1.1", False),
    ("0.0.0.0", True), ("::", True), ("10.1.2.3", True), ("head-node", True)])
def test_tls_is_on_by_default_unless_the_runtime_listens_on_loopback(host, on):
    assert _launch.UpOptions(host=host).tls_on() is on
    assert _launch.UpOptions(host=host, tls=True).tls_on()
    assert not _launch.UpOptions(host=host, tls=False).tls_on()


def test_up_checks_the_tls_flags_and_hands_the_files_to_the_runtime(tls_env, tmp_path):
    state = tmp_path / "state"
    with pytest.raises(bulletin.BulletinError, match="--tls-cert and --tls-key go together"):
        _launch.tls_files(state, _launch.UpOptions(tls_cert=tmp_path / "c.pem"))
    with pytest.raises(bulletin.BulletinError, match="need TLS on"):
        _launch.tls_files(state, _launch.UpOptions(tls=False, tls_cert=tmp_path / "c.pem",
                                                   tls_key=tmp_path / "k.pem"))
    assert _launch.tls_files(state, _launch.UpOptions()) is None  # loopback: plaintext
    files = _launch.tls_files(state, _launch.UpOptions(host="0.0.0.0"))
    command = _launch.runtime_command("java", Path("x.jar"), state, _launch.UpOptions(), files)
    assert command[command.index("--tls-cert") + 1] == str(state / "server.pem")
    assert command[command.index("--tls-key") + 1] == str(state / "server-key.pem")
    assert command[command.index("--tls-ca") + 1] == str(state / "ca.pem")
    token = state / "token"
    token.write_text("t\n")
    assert _launch.runtime_env(token, files)["BULLETIN_CA"] == str(state / "ca.pem")
    assert _launch.runtime_env(token, None)["BULLETIN_CA"] == "none"
    assert "--tls-ca" not in _launch.worker_command("java", Path("x.jar"),
                                                    _launch.WorkerOptions(head="h:1"),
                                                    _tls.CaChoice(True, None, "system"))
    assert "--tls" not in _launch.worker_command("java", Path("x.jar"),
                                                 _launch.WorkerOptions(head="h:1"),
                                                 _tls.CaChoice(False, None, "none"))
    assert os.environ.get("BULLETIN_CA") is None
