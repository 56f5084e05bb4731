"""What each watched cluster costs the daemon (issue 43): threads, connections, resident memory
and idle CPU of ``reconciler daemon --watch`` on N clusters, with a least-squares line per cluster.

    RECONCILER_K8S_ASSETS=../shared/k8s python bench/fleet_watch_bench.py [--clusters 1 5 10 20]
        [--window 30] [--workdir bench/out]

One real control plane (tests/support/kube_control_plane.py) is made to look like N clusters:
cluster 0 is reached at ``127.0.0.1``, cluster k at ``127.0.0.(k+1)`` through a relay in this
process (one thread, bytes passed on as they are: TLS runs end to end), each by a kubeconfig file
of its own with ``tls-server-name: localhost``, so that the client verifies the server and every
cluster is another API server to it (its own rate limiter, discovery cache and connections).
Each cluster's runtime lists one small module of its own (a Namespace, a ConfigMap, an operator
Deployment that tests/support/kube_workloads.py makes available). Per N, a fresh git repository
and store, ``reconciler daemon --watch`` (4 workers); once every runtime has succeeded and the
threads have not changed for 10 s, the process is read from /proc: threads, TCP connections to
the API server's port, open file descriptors, resident memory, and CPU over ``--window`` seconds.

The figures are the daemon process's alone. One shared API server also keeps a watch cache per
watched kind and serves every cluster's watches from it: its cost grows with N clusters times the
N clusters' objects (an N-squared term on the server side) that N real API servers would not
have; it is not in these figures, nor in the fit.
"""

from __future__ import annotations

import argparse
import json
import os
import selectors
import shutil
import socket
import sqlite3
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.kube_bench import control_plane  # noqa: E402
from tests.support.kube_control_plane import ControlPlane  # noqa: E402
from tests.support.kube_workloads import deployments_made_available  # noqa: E402
from tests.support.proc_sockets import fetch_connections  # noqa: E402

API = "reconciler.dev/v1alpha1"
TICK = os.sysconf("SC_CLK_TCK")
GIT = ["git", "-c", "user.email=bench@example.io", "-c", "user.name=bench"]


# -- N addresses for one server -------------------------------------------------------------------


class Relay:
    """Listens on ``127.0.0.K:port`` for each K given and passes every connection's bytes on to
    ``127.0.0.1:port`` (and back), all in one thread."""

    def __init__(self, port: int, hosts: list[str]) -> None:
        self.port = port
        self.selector = selectors.DefaultSelector()
        self.peers: dict[socket.socket, socket.socket] = {}
        for host in hosts:
            listener = socket.create_server((host, port))
            listener.setblocking(False)
            self.selector.register(listener, selectors.EVENT_READ, "accept")
        self.stopping = False
        self.thread = threading.Thread(target=self._loop, daemon=True)
        self.thread.start()

    def _loop(self) -> None:
        while not self.stopping:
            for key, _ in self.selector.select(0.5):
                sock = key.fileobj
                assert isinstance(sock, socket.socket)
                if key.data == "accept":
                    self._accept(sock)
                else:
                    self._pass(sock)

    def _accept(self, listener: socket.socket) -> None:
        client, _ = listener.accept()
        server = socket.create_connection(("127.0.0.1", self.port))
        for one, other in ((client, server), (server, client)):
            one.setblocking(False)
            self.peers[one] = other
            self.selector.register(one, selectors.EVENT_READ, "pass")

    def _pass(self, sock: socket.socket) -> None:
        other = self.peers.get(sock)
        if other is None:  # closed by its peer earlier in this round
            return
        try:
            data = sock.recv(65536)
        except OSError:
            data = b""
        if data:
            try:
                other.setblocking(True)  # a relay of idle watches: a rare short block is fine
                other.sendall(data)
                other.setblocking(False)
                return
            except OSError:
                pass
        for one in (sock, other):
            self.selector.unregister(one)
            self.peers.pop(one, None)
            one.close()

    def stop(self) -> None:
        self.stopping = True
        self.thread.join()


def write_kubeconfigs(plane: ControlPlane, folder: Path, clusters: int) -> None:
    """``c000.yaml``..: the admin's kubeconfig, its server at 127.0.0.(k+1), verified as
    ``localhost``."""
    folder.mkdir(parents=True, exist_ok=True)
    port = plane.server.rsplit(":", 1)[1]
    for k in range(clusters):
        config = yaml.safe_load(plane.kubeconfig.read_text())
        cluster = config["clusters"][0]["cluster"]
        cluster["server"] = f"https://127.0.0.{k + 1}:{port}"
        cluster["tls-server-name"] = "localhost"
        (folder / f"c{k:03d}.yaml").write_text(yaml.safe_dump(config))


# -- the fleet ------------------------------------------------------------------------------------


def _dump(path: Path, document: object) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(document, sort_keys=False))


def write_fleet(repo: Path, clusters: int, prefix: str) -> None:
    """One runtime per cluster, each listing one module of its own."""
    settings = {"apiVersion": API, "kind": "Settings", "metadata": {"name": "settings"}}
    settings["spec"] = {"systemNamespace": f"{prefix}-rs"}
    _dump(repo / "reconciler.yaml", settings)
    channel: dict[str, object] = {"apiVersion": API, "kind": "Channel"}
    channel["metadata"] = {"name": "regular"}
    names = [f"{prefix}-m{k:03d}" for k in range(clusters)]
    channel["spec"] = {"modules": dict.fromkeys(names, "1.0.0")}
    _dump(repo / "channels" / "regular.yaml", channel)
    for k, name in enumerate(names):
        spec = {"namespace": name, "operator": {"kind": "Deployment", "name": name}}
        module = {"apiVersion": API, "kind": "Module", "metadata": {"name": name}, "spec": spec}
        _dump(repo / "modules" / name / "module.yaml", module)
        labels = {"app": name}
        template: dict[str, Any] = {"metadata": {"labels": labels}}
        template["spec"] = {"containers": [{"name": "operator", "image": "example/op:1.0.0"}]}
        objects: list[dict[str, Any]] = [
            {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}},
            {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}, "data": {}},
            {
                "apiVersion": "apps/v1",
                "kind": "Deployment",
                "metadata": {"name": name, "labels": {"app.kubernetes.io/version": "1.0.0"}},
                "spec": {"replicas": 1, "selector": {"matchLabels": labels}, "template": template},
            },
        ]
        manifest = repo / "modules" / name / "1.0.0" / "manifest.yaml"
        manifest.parent.mkdir(parents=True, exist_ok=True)
        manifest.write_text(yaml.safe_dump_all(objects, sort_keys=False))
        runtime: dict[str, Any] = {
            "channel": "regular",
            "cluster": {"kubeconfigFile": f"c{k:03d}.yaml"},
        }
        runtime["modules"] = [{"name": name}]
        document = {
            "apiVersion": API,
            "kind": "Runtime",
            "metadata": {"name": f"{prefix}-r{k:03d}"},
        }
        document["spec"] = runtime
        _dump(repo / "runtimes" / f"{prefix}-r{k:03d}.yaml", document)
    subprocess.run(["git", "init", "-q", "-b", "main"], cwd=repo, check=True)
    subprocess.run([*GIT, "add", "-A"], cwd=repo, check=True)
    subprocess.run([*GIT, "commit", "-qm", "fleet"], cwd=repo, check=True)


# -- the daemon process ---------------------------------------------------------------------------


def _port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _cpu(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICK


def _status(pid: int) -> dict[str, str]:
    lines = Path(f"/proc/{pid}/status").read_text().splitlines()
    return {k: v.strip() for k, _, v in (line.partition(":") for line in lines)}


def _succeeded(state: Path) -> int:
    """Runtimes with a succeeded operation in the store."""
    if not state.exists():
        return 0
    with sqlite3.connect(state) as db:
        row = db.execute(
            "SELECT count(DISTINCT runtime) FROM operations WHERE state = 'succeeded'"
        ).fetchone()
    return int(row[0])


@contextmanager
def daemon(work: Path, repo: Path, kubeconfigs: Path) -> Iterator[subprocess.Popen[bytes]]:
    listen = f"127.0.0.1:{_port()}"
    command = [sys.executable, "-m", "reconciler", "daemon", "--repo", str(repo)]
    command += ["--kubeconfig-dir", str(kubeconfigs), "--listen", listen, "--watch"]
    command += ["--interval", "5s", "--resync-interval", "30m", "--workers", "4"]
    command += ["--state", f"sqlite:///{work / 'state.db'}", "--cache-dir", str(work / "cache")]
    env = {**os.environ, "KUBECONFIG": str(kubeconfigs / "c000.yaml")}
    with (work / "daemon.log").open("w") as log:
        process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, cwd=ROOT, env=env)
        try:
            yield process
        finally:
            process.terminate()
            process.wait(60)


def measure(plane: ControlPlane, args: argparse.Namespace, clusters: int) -> dict[str, float]:
    work = args.workdir / f"fleet-watch-{clusters}"
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    write_fleet(work / "repo", clusters, f"fw{clusters}")
    port = int(plane.server.rsplit(":", 1)[1])
    with daemon(work, work / "repo", args.workdir / "fleet-watch-kubeconfigs") as process:
        started = time.monotonic()
        while True:
            time.sleep(2)
            if process.poll() is not None:
                raise SystemExit(f"the daemon exited; see {work / 'daemon.log'}")
            try:
                done = _succeeded(work / "state.db")
            except sqlite3.Error:
                continue
            if done == clusters:
                break
            if time.monotonic() - started > 600:
                raise SystemExit(f"{done} of {clusters} runtimes succeeded in 10 min")
        converged = time.monotonic() - started
        steady, threads = time.monotonic(), _status(process.pid)["Threads"]
        while time.monotonic() - steady < 10:
            time.sleep(1)
            now = _status(process.pid)["Threads"]
            if now != threads:
                steady, threads = time.monotonic(), now
        cpu, begun = _cpu(process.pid), time.monotonic()
        time.sleep(args.window)
        idle = (_cpu(process.pid) - cpu) / (time.monotonic() - begun) * 100
        status = _status(process.pid)
        fds, connected = fetch_connections(process.pid, port)
    return {
        "clusters": clusters,
        "converged_s": converged,
        "threads": int(status["Threads"]),
        "connections": connected,
        "fds": fds,
        "rss_mb": int(status["VmRSS"].split()[0]) / 1024,
        "idle_cpu_pct": idle,
    }


def fit(xs: list[float], ys: list[float]) -> tuple[float, float]:
    """Least squares ``y = slope * x + intercept``."""
    n = len(xs)
    mean_x, mean_y = sum(xs) / n, sum(ys) / n
    spread = sum((x - mean_x) ** 2 for x in xs)
    slope = sum((x - mean_x) * (y - mean_y) for x, y in zip(xs, ys, strict=True)) / spread
    return slope, mean_y - slope * mean_x


def report(rows: list[dict[str, float]]) -> None:
    names = ("threads", "connections", "fds", "rss_mb", "idle_cpu_pct")
    print("clusters  converged  threads  connections  fds  RSS MB  idle CPU %")
    for row in rows:
        print(
            f"{row['clusters']:>8}  {row['converged_s']:>7.0f} s  {row['threads']:>7}  "
            f"{row['connections']:>11}  {row['fds']:>3}  {row['rss_mb']:>6.1f}  "
            f"{row['idle_cpu_pct']:>10.2f}"
        )
    if len(rows) > 1:
        xs = [float(r["clusters"]) for r in rows]
        for name in names:
            slope, intercept = fit(xs, [float(r[name]) for r in rows])
            print(f"fit {name}: {intercept:.2f} + {slope:.3f} per cluster")
    print(
        "(the daemon process only: one API server shared by N clusters also keeps every\n"
        " cluster's objects in the watch caches it serves N clusters' watches from, an\n"
        " N-squared term on the server side that N real API servers would not have)"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clusters", type=int, nargs="+", default=[1, 5, 10, 20])
    parser.add_argument("--window", type=float, default=30.0)
    parser.add_argument("--workdir", type=Path, default=ROOT / "bench" / "out")
    args = parser.parse_args()
    most = max(args.clusters)
    with control_plane() as plane:
        port = int(plane.server.rsplit(":", 1)[1])
        relay = Relay(port, [f"127.0.0.{k + 1}" for k in range(1, most)])
        write_kubeconfigs(plane, args.workdir / "fleet-watch-kubeconfigs", most)
        rows = []
        try:
            with deployments_made_available(plane.kubeconfig):
                for clusters in args.clusters:
                    rows.append(measure(plane, args, clusters))
                    print(json.dumps(rows[-1]), flush=True)
        finally:
            relay.stop()
        (args.workdir / "fleet_watch.json").write_text(json.dumps(rows, indent=2))
        report(rows)


if __name__ == "__main__":
    main()
