"""A real Kubernetes control plane for the tests, the envtest way: etcd, kube-apiserver and
kube-controller-manager from ``../shared/k8s``, started once per test session.

:func:`find_assets` reads ``RECONCILER_K8S_ASSETS`` (a folder with ``etcd.xz``,
``kube-apiserver.xz``, ``kube-controller-manager.xz`` and ``SHA256SUMS``); :func:`unpack`
unpacks them once into a cache (``RECONCILER_K8S_CACHE``, else
``~/.cache/reconciler-test/k8s-<digest of SHA256SUMS>/``), checks each binary's sha256 and
renames the finished folder into place, so concurrent or interrupted unpacks are safe.
:func:`start_control_plane` makes its own certificates (``openssl``), starts the three servers on
free loopback ports in a temporary folder (an audit log at the ``Metadata`` level included),
waits until they are ready (``/readyz``, the ``extension-apiserver-authentication`` ConfigMap,
kube-controller-manager's ``/healthz`` and the ``default`` ServiceAccount; a
kube-controller-manager that exits early, racing the API server's RBAC bootstrap, is started
again), writes an admin kubeconfig and yields a :class:`ControlPlane`; at the end it stops the
servers by the PIDs it started, TERM then KILL, and removes the folder. Used by the
``kube_control_plane`` fixture of ``tests/conftest.py``.
"""

from __future__ import annotations

import base64
import contextlib
import ctypes
import hashlib
import json
import lzma
import os
import shutil
import signal
import socket
import ssl
import subprocess
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

ASSETS_ENV = "RECONCILER_K8S_ASSETS"
CACHE_ENV = "RECONCILER_K8S_CACHE"
KUBECONFIG_ENV = "RECONCILER_TEST_KUBECONFIG"
BINARIES = ("etcd", "kube-apiserver", "kube-controller-manager")
#: The user of the admin kubeconfig (the audit log's ``user.username`` of the tests' calls).
ADMIN_USER = "kubernetes-admin"
READY_SECONDS = 180.0
KCM_STARTS = 3
AUDIT_POLICY = {
    "apiVersion": "audit.k8s.io/v1",
    "kind": "Policy",
    "omitStages": ["RequestReceived"],  # one event per request: when its answer is complete
    "rules": [{"level": "Metadata"}],
}


class ControlPlaneError(RuntimeError):
    """The control plane could not be unpacked or started (the message says why)."""


@dataclass(frozen=True, slots=True)
class ControlPlane:
    """A running API server as the tests reach it.

    ``kubeconfig`` is an admin kubeconfig (``system:masters``); it lies alone in
    ``kubeconfig_dir`` (what ``--kubeconfig-dir`` takes, with ``kubeconfigFile:`` set to its
    name). ``audit_log`` is the API server's audit log (``None`` for a cluster given by
    ``RECONCILER_TEST_KUBECONFIG``, whose log the tests cannot read: a test that reads it is
    skipped there)."""

    kubeconfig: Path
    server: str
    audit_log: Path | None

    @property
    def kubeconfig_dir(self) -> Path:
        return self.kubeconfig.parent

    @property
    def kubeconfig_name(self) -> str:
        return self.kubeconfig.name

    def token_kubeconfig(self, path: Path, token: str, user: str = "token") -> Path:
        """Write at ``path`` a kubeconfig reaching this server with ``token`` (a
        ServiceAccount's, from the TokenRequest API) instead of the admin's certificate."""
        cluster = yaml.safe_load(self.kubeconfig.read_text())["clusters"][0]
        context = {"cluster": cluster["name"], "user": user}
        config = {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [cluster],
            "users": [{"name": user, "user": {"token": token}}],
            "contexts": [{"name": user, "context": context}],
            "current-context": user,
        }
        path.write_text(yaml.safe_dump(config))
        return path

    def audit_mark(self) -> int:
        """Where the audit log ends now: pass it to :meth:`audit_events` later."""
        log = self._audit_log()
        return log.stat().st_size if log.exists() else 0

    def audit_events(self, since: int, *, user: str | None = ADMIN_USER) -> list[dict[str, Any]]:
        """Audit events (one per request) written after ``since``, of ``user`` (all: None)."""
        log = self._audit_log()
        with log.open("rb") as file:
            file.seek(since)
            text = file.read()
        events = [json.loads(line) for line in text.splitlines() if line.endswith(b"}")]
        if user is None:
            return events
        return [e for e in events if (e.get("user") or {}).get("username") == user]

    def _audit_log(self) -> Path:
        if self.audit_log is None:
            pytest.skip(f"no audit log: the cluster of {KUBECONFIG_ENV} is not ours")
        return self.audit_log


# -- the binaries ---------------------------------------------------------------------------------


def find_assets() -> Path | None:
    """The folder ``RECONCILER_K8S_ASSETS`` names, or None when unset."""
    value = os.environ.get(ASSETS_ENV)
    return Path(value).expanduser().resolve() if value else None


def _checksums(assets: Path) -> dict[str, str]:
    sums: dict[str, str] = {}
    for line in (assets / "SHA256SUMS").read_text(encoding="utf-8").splitlines():
        digest, _, name = line.strip().partition("  ")
        if digest and name:
            sums[name.strip()] = digest
    missing = [b for b in BINARIES if b not in sums or not (assets / f"{b}.xz").is_file()]
    if missing:
        raise ControlPlaneError(f"{assets}: no {', '.join(missing)} (.xz and SHA256SUMS entry)")
    return sums


def cache_folder(assets: Path) -> Path:
    """Where :func:`unpack` keeps the binaries of ``assets``: one folder per SHA256SUMS."""
    digest = hashlib.sha256((assets / "SHA256SUMS").read_bytes()).hexdigest()[:16]
    base = os.environ.get(CACHE_ENV)
    root = Path(base).expanduser() if base else Path.home() / ".cache" / "reconciler-test"
    return root / f"k8s-{digest}"


def unpack(assets: Path) -> Path:
    """The folder of the unpacked, verified binaries of ``assets`` (unpacked on first use)."""
    sums = _checksums(assets)
    target = cache_folder(assets)
    if target.is_dir():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    partial = Path(tempfile.mkdtemp(prefix=f".{target.name}-", dir=target.parent))
    try:
        for name in BINARIES:
            _unpack_one(assets / f"{name}.xz", partial / name, sums[name])
        with contextlib.suppress(OSError):  # another session finished first: use its folder
            partial.rename(target)
    finally:
        shutil.rmtree(partial, ignore_errors=True)
    if not target.is_dir():
        raise ControlPlaneError(f"could not unpack {assets} into {target}")
    return target


def _unpack_one(source: Path, target: Path, sha256: str) -> None:
    digest = hashlib.sha256()
    with lzma.open(source, "rb") as packed, target.open("wb") as out:
        while chunk := packed.read(1 << 20):
            digest.update(chunk)
            out.write(chunk)
    if digest.hexdigest() != sha256:
        raise ControlPlaneError(f"{source}: unpacked sha256 {digest.hexdigest()} != {sha256}")
    target.chmod(0o755)


# -- certificates and kubeconfigs ----------------------------------------------------------------

_SERVER_NAMES = (
    "IP:127.0.0.1,DNS:localhost,DNS:kubernetes,DNS:kubernetes.default,"
    "DNS:kubernetes.default.svc,DNS:kubernetes.default.svc.cluster.local"
)
_EXTENSIONS = {
    "server": "basicConstraints=CA:FALSE\nkeyUsage=critical,digitalSignature,keyEncipherment\n"
    f"extendedKeyUsage=serverAuth\nsubjectAltName={_SERVER_NAMES}\n",
    "client": "basicConstraints=CA:FALSE\nkeyUsage=critical,digitalSignature,keyEncipherment\n"
    "extendedKeyUsage=clientAuth\n",
}
#: name, subject, extensions, signing CA
_LEAVES = (
    ("apiserver", "/CN=kube-apiserver", "server", "ca"),
    ("admin", f"/O=system:masters/CN={ADMIN_USER}", "client", "ca"),
    ("kcm", "/CN=system:kube-controller-manager", "client", "ca"),
    ("kubelet-client", "/O=system:masters/CN=kube-apiserver-kubelet-client", "client", "ca"),
    ("front-proxy-client", "/CN=front-proxy-client", "client", "front-proxy-ca"),
)


def _openssl(*args: str | Path) -> None:
    done = subprocess.run(["openssl", *map(str, args)], capture_output=True, check=False)
    if done.returncode != 0:
        raise ControlPlaneError(f"openssl {args[0]}: {done.stderr.decode(errors='replace')}")


def make_certificates(pki: Path) -> None:
    """A CA and a front-proxy CA, the serving and client certificates signed by them, and the
    service-account key pair, in ``pki``."""
    pki.mkdir(parents=True)
    for ca in ("ca", "front-proxy-ca"):
        _openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "30",
                 "-subj", f"/CN=reconciler-test-{ca}",
                 "-keyout", pki / f"{ca}.key", "-out", pki / f"{ca}.crt")  # fmt: skip
    for kind, text in _EXTENSIONS.items():
        (pki / f"{kind}.ext").write_text(text, encoding="utf-8")
    for name, subject, kind, ca in _LEAVES:
        _openssl("req", "-newkey", "rsa:2048", "-nodes", "-subj", subject,
                 "-keyout", pki / f"{name}.key", "-out", pki / f"{name}.csr")  # fmt: skip
        _openssl("x509", "-req", "-in", pki / f"{name}.csr", "-CA", pki / f"{ca}.crt",
                 "-CAkey", pki / f"{ca}.key", "-CAcreateserial", "-days", "30",
                 "-extfile", pki / f"{kind}.ext", "-out", pki / f"{name}.crt")  # fmt: skip
    _openssl("genrsa", "-out", pki / "sa.key", "2048")
    _openssl("rsa", "-in", pki / "sa.key", "-pubout", "-out", pki / "sa.pub")


def write_kubeconfig(path: Path, server: str, pki: Path, user: str, cert: str) -> None:
    """A kubeconfig for ``server`` with the client certificate ``cert`` of ``pki``."""

    def data(name: str) -> str:
        return base64.b64encode((pki / name).read_bytes()).decode()

    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {
                "name": "local",
                "cluster": {"server": server, "certificate-authority-data": data("ca.crt")},
            }
        ],
        "users": [
            {
                "name": user,
                "user": {
                    "client-certificate-data": data(f"{cert}.crt"),
                    "client-key-data": data(f"{cert}.key"),
                },
            }
        ],
        "contexts": [{"name": "local", "context": {"cluster": "local", "user": user}}],
        "current-context": "local",
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(config), encoding="utf-8")
    path.chmod(0o600)


# -- processes -----------------------------------------------------------------------------------


def free_ports(count: int) -> list[int]:
    """``count`` distinct loopback ports free right now (bound to port 0, then released)."""
    with contextlib.ExitStack() as stack:
        sockets = [stack.enter_context(socket.socket()) for _ in range(count)]
        for sock in sockets:
            sock.bind(("127.0.0.1", 0))
        return [int(sock.getsockname()[1]) for sock in sockets]


def _die_with_parent() -> None:
    """In the child: TERM when the test process dies, so no server outlives a killed run."""
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG


@dataclass
class _Process:
    name: str
    popen: subprocess.Popen[bytes]
    log: Path

    def alive(self) -> bool:
        return self.popen.poll() is None

    def tail(self, lines: int = 15) -> str:
        text = self.log.read_text(encoding="utf-8", errors="replace") if self.log.exists() else ""
        return "\n".join(text.splitlines()[-lines:])

    def stop(self) -> None:
        """TERM, then KILL after 10 s; by the PID we started, never by name."""
        if self.popen.poll() is not None:
            return
        self.popen.send_signal(signal.SIGTERM)
        try:
            self.popen.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.popen.kill()
            self.popen.wait(timeout=10)


def _launch(name: str, args: list[str], logs: Path) -> _Process:
    log = logs / f"{name}.log"
    with log.open("ab") as out:
        popen = subprocess.Popen(
            args,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            preexec_fn=_die_with_parent,  # in the child, after the fork
        )
    return _Process(name, popen, log)


@dataclass(frozen=True, slots=True)
class _Ports:
    etcd: int
    etcd_peer: int
    api: int
    kcm: int


class _Start:
    """One start of the control plane in ``root``: the processes, and the wait for each."""

    def __init__(self, bin_dir: Path, root: Path) -> None:
        self.bin = bin_dir
        self.root = root
        self.pki = root / "pki"
        self.logs = root / "logs"
        self.logs.mkdir(parents=True)
        self.ports = _Ports(*free_ports(4))
        self.server = f"https://127.0.0.1:{self.ports.api}"
        self.kubeconfig = root / "kubeconfigs" / "admin.yaml"
        self.audit_log = root / "audit" / "audit.log"
        self.processes: list[_Process] = []
        self.deadline = time.monotonic() + READY_SECONDS

    def run(self) -> ControlPlane:
        make_certificates(self.pki)
        write_kubeconfig(self.kubeconfig, self.server, self.pki, ADMIN_USER, "admin")
        kcm_user = "system:kube-controller-manager"
        write_kubeconfig(self.root / "kcm.yaml", self.server, self.pki, kcm_user, "kcm")
        self._start_etcd()
        self._start_apiserver()
        self._start_kcm()
        return ControlPlane(self.kubeconfig, self.server, self.audit_log)

    def stop(self) -> None:
        for process in reversed(self.processes):
            process.stop()

    # -- each server ----------------------------------------------------------------------------

    def _start_etcd(self) -> None:
        client = f"http://127.0.0.1:{self.ports.etcd}"
        peer = f"http://127.0.0.1:{self.ports.etcd_peer}"
        self._launch("etcd", [
            "--name", "test", "--data-dir", str(self.root / "etcd"),
            "--listen-client-urls", client, "--advertise-client-urls", client,
            "--listen-peer-urls", peer, "--unsafe-no-fsync",
            "--quota-backend-bytes", str(2 << 30),
        ])  # fmt: skip
        self._wait("etcd /health", lambda: '"health":"true"' in _http(f"{client}/health"))

    def _start_apiserver(self) -> None:
        policy = self.root / "audit-policy.yaml"
        policy.write_text(yaml.safe_dump(AUDIT_POLICY), encoding="utf-8")
        self.audit_log.parent.mkdir()
        pki = self.pki
        self._launch("kube-apiserver", [
            "--etcd-servers", f"http://127.0.0.1:{self.ports.etcd}",
            "--bind-address", "127.0.0.1", "--advertise-address", "127.0.0.1",
            "--secure-port", str(self.ports.api), "--cert-dir", str(self.root / "apiserver-certs"),
            "--tls-cert-file", f"{pki}/apiserver.crt",
            "--tls-private-key-file", f"{pki}/apiserver.key",
            "--client-ca-file", f"{pki}/ca.crt",
            "--kubelet-client-certificate", f"{pki}/kubelet-client.crt",
            "--kubelet-client-key", f"{pki}/kubelet-client.key",
            "--service-account-issuer", "https://kubernetes.default.svc.cluster.local",
            "--service-account-key-file", f"{pki}/sa.pub",
            "--service-account-signing-key-file", f"{pki}/sa.key",
            "--service-cluster-ip-range", "10.0.0.0/24",
            "--requestheader-client-ca-file", f"{pki}/front-proxy-ca.crt",
            "--requestheader-allowed-names", "front-proxy-client",
            "--requestheader-username-headers", "X-Remote-User",
            "--requestheader-group-headers", "X-Remote-Group",
            "--requestheader-extra-headers-prefix", "X-Remote-Extra-",
            "--proxy-client-cert-file", f"{pki}/front-proxy-client.crt",
            "--proxy-client-key-file", f"{pki}/front-proxy-client.key",
            "--authorization-mode", "Node,RBAC", "--allow-privileged=true", "--profiling=false",
            "--audit-policy-file", str(policy), "--audit-log-path", str(self.audit_log),
        ])  # fmt: skip
        self._wait("kube-apiserver /readyz", lambda: self._api("/readyz") == "ok")
        authentication = "/api/v1/namespaces/kube-system/configmaps/"
        authentication += "extension-apiserver-authentication"
        self._wait(f"ConfigMap {authentication}", lambda: bool(self._api(authentication)))

    def _kcm_args(self) -> list[str]:
        kubeconfig, pki = str(self.root / "kcm.yaml"), self.pki
        return [
            "--kubeconfig", kubeconfig, "--authentication-kubeconfig", kubeconfig,
            "--authorization-kubeconfig", kubeconfig,
            "--bind-address", "127.0.0.1", "--secure-port", str(self.ports.kcm),
            "--cert-dir", str(self.root / "kcm-certs"),
            "--leader-elect=false", "--use-service-account-credentials=true",
            "--controllers=*,-deployment-controller,-replicaset-controller",
            "--service-account-private-key-file", f"{pki}/sa.key",
            "--root-ca-file", f"{pki}/ca.crt",
            "--cluster-signing-cert-file", f"{pki}/ca.crt",
            "--cluster-signing-key-file", f"{pki}/ca.key", "--profiling=false",
        ]  # fmt: skip

    def _start_kcm(self) -> None:
        """Started again (up to :data:`KCM_STARTS` times) when it exits early: it can race the
        API server's RBAC bootstrap on a slow machine."""
        kcm = self._launch("kube-controller-manager", self._kcm_args())
        healthz = f"https://127.0.0.1:{self.ports.kcm}/healthz"
        default_sa = "/api/v1/namespaces/default/serviceaccounts/default"
        starts = 1
        while not (_http(healthz, insecure=True) == "ok" and self._api(default_sa)):
            if not kcm.alive():
                if starts >= KCM_STARTS:
                    self._fail(f"kube-controller-manager exited {starts} times")
                self.processes.remove(kcm)
                kcm = self._launch("kube-controller-manager", self._kcm_args())
                starts += 1
            self._pause("kube-controller-manager /healthz and the default ServiceAccount")

    # -- helpers ---------------------------------------------------------------------------------

    def _launch(self, name: str, args: list[str]) -> _Process:
        process = _launch(name, [str(self.bin / name), *args], self.logs)
        self.processes.append(process)
        return process

    def _api(self, path: str) -> str:
        context = ssl.create_default_context(cafile=str(self.pki / "ca.crt"))
        context.load_cert_chain(str(self.pki / "admin.crt"), str(self.pki / "admin.key"))
        return _http(self.server + path, context=context)

    def _wait(self, what: str, ready: Callable[[], bool]) -> None:
        while not ready():
            self._pause(what)

    def _pause(self, what: str) -> None:
        """Between two polls: fail when a server died or the deadline passed."""
        for process in self.processes:
            if not process.alive() and process.name != "kube-controller-manager":
                self._fail(f"{process.name} exited while waiting for {what}")
        if time.monotonic() > self.deadline:
            self._fail(f"not ready after {READY_SECONDS:.0f} s: {what}")
        time.sleep(0.25)  # polling a condition with a deadline

    def _fail(self, message: str) -> None:
        tails = "\n".join(f"--- {p.name}.log\n{p.tail()}" for p in self.processes)
        raise ControlPlaneError(f"{message}\n{tails}")


def _http(url: str, *, context: ssl.SSLContext | None = None, insecure: bool = False) -> str:
    """The body of a GET of ``url``, or "" when it fails or answers an error."""
    if insecure:
        context = ssl.create_default_context()
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
    try:
        with urllib.request.urlopen(url, timeout=5, context=context) as answer:
            return str(answer.read().decode(errors="replace"))
    except (urllib.error.URLError, OSError, ValueError):
        return ""


@contextlib.contextmanager
def start_control_plane(bin_dir: Path) -> Iterator[ControlPlane]:
    """A running control plane from the binaries in ``bin_dir``, stopped and removed after."""
    root = Path(tempfile.mkdtemp(prefix="reconciler-k8s-"))
    start = _Start(bin_dir, root)
    try:
        yield start.run()
    finally:
        start.stop()
        shutil.rmtree(root, ignore_errors=True)


def external_control_plane(kubeconfig: Path) -> ControlPlane:
    """The cluster of a kubeconfig given by ``RECONCILER_TEST_KUBECONFIG`` (no audit log)."""
    config = yaml.safe_load(kubeconfig.read_text(encoding="utf-8")) or {}
    current = config.get("current-context")
    contexts = {c["name"]: c["context"] for c in config.get("contexts") or []}
    clusters = {c["name"]: c["cluster"] for c in config.get("clusters") or []}
    cluster_name = (contexts.get(current) or {}).get("cluster")
    server = str((clusters.get(cluster_name) or {}).get("server", ""))
    return ControlPlane(kubeconfig.resolve(), server, None)
