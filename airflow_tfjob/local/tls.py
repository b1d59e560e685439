"""A throw-away certificate authority and server certificate, so that token authentication runs over TLS.

kubectl (client-go) sends credentials only over HTTPS: over plain HTTP it silently leaves out tokens and
never runs the exec plugin. And a token sent in clear text over a network could be read by anyone on
it. So a cluster with token authentication serves HTTPS with a certificate made at start-up, signed by
a CA made at the same time; the kubeconfig carries the CA (``certificate-authority-data``), as cloud
kubeconfigs do. The files live in the cluster's workdir, the keys with mode 0600.
"""

from __future__ import annotations

import datetime as dt
import ipaddress
import socket
import ssl
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from airflow_tfjob.local.credential import write_private

_VALIDITY = dt.timedelta(days=30)


@dataclass(frozen=True)
class ServerTls:
    ca_path: Path
    cert_path: Path
    key_path: Path

    @property
    def ca_pem(self) -> bytes:
        return self.ca_path.read_bytes()

    def server_context(self) -> ssl.SSLContext:
        context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        context.load_cert_chain(self.cert_path, self.key_path)
        return context


def _names(host: str) -> list[x509.GeneralName]:
    """Every name a client may use for this server: loopback, this machine's name, the listen address."""
    names: list[x509.GeneralName] = [x509.DNSName("localhost"), x509.DNSName(socket.gethostname())]
    addresses = {"127.0.0.1", "::1", host}
    for address in sorted(addresses):
        try:
            names.append(x509.IPAddress(ipaddress.ip_address(address)))
        except ValueError:
            names.append(x509.DNSName(address))
    return names


def _certificate(subject: str, key: ec.EllipticCurvePrivateKey, issuer: x509.Name,
                 signer: ec.EllipticCurvePrivateKey, *, ca: bool, host: str) -> x509.Certificate:
    now = dt.datetime.now(dt.timezone.utc)
    builder = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, subject)]))
        .issuer_name(issuer)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(minutes=5))
        .not_valid_after(now + _VALIDITY)
        .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
        .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(signer.public_key()), critical=False)
    )
    if ca:
        builder = builder.add_extension(x509.KeyUsage(
            digital_signature=True, key_cert_sign=True, crl_sign=True, content_commitment=False,
            key_encipherment=False, data_encipherment=False, key_agreement=False, encipher_only=False,
            decipher_only=False), critical=True)
    else:
        builder = builder.add_extension(x509.SubjectAlternativeName(_names(host)), critical=False) \
            .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
    return builder.sign(signer, hashes.SHA256())


def make_server_tls(directory: Path, host: str) -> ServerTls:
    """A new CA and a server certificate for `host` (and loopback), written to `directory`."""
    pem = serialization.Encoding.PEM
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "tfjob-local CA")])
    ca_cert = _certificate("tfjob-local CA", ca_key, ca_name, ca_key, ca=True, host=host)
    key = ec.generate_private_key(ec.SECP256R1())
    cert = _certificate("tfjob-local", key, ca_name, ca_key, ca=False, host=host)
    tls = ServerTls(directory / "ca.crt", directory / "server.crt", directory / "server.key")
    directory.mkdir(parents=True, exist_ok=True)
    tls.ca_path.write_bytes(ca_cert.public_bytes(pem))
    tls.cert_path.write_bytes(cert.public_bytes(pem))
    write_private(tls.key_path, key.private_bytes(pem, serialization.PrivateFormat.PKCS8,
                                                  serialization.NoEncryption()).decode())
    return tls
