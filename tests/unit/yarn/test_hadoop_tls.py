"""An HTTPS_ONLY cluster's certificates, trusted through ssl-client.xml's truststore as Hadoop's clients do:
PEM as it is, PKCS#12 read into PEM, JKS refused with the line that converts it. A real TLS server on
loopback, with a certificate of a CA made here, stands in for the ResourceManager."""

from __future__ import annotations

import datetime
import json
import ssl
import subprocess
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from tony_airflow.errors import UsageError
from tony_airflow.yarn.hadoop_conf import HadoopConf, write_site
from tony_airflow.yarn.hadoop_tls import ca_bundle, tls_verify
from tony_airflow.yarn.jvm import find_java_home
from tony_airflow.yarn.rest import ResourceManagerClient, ResourceManagerError


def _cert(subject: str, key, issuer_key=None, issuer: x509.Certificate | None = None, ca: bool = False):
    now = datetime.datetime.now(datetime.UTC)
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, subject)])
    builder = (x509.CertificateBuilder().subject_name(name)
               .issuer_name(issuer.subject if issuer else name).public_key(key.public_key())
               .serial_number(x509.random_serial_number()).not_valid_before(now - datetime.timedelta(hours=1))
               .not_valid_after(now + datetime.timedelta(days=1))
               .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True))
    if not ca:
        builder = builder.add_extension(x509.SubjectAlternativeName([x509.IPAddress(__import__("ipaddress")
                                                                                      .ip_address("127.0.0.1"))]),
                                        critical=False)
    return builder.sign(issuer_key or key, hashes.SHA256())


@pytest.fixture(scope="module")
def pki(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("pki")
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca = _cert("tony test CA", ca_key, ca=True)
    key = ec.generate_private_key(ec.SECP256R1())
    cert = _cert("127.0.0.1", key, ca_key, ca)
    (tmp / "server.pem").write_bytes(cert.public_bytes(serialization.Encoding.PEM) + key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()))
    (tmp / "ca.pem").write_bytes(ca.public_bytes(serialization.Encoding.PEM))
    for store, kind in (("truststore.p12", "pkcs12"), ("truststore.jks", "jks")):  # as Java's keytool makes them
        subprocess.run([str(find_java_home() / "bin" / "keytool"), "-importcert", "-noprompt", "-alias", "ca",
                        "-file", str(tmp / "ca.pem"), "-keystore", str(tmp / store), "-storetype", kind,
                        "-storepass", "changeit"], check=True, capture_output=True)
    return tmp


def _conf(tmp: Path, store: Path | None, rm: str = "127.0.0.1:1", password: str = "changeit") -> HadoopConf:
    conf_dir = tmp / "conf"
    conf_dir.mkdir(parents=True, exist_ok=True)
    write_site(conf_dir / "yarn-site.xml", {"yarn.http.policy": "HTTPS_ONLY",
                                            "yarn.resourcemanager.webapp.https.address": rm})
    if store is not None:
        write_site(conf_dir / "ssl-client.xml", {"ssl.client.truststore.location": str(store),
                                                 "ssl.client.truststore.password": password,
                                                 "ssl.client.truststore.type": "jks"})
    return HadoopConf.load(conf_dir)


def test_a_pem_truststore_is_used_as_it_is(pki, tmp_path):
    assert ca_bundle(_conf(tmp_path, pki / "ca.pem"), tmp_path / "cache") == str(pki / "ca.pem")


def test_a_pkcs12_truststore_is_read_into_pem(pki, tmp_path):
    pem = ca_bundle(_conf(tmp_path, pki / "truststore.p12"), tmp_path / "cache")
    assert pem and Path(pem).read_bytes() == (pki / "ca.pem").read_bytes()


def test_no_truststore_means_the_systems_cas(tmp_path):
    assert ca_bundle(_conf(tmp_path, None), tmp_path / "cache") is None
    assert tls_verify(_conf(tmp_path, None)) is True


@pytest.mark.parametrize("store,password,message", [
    ("truststore.jks", "changeit", r"truststore.jks is a JKS keystore; allowed: PEM or PKCS#12 \(convert it: keytool"),
    ("truststore.p12", "wrong", r"is neither PEM nor a PKCS#12 store \(or ssl.client.truststore.password is wrong\)"),
    ("missing.pem", "changeit", r"missing.pem cannot be read"),
])
def test_what_cannot_be_used_is_named_in_one_line(pki, tmp_path, store, password, message):
    with pytest.raises(UsageError, match=r"^ssl\.client\.truststore\.location: .*" + message):
        ca_bundle(_conf(tmp_path, pki / store, password=password), tmp_path / "cache")


@pytest.fixture
def https_rm(pki):
    class Handler(BaseHTTPRequestHandler):
        def do_GET(self):
            data = json.dumps({"app": {"id": "application_1_0001", "state": "RUNNING"}}).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(pki / "server.pem")
    server.socket = context.wrap_socket(server.socket, server_side=True)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def test_an_https_only_rm_is_reached_with_the_truststore_and_refused_without(pki, tmp_path, https_rm, monkeypatch):
    monkeypatch.setenv("TONY_CACHE_DIR", str(tmp_path / "cache"))
    trusted = ResourceManagerClient.from_conf(_conf(tmp_path / "a", pki / "truststore.p12", https_rm), auth=None)
    assert trusted.addresses == [f"https://{https_rm}"]
    assert trusted.application("application_1_0001").state == "RUNNING"
    trusted.close()
    untrusted = ResourceManagerClient.from_conf(_conf(tmp_path / "b", None, https_rm), auth=None)
    with pytest.raises(ResourceManagerError, match="CERTIFICATE_VERIFY_FAILED"):
        untrusted.application("application_1_0001")
    untrusted.close()
