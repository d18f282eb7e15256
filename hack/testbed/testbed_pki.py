"""Credentials of the test bed, made once and kept in .testbed/pki: a CA and the API server's
serving certificate (openssl), the service-account signing key pair, static bearer tokens, and
the kubeconfigs built from them."""

from __future__ import annotations

import base64
import csv
import secrets
import subprocess
from dataclasses import dataclass
from pathlib import Path

# Who gets a static token, and in which groups. The controller-manager and scheduler use the
# users the RBAC bootstrap policy binds (system:kube-controller-manager, system:kube-scheduler);
# kwok plays every kubelet, so it and the test admin are system:masters.
USERS: dict[str, tuple[str, str]] = {
    "admin": ("admin", "system:masters"),
    "controller-manager": ("system:kube-controller-manager", ""),
    "scheduler": ("system:kube-scheduler", ""),
    "kwok": ("kwok", "system:masters"),
}

SERVICE_CIDR = "10.96.0.0/16"
SERVICE_IP = "10.96.0.1"  # first address of SERVICE_CIDR: the `kubernetes` Service


@dataclass(frozen=True)
class Pki:
    dir: Path

    @property
    def ca_crt(self) -> Path:
        return self.dir / "ca.crt"

    @property
    def ca_key(self) -> Path:
        return self.dir / "ca.key"

    @property
    def server_crt(self) -> Path:
        return self.dir / "apiserver.crt"

    @property
    def server_key(self) -> Path:
        return self.dir / "apiserver.key"

    @property
    def sa_key(self) -> Path:
        return self.dir / "sa.key"

    @property
    def sa_pub(self) -> Path:
        return self.dir / "sa.pub"

    @property
    def tokens_csv(self) -> Path:
        return self.dir / "tokens.csv"

    def ensure(self) -> None:
        """Create whatever is missing. Idempotent; never rotates what exists."""
        self.dir.mkdir(parents=True, exist_ok=True)
        self.dir.chmod(0o700)
        if not (self.ca_crt.exists() and self.ca_key.exists()):
            _openssl(
                "req",
                "-x509",
                "-newkey",
                "rsa:2048",
                "-nodes",
                "-days",
                "3650",
                "-keyout",
                self.ca_key,
                "-out",
                self.ca_crt,
                "-subj",
                "/CN=stream-autoscaler-testbed-ca",
            )
            self.server_crt.unlink(missing_ok=True)
        if not (self.server_crt.exists() and self.server_key.exists()):
            self._server_cert()
        if not (self.sa_key.exists() and self.sa_pub.exists()):
            _openssl("genrsa", "-out", self.sa_key, "2048")
            _openssl("rsa", "-in", self.sa_key, "-pubout", "-out", self.sa_pub)
        if not self.tokens_csv.exists():
            with open(self.tokens_csv, "w", newline="") as f:
                w = csv.writer(f)
                for i, (user, groups) in enumerate(USERS.values()):
                    w.writerow(
                        [secrets.token_hex(24), user, f"uid-{i}", *([groups] if groups else [])]
                    )
            self.tokens_csv.chmod(0o600)

    def _server_cert(self) -> None:
        csr, ext = self.dir / "apiserver.csr", self.dir / "apiserver.ext"
        sans = [
            "IP:127.0.0.1",
            f"IP:{SERVICE_IP}",
            "DNS:localhost",
            "DNS:kubernetes",
            "DNS:kubernetes.default",
            "DNS:kubernetes.default.svc",
            "DNS:kubernetes.default.svc.cluster.local",
        ]
        ext.write_text(
            "basicConstraints=CA:FALSE\nkeyUsage=digitalSignature,keyEncipherment\n"
            f"extendedKeyUsage=serverAuth\nsubjectAltName={','.join(sans)}\n"
        )
        _openssl(
            "req",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-keyout",
            self.server_key,
            "-out",
            csr,
            "-subj",
            "/CN=kube-apiserver",
        )
        _openssl(
            "x509",
            "-req",
            "-in",
            csr,
            "-CA",
            self.ca_crt,
            "-CAkey",
            self.ca_key,
            "-CAcreateserial",
            "-days",
            "3650",
            "-extfile",
            ext,
            "-out",
            self.server_crt,
        )
        csr.unlink()
        ext.unlink()

    def token(self, who: str) -> str:
        user = USERS[who][0]
        with open(self.tokens_csv, newline="") as f:
            for row in csv.reader(f):
                if row[1] == user:
                    return row[0]
        raise KeyError(who)

    def kubeconfig(self, path: Path, server: str, who: str, context: str = "testbed") -> Path:
        """Write a kubeconfig for ``who`` (a key of USERS) with the CA and token inline."""
        ca = base64.b64encode(self.ca_crt.read_bytes()).decode()
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(
            f"""apiVersion: v1
kind: Config
clusters:
- name: testbed
  cluster:
    server: {server}
    certificate-authority-data: {ca}
users:
- name: {who}
  user:
    token: {self.token(who)}
contexts:
- name: {context}
  context:
    cluster: testbed
    user: {who}
    namespace: default
current-context: {context}
"""
        )
        path.chmod(0o600)
        return path


def _openssl(*args: object) -> None:
    subprocess.run(["openssl", *map(str, args)], check=True, capture_output=True)
