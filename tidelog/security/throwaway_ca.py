"""A throwaway certificate authority for tests: a CA, a broker certificate valid for localhost/127.0.0.1 (the
hostname verification clients do by default) and client certificates, generated with `cryptography` (EC P-256,
fast) and written as PEM (and PKCS12 on request)."""

from __future__ import annotations

import datetime
import ipaddress
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.serialization import pkcs12
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID


@dataclass(frozen=True)
class IssuedCert:
    cert_pem: Path  # the certificate (followed by the CA certificate: a chain)
    key_pem: Path  # unencrypted PKCS8 private key
    keystore_pem: Path  # key + chain in one file (ssl.keystore.type=PEM)
    subject: str  # RFC 2253 DN, as the broker's mTLS principal shows it


def _name(common_name: str, org: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.ORGANIZATION_NAME, org),
                      x509.NameAttribute(NameOID.ORGANIZATIONAL_UNIT_NAME, "test"),
                      x509.NameAttribute(NameOID.COMMON_NAME, common_name)])


class ThrowawayCA:
    def __init__(self, directory: str | Path, org: str = "tidelog-test") -> None:
        self.dir = Path(directory)
        self.dir.mkdir(parents=True, exist_ok=True)
        self.org = org
        self._key = ec.generate_private_key(ec.SECP256R1())
        now = datetime.datetime.now(datetime.UTC)
        name = _name("tidelog throwaway CA", org)
        self._cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name)
                      .public_key(self._key.public_key()).serial_number(x509.random_serial_number())
                      .not_valid_before(now - datetime.timedelta(minutes=5))
                      .not_valid_after(now + datetime.timedelta(days=2))
                      .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
                      .add_extension(x509.KeyUsage(digital_signature=True, key_cert_sign=True, crl_sign=True,
                                                   content_commitment=False, key_encipherment=False,
                                                   data_encipherment=False, key_agreement=False,
                                                   encipher_only=False, decipher_only=False), critical=True)
                      .sign(self._key, hashes.SHA256()))
        self.ca_pem = self.dir / "ca.pem"
        self.ca_pem.write_bytes(self._cert.public_bytes(serialization.Encoding.PEM))

    @property
    def certificate(self) -> x509.Certificate:
        return self._cert

    def issue(self, common_name: str, *, server: bool = False, hosts: tuple[str, ...] = ("localhost", "127.0.0.1"),
              key_password: str | None = None) -> IssuedCert:
        key = ec.generate_private_key(ec.SECP256R1())
        now = datetime.datetime.now(datetime.UTC)
        builder = (x509.CertificateBuilder().subject_name(_name(common_name, self.org))
                   .issuer_name(self._cert.subject).public_key(key.public_key())
                   .serial_number(x509.random_serial_number())
                   .not_valid_before(now - datetime.timedelta(minutes=5))
                   .not_valid_after(now + datetime.timedelta(days=1))
                   .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
                   .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH if server
                                                         else ExtendedKeyUsageOID.CLIENT_AUTH]), critical=False))
        if server:
            sans: list[x509.GeneralName] = []
            for h in hosts:
                try:
                    sans.append(x509.IPAddress(ipaddress.ip_address(h)))
                except ValueError:
                    sans.append(x509.DNSName(h))
            builder = builder.add_extension(x509.SubjectAlternativeName(sans), critical=False)
        cert = builder.sign(self._key, hashes.SHA256())
        stem = self.dir / common_name.replace(" ", "_")
        chain = cert.public_bytes(serialization.Encoding.PEM) + self._cert.public_bytes(serialization.Encoding.PEM)
        encryption: serialization.KeySerializationEncryption = (
            serialization.BestAvailableEncryption(key_password.encode()) if key_password
            else serialization.NoEncryption())
        key_bytes = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, encryption)
        cert_path, key_path, store_path = (Path(f"{stem}.crt.pem"), Path(f"{stem}.key.pem"), Path(f"{stem}.keystore.pem"))
        cert_path.write_bytes(chain)
        key_path.write_bytes(key_bytes)
        store_path.write_bytes(key_bytes + chain)
        for p in (key_path, store_path):
            p.chmod(0o600)
        subject = f"CN={common_name},OU=test,O={self.org}"
        self._issued = getattr(self, "_issued", {})
        self._issued[common_name] = (key, cert)
        return IssuedCert(cert_path, key_path, store_path, subject)

    def pkcs12(self, common_name: str, password: str, path: str | Path | None = None) -> Path:
        """The issued certificate `common_name` with its key and the CA, as a PKCS12 keystore."""
        key, cert = self._issued[common_name]
        out = Path(path) if path is not None else self.dir / f"{common_name}.p12"
        out.write_bytes(pkcs12.serialize_key_and_certificates(
            common_name.encode(), key, cert, [self._cert], serialization.BestAvailableEncryption(password.encode())))
        return out

    def truststore_pkcs12(self, password: str, path: str | Path | None = None) -> Path:
        out = Path(path) if path is not None else self.dir / "truststore.p12"
        out.write_bytes(pkcs12.serialize_key_and_certificates(
            None, None, None, [self._cert], serialization.BestAvailableEncryption(password.encode())))
        return out
