"""Credentials of the test bed, made once and kept in .testbed/pki: a CA and the API server's
serving certificate (openssl), the service-account signing key pair, static bearer tokens, and
the kubeconfigs built from them. The serving certificate also names the real node's gateway
address when there is one (`extra_ips`), and the API server has a client certificate for
kubelets."""

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
    # The real node (testbed_node.py): the Node authorizer knows kubelets by this name and group;
    # system:kube-proxy is bound by the bootstrap policy (system:node-proxier); CoreDNS gets a
    # list/watch ClusterRole from testbed_node.COREDNS_RBAC.
    "kubelet": ("system:node:testbed-node", "system:nodes"),
    "kube-proxy": ("system:kube-proxy", ""),
    "coredns": ("system:coredns", ""),
}

SERVICE_CIDR = "10.96.0.0/16"
SERVICE_IP = "10.96.0.1"  # first address of SERVICE_CIDR: the `kubernetes` Service


@dataclass(frozen=True)
class Pki:
    dir: Path
    # Addresses the serving certificate must also carry (the real node's gateway, where pods
    # reach the API server); a certificate without one of them is reissued.
    extra_ips: tuple[str, ...] = ()

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
    def kubelet_client_crt(self) -> Path:
        """The API server's client certificate towards kubelets (logs, exec): system:masters."""
        return self.dir / "apiserver-kubelet-client.crt"

    @property
    def kubelet_client_key(self) -> Path:
        return self.dir / "apiserver-kubelet-client.key"

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
        if not (self.server_crt.exists() and self.server_key.exists()) or not self._has_ips():
            self._server_cert()
        if not (self.kubelet_client_crt.exists() and self.kubelet_client_key.exists()):
            self._client_cert(
                self.kubelet_client_crt,
                self.kubelet_client_key,
                "/O=system:masters/CN=kube-apiserver-kubelet-client",
            )
        if not (self.sa_key.exists() and self.sa_pub.exists()):
            _openssl("genrsa", "-out", self.sa_key, "2048")
            _openssl("rsa", "-in", self.sa_key, "-pubout", "-out", self.sa_pub)
        have = set()
        if self.tokens_csv.exists():
            with open(self.tokens_csv, newline="") as f:
                have = {row[1] for row in csv.reader(f) if len(row) > 1}
        if have >= {user for user, _ in USERS.values()}:
            return
        # New users (a test bed made before they existed) are appended; tokens are never rotated.
        with open(self.tokens_csv, "a", newline="") as f:
            w = csv.writer(f)
            for i, (user, groups) in enumerate(USERS.values()):
                if user not in have:
                    w.writerow(
                        [secrets.token_hex(24), user, f"uid-{i}", *([groups] if groups else [])]
                    )
        self.tokens_csv.chmod(0o600)

    def _has_ips(self) -> bool:
        if not self.extra_ips:
            return True
        out = subprocess.run(
            ["openssl", "x509", "-noout", "-ext", "subjectAltName", "-in", str(self.server_crt)],
            capture_output=True,
            text=True,
        ).stdout
        return all(f"IP Address:{ip}" in out for ip in self.extra_ips)

    def _client_cert(self, crt: Path, key: Path, subject: str) -> None:
        csr, ext = self.dir / "client.csr", self.dir / "client.ext"
        ext.write_text(
            "basicConstraints=CA:FALSE\nkeyUsage=digitalSignature,keyEncipherment\n"
            "extendedKeyUsage=clientAuth\n"
        )
        _openssl(
            "req", "-newkey", "rsa:2048", "-nodes", "-keyout", key, "-out", csr, "-subj", subject
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
            crt,
        )
        csr.unlink()
        ext.unlink()

    def _server_cert(self) -> None:
        csr, ext = self.dir / "apiserver.csr", self.dir / "apiserver.ext"
        sans = [
            "IP:127.0.0.1",
            f"IP:{SERVICE_IP}",
            *(f"IP:{ip}" for ip in self.extra_ips),
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
