"""Probe flood benchmark (issue 23, finding 8): how long ``/healthz`` takes from a fresh
connection while hostile clients hold the daemon's HTTP port.

    python bench/probe_flood_bench.py --hostile 200 --seconds 30
    python bench/probe_flood_bench.py --source /tmp/main-src   # another checkout's daemon

A real ``reconciler daemon`` process (``--source``'s code, default this checkout) follows a
local git copy of ``sample-repo`` on snapshot clusters, with its default HTTP limits (100
connections, 20 per client address, a 10 s read timeout). ``--hostile`` connections are kept
open by one client: half send half a request line and stop (half-open), half trickle a header
byte every second (slowloris); one the server closes is opened again at once, as an attacker
does. Meanwhile a probe opens a fresh connection every 100 ms, as kubelet does, and sends
``GET /healthz`` with a 10 s timeout (kubelet's is 1 s to 5 s). Two rounds: the hostile client
on another address (``127.0.0.2``, as another pod is) and on the probe's own (``127.0.0.1``,
the worst case). Printed: per round, probes, median, p99 and max seconds, probes over 1 s and
5 s, failures, and connections the server closed to make room.
"""

from __future__ import annotations

import argparse
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
GIT = ["git", "-c", "user.email=bench@example.io", "-c", "user.name=bench"]
HOSTILE_ROUNDS = (("another address", "127.0.0.2"), ("the probe's address", "127.0.0.1"))


@dataclass
class Flood:
    """``count`` hostile connections from ``source`` kept open until :meth:`stop`."""

    port: int
    count: int
    source: str
    reopened: int = 0
    stopped: threading.Event = field(default_factory=threading.Event)

    def _open(self, number: int) -> socket.socket | None:
        try:
            sock = socket.create_connection(
                ("127.0.0.1", self.port), timeout=5, source_address=(self.source, 0)
            )
            sock.sendall(b"GET /status HTTP/1.1\r\n" if number % 2 else b"GET /sta")
        except OSError:
            return None
        return sock

    def run(self) -> None:
        held: dict[int, socket.socket | None] = {n: self._open(n) for n in range(self.count)}
        while not self.stopped.wait(1.0):
            for number, sock in list(held.items()):
                if sock is not None and number % 2:  # slowloris: one more header byte
                    try:
                        sock.sendall(b"X")
                        continue
                    except OSError:
                        pass
                if sock is None or _closed(sock):
                    if sock is not None:
                        sock.close()
                    held[number] = self._open(number)
                    self.reopened += 1
        for sock in held.values():
            if sock is not None:
                sock.close()


def _closed(sock: socket.socket) -> bool:
    """Whether the server closed ``sock`` (a 408 or an end of stream waiting)."""
    sock.setblocking(False)
    try:
        data = sock.recv(4096)
    except BlockingIOError:
        return False
    except OSError:
        return True
    finally:
        sock.setblocking(True)
    return not data or data.startswith(b"HTTP/1.1 408")


def probe(port: int) -> float | None:
    """Seconds for ``GET /healthz`` on a fresh connection; None when it failed."""
    began = time.monotonic()
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
            sock.sendall(b"GET /healthz HTTP/1.1\r\nConnection: close\r\n\r\n")
            answer = b""
            while chunk := sock.recv(4096):
                answer += chunk
    except OSError:
        return None
    return time.monotonic() - began if answer.startswith(b"HTTP/1.1 200") else None


def _p99(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))]


def measure(port: int, hostile: int, source: str, seconds: float) -> dict[str, float]:
    """One round: the flood, probes every 100 ms for ``seconds``."""
    flood = Flood(port, hostile, source)
    thread = threading.Thread(target=flood.run, daemon=True)
    thread.start()
    time.sleep(2)  # the flood in place (a benchmark's own pacing, not a test's wait)
    times: list[float] = []
    failed = 0
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        took = probe(port)
        if took is None:
            failed += 1
        else:
            times.append(took)
        time.sleep(0.1)
    flood.stopped.set()
    thread.join()
    return {
        "probes": len(times) + failed,
        "median": statistics.median(times) if times else float("nan"),
        "p99": _p99(times) if times else float("nan"),
        "max": max(times) if times else float("nan"),
        "over1": sum(t > 1 for t in times),
        "over5": sum(t > 5 for t in times),
        "failed": failed,
        "reopened": flood.reopened,
    }


def start_daemon(work: Path, source: Path, port: int) -> subprocess.Popen[bytes]:
    """The daemon of ``source``'s code on a git copy of sample-repo, logging to a file."""
    repo = work / "repo"
    shutil.copytree(ROOT / "sample-repo", repo / "sample-repo")
    shutil.copytree(ROOT / "channels", repo / "channels")
    subprocess.run([*GIT, "init", "-q", "-b", "main", str(repo)], check=True)
    subprocess.run([*GIT, "-C", str(repo), "add", "-A"], check=True)
    subprocess.run([*GIT, "-C", str(repo), "commit", "-qm", "fleet"], check=True)
    (work / "clusters").mkdir()
    env = {**os.environ, "PYTHONPATH": str(source), "HOME": str(work)}
    command = [sys.executable, "-m", "reconciler", "daemon", "--repo", str(repo)]
    command += ["--path", "sample-repo", "--listen", f"127.0.0.1:{port}"]
    command += [
        "--snapshot-create",
        "--snapshot",
        f"{work / 'clusters'}/",
        "--state",
        f"sqlite:///{work / 's.db'}",
    ]
    with (work / "daemon.log").open("wb") as log:
        process = subprocess.Popen(command, env=env, stdout=log, stderr=log, cwd=work)
    deadline = time.monotonic() + 60
    while probe(port) is None:
        if time.monotonic() > deadline or process.poll() is not None:
            raise SystemExit(f"the daemon did not start; see {work / 'daemon.log'}")
        time.sleep(0.2)
    return process


def _s(seconds: float) -> str:
    return "   -   " if seconds != seconds else f"{seconds:.3f}s"  # NaN: no probe answered


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--hostile", type=int, default=200)
    parser.add_argument("--seconds", type=float, default=30)
    parser.add_argument("--source", type=Path, default=ROOT, help="the checkout to run")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        with socket.socket() as free:
            free.bind(("127.0.0.1", 0))
            port = free.getsockname()[1]
        process = start_daemon(Path(folder), args.source.resolve(), port)
        try:
            print(f"{args.hostile} hostile connections, {args.seconds:g} s of probes each round")
            print("hostile client       probes  median   p99      max      >1s  >5s  failed")
            for name, address in HOSTILE_ROUNDS:
                row = measure(port, args.hostile, address, args.seconds)
                print(
                    f"{name:<20} {row['probes']:>6.0f}  {_s(row['median'])}  {_s(row['p99'])}"
                    f"  {_s(row['max'])}  {row['over1']:>3.0f}  {row['over5']:>3.0f}  "
                    f"{row['failed']:>6.0f}   (hostile reconnects: {row['reopened']:.0f})"
                )
        finally:
            process.terminate()
            process.wait(timeout=30)


if __name__ == "__main__":
    main()
