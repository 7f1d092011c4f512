"""A certificate authority of the test's own, for HTTPS tests and measurements."""

from __future__ import annotations

import subprocess
from pathlib import Path

from common import TLS_CONTEXT, fail


class TestCa:
    """A certificate authority of the test's own (openssl CLI, ECDSA P-256, valid two days) and the server
    certificates it issues for 127.0.0.1 and localhost. Its certificate is trusted by `http()` at once;
    clients are pointed at `ca_pem` (SSL_CERT_FILE, NODE_EXTRA_CA_CERTS)."""

    __test__ = False  # not a test class, despite the name

    def __init__(self, directory: Path, name: str = "cairn test CA"):
        self.dir = directory
        self.dir.mkdir(parents=True, exist_ok=True)
        self.ca_key = self.dir / "ca.key"
        self.ca_pem = self.dir / "ca.pem"
        self._run("req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
                  "-keyout", self.ca_key, "-out", self.ca_pem, "-days", "2", "-subj", f"/CN={name}",
                  "-addext", "basicConstraints=critical,CA:TRUE",
                  "-addext", "keyUsage=critical,keyCertSign,cRLSign")
        TLS_CONTEXT.load_verify_locations(cafile=str(self.ca_pem))
        self.issued = 0

    def _run(self, *args) -> None:
        r = subprocess.run(["openssl", *map(str, args)], capture_output=True, text=True, timeout=60)
        if r.returncode != 0:
            fail(f"openssl {' '.join(map(str, args))} failed:\n{r.stderr}")

    def issue(self, name: str = "server", common_name: str = "localhost") -> tuple[Path, Path]:
        """A server certificate (leaf, serverAuth, SAN 127.0.0.1 + localhost) and its key: (cert, key)."""
        self.issued += 1
        key, csr, cert = (self.dir / f"{name}.key", self.dir / f"{name}.csr", self.dir / f"{name}.pem")
        ext = self.dir / f"{name}.ext"
        ext.write_text("subjectAltName=IP:127.0.0.1,DNS:localhost\nbasicConstraints=critical,CA:FALSE\n"
                       "keyUsage=critical,digitalSignature\nextendedKeyUsage=serverAuth\n")
        self._run("req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
                  "-keyout", key, "-out", csr, "-subj", f"/CN={common_name}")
        self._run("x509", "-req", "-in", csr, "-CA", self.ca_pem, "-CAkey", self.ca_key,
                  "-set_serial", str(1000 + self.issued), "-out", cert, "-days", "2", "-extfile", ext)
        return cert, key

    def client_env(self) -> dict:
        """What makes the stock clients trust this CA: OpenSSL and rustls-native-certs read SSL_CERT_FILE,
        Node NODE_EXTRA_CA_CERTS, requests REQUESTS_CA_BUNDLE."""
        ca = str(self.ca_pem)
        return {"SSL_CERT_FILE": ca, "NODE_EXTRA_CA_CERTS": ca, "REQUESTS_CA_BUNDLE": ca, "CURL_CA_BUNDLE": ca}
