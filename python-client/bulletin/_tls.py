"""TLS on the runtime's two ports (the gRPC API and the data port).

The head's side: ``bulletin up`` keeps a cluster CA in ``$BULLETIN_HOME`` (``ca.pem``, its key
``ca-key.pem``) and issues the runtime a server certificate (``server.pem``, ``server-key.pem``)
naming this host's names and addresses. The client's side (``Client``, the command line,
``bulletin worker``): which CA to trust (``resolve_ca``), the gRPC channel and the data port's
SSL context built on it, and a clear account of a failed handshake (``diagnose``).
docs/security.md ("TLS") describes the whole.
"""

from __future__ import annotations

import datetime
import hashlib
import ipaddress
import os
import socket
import ssl
import struct
from dataclasses import dataclass, field, replace
from pathlib import Path

import grpc

from ._config import home, read_runtime_info
from ._errors import BulletinError, TlsError

CA_FILE = "ca.pem"
CA_KEY_FILE = "ca-key.pem"
SERVER_CERT_FILE = "server.pem"
SERVER_KEY_FILE = "server-key.pem"
CA_DAYS = 3650
# Re-issued by every `bulletin up` (with the host's current addresses): a runtime would have to
# run for over two years without a restart to outlive it.
SERVER_DAYS = 825
# BULLETIN_CA values that ask for plaintext on purpose.
_PLAINTEXT = ("none", "off", "plaintext")
_FETCH_CA = ("copy $BULLETIN_HOME/ca.pem from the machine that ran `bulletin up` and point "
             "BULLETIN_CA at it (or Client(ca=...), `bulletin worker --ca`)")


def is_loopback(host: str) -> bool:
    """Whether listening on ``host`` keeps the runtime on this machine (then TLS is optional)."""
    if host.strip("[]") == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False  # a host name: reachable from elsewhere


# -- the head: CA and server certificate ------------------------------------------------------


@dataclass(frozen=True)
class ServerFiles:
    """What the runtime serves TLS with: ``--tls-cert``, ``--tls-key``, ``--tls-ca``."""

    cert: Path
    key: Path
    ca: Path | None
    # The cluster CA's key where `bulletin up` made the CA: the runtime then signs each worker's
    # own certificate (--worker-ca-key). None for your own certificate.
    ca_key: Path | None = None


def ensure_server_files(state_dir: Path, host: str) -> ServerFiles:
    """The cluster CA (made once, kept across restarts so the clients' copies stay valid) and a
    server certificate issued now for this host's names and addresses and ``host``."""
    state_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
    ca_key, ca_cert = _load_or_make_ca(state_dir)
    key, cert = _issue_server_cert(ca_key, ca_cert, server_names(host))
    _write(state_dir / SERVER_KEY_FILE, key, 0o600)
    _write(state_dir / SERVER_CERT_FILE, cert, 0o644)
    return ServerFiles(state_dir / SERVER_CERT_FILE, state_dir / SERVER_KEY_FILE,
                       state_dir / CA_FILE, state_dir / CA_KEY_FILE)


def server_names(host: str) -> tuple[list[str], list[str]]:
    """(DNS names, IP addresses) the server certificate names: this host's name and full name,
    localhost, every address of its interfaces, loopback, and ``host`` unless it means "all"."""
    names = {"localhost", socket.gethostname()}
    try:
        names.add(socket.getfqdn())
    except OSError:
        pass
    addresses = {"127.0.0.1", "::1"} | _interface_addresses()
    for name in list(names):
        try:
            addresses |= {info[4][0] for info in socket.getaddrinfo(name, None)}
        except OSError:
            pass
    bare = host.strip("[]")
    try:
        if not ipaddress.ip_address(bare).is_unspecified:
            addresses.add(bare)
    except ValueError:
        names.add(bare)
    addresses = {a.split("%", 1)[0] for a in addresses}  # no zone ids in a certificate
    return sorted(n for n in names if n), sorted(addresses)


def _interface_addresses() -> set[str]:
    """Every address of this host's interfaces (Linux): IPv4 by ioctl, IPv6 from /proc."""
    found: set[str] = set()
    try:
        import fcntl
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            for _, name in socket.if_nameindex():
                try:
                    packed = fcntl.ioctl(s.fileno(), 0x8915,  # SIOCGIFADDR
                                         struct.pack("256s", name.encode()[:15]))
                except OSError:
                    continue  # no IPv4 address on this interface
                found.add(socket.inet_ntoa(packed[20:24]))
    except (ImportError, OSError):
        pass
    try:
        with open("/proc/net/if_inet6", encoding="ascii") as f:
            for line in f:
                fields = line.split()
                if len(fields) >= 4 and int(fields[3], 16) != 0x20:  # not link-local
                    found.add(str(ipaddress.IPv6Address(bytes.fromhex(fields[0]))))
    except (OSError, ValueError):
        pass
    return found


def _load_or_make_ca(state_dir: Path):
    from cryptography import x509
    from cryptography.hazmat.primitives import serialization

    cert_path, key_path = state_dir / CA_FILE, state_dir / CA_KEY_FILE
    if cert_path.exists() or key_path.exists():
        try:
            cert = x509.load_pem_x509_certificate(cert_path.read_bytes())
            key = serialization.load_pem_private_key(key_path.read_bytes(), password=None)
        except (OSError, ValueError) as exc:
            raise BulletinError(
                f"cannot use the cluster CA in {state_dir} ({CA_FILE} and {CA_KEY_FILE}): {exc}. "
                f"Remove both to make a new CA (clients must then get the new {CA_FILE}), or "
                "start the runtime with your own certificate: --tls-cert, --tls-key, "
                "--tls-ca.") from None
        return key, cert
    key, cert = _make_ca()
    _write(key_path, key.private_bytes(serialization.Encoding.PEM,
                                       serialization.PrivateFormat.PKCS8,
                                       serialization.NoEncryption()), 0o600)
    _write(cert_path, cert.public_bytes(serialization.Encoding.PEM), 0o644)
    return key, cert


def _make_ca():
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([
        x509.NameAttribute(NameOID.ORGANIZATION_NAME, "bulletin"),
        x509.NameAttribute(NameOID.COMMON_NAME, f"bulletin cluster CA ({socket.gethostname()})")])
    now = datetime.datetime.now(datetime.timezone.utc)
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name)
            .public_key(key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + datetime.timedelta(days=CA_DAYS))
            .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
            .add_extension(x509.KeyUsage(
                digital_signature=True, content_commitment=False, key_encipherment=False,
                data_encipherment=False, key_agreement=False, key_cert_sign=True,
                crl_sign=True, encipher_only=False, decipher_only=False), critical=True)
            .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()),
                           critical=False)
            .sign(key, hashes.SHA256()))
    return key, cert


def _issue_server_cert(ca_key, ca_cert, names: tuple[list[str], list[str]]):
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

    dns, ips = names
    key = ec.generate_private_key(ec.SECP256R1())
    now = datetime.datetime.now(datetime.timezone.utc)
    expires = min(now + datetime.timedelta(days=SERVER_DAYS), _not_after(ca_cert))
    san = [x509.DNSName(n) for n in dns] + [x509.IPAddress(ipaddress.ip_address(a)) for a in ips]
    cert = (x509.CertificateBuilder()
            .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME,
                                                        socket.gethostname() or "bulletin")]))
            .issuer_name(ca_cert.subject).public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5)).not_valid_after(expires)
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(x509.KeyUsage(
                digital_signature=True, content_commitment=False, key_encipherment=False,
                data_encipherment=False, key_agreement=False, key_cert_sign=False,
                crl_sign=False, encipher_only=False, decipher_only=False), critical=True)
            .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]),
                           critical=False)
            .add_extension(x509.SubjectAlternativeName(san), critical=False)
            .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(
                ca_key.public_key()), critical=False)
            .sign(ca_key, hashes.SHA256()))
    return (key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                              serialization.NoEncryption()),
            cert.public_bytes(serialization.Encoding.PEM))


def _not_after(cert) -> datetime.datetime:
    try:
        return cert.not_valid_after_utc
    except AttributeError:  # cryptography < 42
        return cert.not_valid_after.replace(tzinfo=datetime.timezone.utc)


def _write(path: Path, data: bytes, mode: int) -> None:
    """Atomically, created with ``mode`` (a key is never readable by others, even briefly)."""
    temp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.chmod(temp, mode)
        os.replace(temp, path)
    except BaseException:
        temp.unlink(missing_ok=True)
        raise


# -- the client: which CA, channels, diagnosis ------------------------------------------------


@dataclass(frozen=True)
class CaChoice:
    """How a client dials the runtime: TLS (``enabled``) checked against ``path`` or ``pem``
    (the CA's text; neither: the system's trusted CAs), or plaintext; ``source`` says who
    decided, ``looked`` where it looked (for the error messages)."""

    enabled: bool
    path: Path | None
    source: str
    looked: tuple[str, ...] = field(default=())
    pem: str | None = None

    def describe(self) -> str:
        if not self.enabled:
            return f"plaintext ({self.source})"
        what = (f"the CA {self.path}" if self.path else "the CA given" if self.pem
                else "the system's trusted CAs")
        return f"{what} (from {self.source})"

    def roots(self) -> bytes | None:
        """The CA's PEM bytes; None for the system's CAs."""
        return self.pem.encode() if self.pem else self.path.read_bytes() if self.path else None

    def as_file(self, path: Path) -> "CaChoice":
        """This choice with a CA given as text written to ``path`` (for the worker's JVM)."""
        if not self.pem or self.path:
            return self
        path.parent.mkdir(parents=True, exist_ok=True)
        _write(path, self.pem.encode(), 0o644)
        return replace(self, path=path)

    def ssl_context(self) -> ssl.SSLContext:
        """A TLS 1.3 client context that trusts this CA."""
        context = ssl.create_default_context(cafile=str(self.path) if self.path else None,
                                             cadata=self.pem)
        context.minimum_version = ssl.TLSVersion.TLSv1_3
        return context


def resolve_ca(ca=None, address: str | None = None,
               given_as: str = "Client(ca=...)") -> CaChoice:
    """Which CA a client trusts, in order: ``ca`` (a PEM file; False: plaintext; ``given_as``
    names it in messages), $BULLETIN_CA (a file; "none": plaintext; "system": the system's
    CAs), runtime.json when it describes ``address`` (a client on the head's host),
    $BULLETIN_HOME/ca.pem (a copy of the head's); else plaintext."""
    if ca is False:
        return CaChoice(False, None, "Client(ca=False)")
    if ca is not None:
        return CaChoice(True, _readable(Path(ca).expanduser(), given_as), given_as)
    env = os.environ.get("BULLETIN_CA", "").strip()
    if env.lower() in _PLAINTEXT:
        return CaChoice(False, None, f"BULLETIN_CA={env}")
    if env.lower() == "system":
        return CaChoice(True, None, "BULLETIN_CA=system")
    if env:
        return CaChoice(True, _readable(Path(env).expanduser(), "$BULLETIN_CA"), "$BULLETIN_CA")
    pem = os.environ.get("BULLETIN_CA_PEM", "").strip()
    if pem:  # the CA's text itself: a Kubernetes pool's worker gets it from its Secret
        if "-----BEGIN CERTIFICATE-----" not in pem:
            raise TlsError("$BULLETIN_CA_PEM holds no PEM certificate (it should be the text of "
                           f"the cluster's ca.pem, BEGIN CERTIFICATE line included). To get it, "
                           f"{_FETCH_CA}.")
        return CaChoice(True, None, "$BULLETIN_CA_PEM", pem=pem + "\n")
    state = home()
    info = read_runtime_info(state)
    looked = [given_as, "$BULLETIN_CA"]
    if info is not None and address is not None and _describes(str(info.get("address")), address):
        source = str(state / "runtime.json")
        if not info.get("tls"):
            return CaChoice(False, None, f"{source} says the runtime speaks plaintext")
        ca_path = info.get("ca")
        return CaChoice(True, Path(ca_path) if ca_path else None, source)
    looked.append(str(state / "runtime.json") + " (for this address)")
    copy = state / CA_FILE
    if copy.is_file():
        return CaChoice(True, copy, str(copy))
    looked.append(str(copy))
    return CaChoice(False, None, "no CA found", tuple(looked))


def _describes(recorded: str, dialled: str) -> bool:
    """Whether runtime.json's address and the one dialled reach the same runtime: equal, or the
    same port on a name of this machine (localhost, its host name) where runtime.json has
    loopback (the runtime records 127.0.0.1 when it listens on every address)."""
    if recorded == dialled:
        return True
    host, _, port = dialled.rpartition(":")
    recorded_host, _, recorded_port = recorded.rpartition(":")
    if port != recorded_port or not is_loopback(recorded_host):
        return False
    return is_loopback(host) or host.strip("[]") in (socket.gethostname(), socket.getfqdn())


def _readable(path: Path, source: str) -> Path:
    try:
        path.read_bytes()
    except OSError as exc:
        raise TlsError(f"{source} names the CA file {path}, which cannot be read ({exc}). "
                       f"To get the cluster's CA, {_FETCH_CA}.") from None
    return path


def grpc_channel(address: str, choice: CaChoice, options) -> grpc.Channel:
    if not choice.enabled:
        return grpc.insecure_channel(address, options=options)
    return grpc.secure_channel(address, grpc.ssl_channel_credentials(
                               root_certificates=choice.roots()),
                               options=options)


def ssl_context(choice: CaChoice) -> ssl.SSLContext:
    """The data port's client context: the runtime's certificate checked against the CA and
    the dialled host name (TLS 1.3, as the runtime speaks)."""
    return choice.ssl_context()


WORKER_URI = "urn:bulletin:worker:"


def worker_context(choice: CaChoice) -> ssl.SSLContext:
    """A client context for a worker's data port that serves its worker certificate: checked
    against the cluster CA in the handshake; the worker's id (its URI name, not a host name)
    is checked in ``_bulk.connect`` before any byte is sent."""
    context = choice.ssl_context()
    context.check_hostname = False  # a worker certificate names a worker, not a host
    return context


def pinned_context() -> ssl.SSLContext:
    """A client context for a worker's own data port: its certificate is self-signed, made by
    the worker at start, and checked by its SHA-256 (the pin the head sent with the ticket)
    after the handshake, in ``_bulk.connect``, before any byte is sent; so no CA, no name."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    context.minimum_version = ssl.TLSVersion.TLSv1_3
    return context


def ephemeral_server_context() -> tuple[ssl.SSLContext, bytes]:
    """A server context with a self-signed certificate made now, and that certificate's
    SHA-256: whoever is given the pin checks it (``_bulk.connect``), so no CA is needed. A
    client's lease port serves it (``bulletin._leases``); the key never touches a disk but for
    the moment ``load_cert_chain`` reads it from a 0700 folder of this process's own."""
    import tempfile

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "bulletin lease port")])
    now = datetime.datetime.now(datetime.timezone.utc)
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name)
            .public_key(key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + datetime.timedelta(days=30))
            .sign(key, hashes.SHA256()))
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.minimum_version = ssl.TLSVersion.TLSv1_3
    with tempfile.TemporaryDirectory(prefix="bulletin-lease-") as folder:
        cert_path, key_path = Path(folder) / "cert.pem", Path(folder) / "key.pem"
        _write(cert_path, cert.public_bytes(serialization.Encoding.PEM), 0o600)
        _write(key_path, key.private_bytes(serialization.Encoding.PEM,
                                           serialization.PrivateFormat.PKCS8,
                                           serialization.NoEncryption()), 0o600)
        context.load_cert_chain(cert_path, key_path)
    pin = hashlib.sha256(cert.public_bytes(serialization.Encoding.DER)).digest()
    return context, pin


def diagnose(address: str, choice: CaChoice, timeout: float,
             who: str = "this client") -> str | None:
    """Why a connection failed, when TLS is the reason: the runtime speaks TLS and this side
    has no CA, its certificate is not trusted, or it speaks plaintext where TLS was expected.
    None when the port cannot be reached at all or TLS is not the problem."""
    host, _, port = address.rpartition(":")
    host = host.strip("[]")
    try:
        raw = socket.create_connection((host, int(port)), timeout=timeout)
    except (OSError, ValueError):
        return None
    with raw:
        if not choice.enabled:
            probe = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
            probe.check_hostname = False
            probe.verify_mode = ssl.CERT_NONE
            try:
                probe.wrap_socket(raw, server_hostname=host).close()
            except (ssl.SSLError, OSError):
                return None  # not TLS either: the caller's message stands
            why = (f"has no CA to check its certificate with (looked at "
                   f"{', '.join(choice.looked)})" if choice.looked
                   else f"was told to speak plaintext ({choice.source})")
            return (f"the runtime at {address} speaks TLS, and {who} {why}. To get the "
                    f"cluster's CA, {_FETCH_CA}.")
        context = ssl_context(choice)
        context.set_alpn_protocols(["h2"])
        try:
            context.wrap_socket(raw, server_hostname=host).close()
        except ssl.SSLCertVerificationError as exc:
            mismatch = exc.verify_code in (62, 64)  # X509_V_ERR_HOSTNAME / IP_ADDRESS_MISMATCH
            hint = (f" The certificate does not name {host}: dial one of the names or addresses "
                    "it names (`bulletin up` names the head's host names and addresses), or "
                    "restart the runtime with `bulletin up --host` set to this one."
                    if mismatch else f" To get the cluster's CA, {_FETCH_CA}.")
            return (f"{who} does not trust the certificate of the runtime at {address} "
                    f"({exc.verify_message}); it checked it against {choice.describe()}.{hint}")
        except (ssl.SSLError, OSError) as exc:
            return (f"the runtime at {address} did not complete a TLS handshake ({exc}); "
                    f"{who} expects TLS because of {choice.describe()}. If that runtime speaks "
                    "plaintext (a cluster on loopback, or `bulletin up --no-tls`), set "
                    "BULLETIN_CA=none or pass Client(ca=False); otherwise check the address.")
    return None
