"""The CA certificates a client trusts on an HTTPS_ONLY cluster: Hadoop's `ssl-client.xml`.

Hadoop's clients read `ssl.client.truststore.location` (type `ssl.client.truststore.type`, jks by
default; FileBasedKeyStoresFactory) from the resource named by `hadoop.ssl.client.conf` (ssl-client.xml)
in the configuration directory. Python's TLS takes PEM: a PEM bundle is used as it is, a PKCS#12 store
(keytool's default format since Java 9, whatever its `type` says) is read with `cryptography` into a PEM
file cached beside the jars; a JKS store (magic 0xFEEDFEED) is refused with the keytool line that
converts it. Without a truststore, the system's CA bundle is used, as Java uses its cacerts.
"""

from __future__ import annotations

import hashlib
import ssl
from pathlib import Path

from tony_airflow.errors import UsageError
from tony_airflow.files import write_whole
from tony_airflow.yarn.discovery import cache_root
from tony_airflow.yarn.hadoop_conf import HadoopConf, read_site

JKS_MAGIC = b"\xfe\xed\xfe\xed"
PEM_MARK = b"-----BEGIN CERTIFICATE-----"


def tls_verify(conf: HadoopConf) -> str | bool:
    """What HTTPS clients of this cluster verify its certificates with: the PEM form of the truststore
    of ssl-client.xml, else True (the system's CAs)."""
    return ca_bundle(conf, cache_root() / "truststores") or True


def ssl_context(verify: str | bool) -> ssl.SSLContext | bool:
    """httpx's `verify`: a context trusting the PEM bundle, or True/False as given."""
    return ssl.create_default_context(cafile=verify) if isinstance(verify, str) else verify


def _ssl_client_site(conf: HadoopConf) -> dict[str, str]:
    """ssl-client.xml (or the resource `hadoop.ssl.client.conf` names) beside the configuration."""
    name = conf.get("hadoop.ssl.client.conf") or "ssl-client.xml"
    return read_site(conf.conf_dir / name) if conf.conf_dir is not None else {}


def truststore_file(conf: HadoopConf) -> Path | None:
    """The truststore ssl-client.xml names, or None."""
    location = (_ssl_client_site(conf).get("ssl.client.truststore.location") or "").strip()
    return Path(location) if location else None


def ca_bundle(conf: HadoopConf, cache_dir: Path) -> str | None:
    """A PEM file of the CAs `conf` trusts (for httpx's and requests' `verify`), or None for the system's."""
    store = truststore_file(conf)
    if store is None:
        return None
    key = "ssl.client.truststore.location"
    try:
        data = store.read_bytes()
    except OSError as exc:
        raise UsageError(f"{key}: {store} cannot be read: {exc.strerror or exc}") from None
    if PEM_MARK in data:
        return str(store)
    if data.startswith(JKS_MAGIC):
        raise UsageError(f"{key}: {store} is a JKS keystore; allowed: PEM or PKCS#12 (convert it: keytool "
                         f"-importkeystore -srckeystore {store} -destkeystore {store}.p12 -deststoretype pkcs12)")
    password = _ssl_client_site(conf).get("ssl.client.truststore.password") or ""
    pem = _pkcs12_to_pem(data, password, store)
    cache_dir.mkdir(parents=True, exist_ok=True)
    target = cache_dir / f"truststore-{hashlib.sha256(data).hexdigest()[:16]}.pem"
    if not target.exists():
        write_whole(target, pem)
    return str(target)


def _pkcs12_to_pem(data: bytes, password: str, store: Path) -> bytes:
    from cryptography.hazmat.primitives.serialization import Encoding, pkcs12

    try:
        loaded = pkcs12.load_pkcs12(data, password.encode() or None)
    except ValueError:
        raise UsageError(f"ssl.client.truststore.location: {store} is neither PEM nor a PKCS#12 store "
                         "(or ssl.client.truststore.password is wrong); allowed: PEM or PKCS#12") from None
    certs = [c.certificate for c in loaded.additional_certs]
    if loaded.cert is not None:
        certs.append(loaded.cert.certificate)
    if not certs:
        raise UsageError(f"ssl.client.truststore.location: {store} holds no certificate")
    return b"".join(c.public_bytes(Encoding.PEM) for c in certs)
