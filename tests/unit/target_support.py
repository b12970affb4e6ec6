"""Local stand-ins for an HTTP target and for the network, for the target caller's tests.

``serve`` runs a real HTTP(S) server on a loopback address that records every connection and request it
receives and answers ``ok``, except on these paths:

- ``/slow...``: ``ok`` after a second.
- ``/redirect?to=URL``: ``302 Found`` with ``Location: URL``.
- ``/body?length=N&first=M``: a body of ``N`` bytes (``x``), of which only the first ``M`` are sent at once;
  the rest follows when the caller sends something more on the connection or closes it (at most 10 s).
- ``/trickle?part=P&every=S``: ``200 OK``, drawn out for 12 s or more, ``S`` seconds between sends: ``P`` is
  ``status`` (the status line a byte at a time), ``headers`` (forty header lines, one at a time) or
  ``body`` (a body of 4,096 bytes, one byte at a time, after headers sent at once).
``Network`` keeps every packet on this machine: a connection to a non-loopback address is refused at
once (and noted), so a test can let a resolver answer a public address without calling the internet.
``make_tls_files`` writes a CA and a server certificate signed by it.
"""

from __future__ import annotations

import datetime
import ipaddress
import select
import socket
import ssl
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import urllib3.util.connection
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID


@dataclass(frozen=True)
class Seen:
    method: str
    path: str
    headers: dict[str, str]  # names in lower case
    body: bytes


@dataclass
class Target:
    """A running server: the port it listens on, what it received and the TLS server names asked for.

    ``connections`` holds the caller's address of each connection the server accepted, in order: two
    requests over one kept-alive connection are two ``requests`` and one connection.
    """

    port: int
    requests: list[Seen] = field(default_factory=list)
    server_names: list[str | None] = field(default_factory=list)
    connections: list[tuple[str, int]] = field(default_factory=list)


def _recording_handler(target: Target) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def setup(self) -> None:
            super().setup()
            target.connections.append(self.client_address[:2])

        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            target.requests.append(
                Seen(self.command, self.path, {k.lower(): v for k, v in self.headers.items()}, body)
            )
            path = urlsplit(self.path)
            query = {name: values[0] for name, values in parse_qs(path.query).items()}
            if path.path == "/redirect":
                self.send_response(302)
                self.send_header("Location", query["to"])
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
            if path.path == "/body":
                self._send_body(int(query["length"]), int(query.get("first", query["length"])))
                return
            if path.path == "/trickle":
                self._trickle(query["part"], float(query["every"]))
                return
            if self.path.startswith("/slow"):
                time.sleep(1)
            self.send_response(200)
            self.send_header("Content-Length", "2")
            self.end_headers()
            self.wfile.write(b"ok")

        do_GET = do_POST

        def _send_body(self, length: int, first: int) -> None:
            """``length`` bytes, ``first`` of them now and the rest once the caller stirs (or 10 s pass)."""
            self.send_response(200)
            self.send_header("Content-Length", str(length))
            self.end_headers()
            self.wfile.write(b"x" * first)
            if first >= length:
                return
            select.select([self.connection], [], [], 10)  # the caller's next request, or its close
            try:
                self.wfile.write(b"x" * (length - first))
            except OSError:  # the caller closed the connection: what it did not read is gone
                self.close_connection = True

        def _trickle(self, part: str, every: float) -> None:
            """An answer sent a piece at a time, each piece well inside any timeout, the whole far past it."""
            status = b"HTTP/1.1 200 OK\r\n"
            if part == "status":
                pieces = [status[i : i + 1] for i in range(len(status))]
                pieces += [b"Content-Length: 2\r\n\r\nok"]
            elif part == "headers":
                pieces = [status, *(f"X-Drip-{i}: x\r\n".encode() for i in range(40))]
                pieces += [b"Content-Length: 2\r\n\r\nok"]
            else:
                pieces = [status + b"Content-Length: 4096\r\n\r\n", *([b"x"] * 4096)]
            self.close_connection = True
            try:
                for number, piece in enumerate(pieces):
                    if number:
                        time.sleep(every)
                    self.wfile.write(piece)
            except OSError:  # the caller has gone
                pass

        def log_message(self, format: str, *args: Any) -> None:
            pass

    return Handler


@contextmanager
def serve(host: str = "127.0.0.1", tls: ssl.SSLContext | None = None) -> Iterator[Target]:
    """A recording server on ``host`` (an IPv4 or IPv6 loopback address), over TLS when given a context."""

    class Server(ThreadingHTTPServer):
        address_family = socket.AF_INET6 if ":" in host else socket.AF_INET
        daemon_threads = True

    target = Target(port=0)
    server = Server((host, 0), _recording_handler(target))
    target.port = server.server_address[1]
    if tls is not None:
        tls.sni_callback = lambda sock, name, context: target.server_names.append(name)
        server.socket = tls.wrap_socket(server.socket, server_side=True)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        yield target
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


@dataclass
class Network:
    """What urllib3 was asked to connect to, as ``(host, port)``; only loopback addresses answer."""

    connections: list[tuple[str, int]] = field(default_factory=list)

    def connector(self, real: Callable[..., socket.socket]) -> Callable[..., socket.socket]:
        def create_connection(address: tuple[str, int], *args: Any, **kwargs: Any) -> socket.socket:
            self.connections.append(address)
            if _is_ip(address[0]) and not ipaddress.ip_address(address[0]).is_loopback:
                raise ConnectionRefusedError(f"the test network does not reach {address[0]}")
            return real(address, *args, **kwargs)

        return create_connection


@contextmanager
def local_network() -> Iterator[Network]:
    network = Network()
    real = urllib3.util.connection.create_connection
    urllib3.util.connection.create_connection = network.connector(real)
    try:
        yield network
    finally:
        urllib3.util.connection.create_connection = real


def _is_ip(host: str) -> bool:
    try:
        ipaddress.ip_address(host)
    except ValueError:
        return False
    return True


def make_tls_files(directory: Path, server_name: str) -> tuple[Path, Path, Path]:
    """Write ``ca.pem`` and a certificate for ``server_name`` signed by it, with its key; return the three
    paths (CA, certificate, key)."""
    now = datetime.datetime.now(datetime.UTC)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "duetime test CA")])
    ca = (
        _certificate(ca_name, ca_name, ca_key.public_key(), now)
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .add_extension(_key_usage(cert_sign=True), critical=True)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(ca_key.public_key()), critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, server_name)])
    cert = (
        _certificate(name, ca_name, key.public_key(), now)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(_key_usage(cert_sign=False), critical=True)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .add_extension(x509.SubjectAlternativeName([x509.DNSName(server_name)]), critical=False)
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), critical=False
        )
        .sign(ca_key, hashes.SHA256())
    )
    paths = (directory / "ca.pem", directory / "server.pem", directory / "server.key")
    paths[0].write_bytes(ca.public_bytes(serialization.Encoding.PEM))
    paths[1].write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    paths[2].write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        )
    )
    return paths


def _certificate(
    subject: x509.Name, issuer: x509.Name, public_key: ec.EllipticCurvePublicKey, now: datetime.datetime
) -> x509.CertificateBuilder:
    return (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(issuer)
        .public_key(public_key)
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
    )


def _key_usage(cert_sign: bool) -> x509.KeyUsage:
    return x509.KeyUsage(
        digital_signature=True,
        content_commitment=False,
        key_encipherment=False,
        data_encipherment=False,
        key_agreement=False,
        key_cert_sign=cert_sign,
        crl_sign=cert_sign,
        encipher_only=False,
        decipher_only=False,
    )
