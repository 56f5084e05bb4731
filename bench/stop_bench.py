"""SIGTERM to exit of ``reconciler daemon`` while its runs wait for operators (by hand).

A fresh control plane (no kubelet: an operator never becomes available), a config repo of N
runtimes each with one module, ``reconciler daemon`` with W workers on it (the default wait for
operators, 10 s). Once W runs are inside Apply_Modules (their objects applied, their pass
waiting for the operator), SIGTERM; the seconds until the process exits, and its exit status.
Each ``--python`` is an interpreter whose ``reconciler`` is measured (the checkout it was
installed from, the daemon started outside this one): main's before a change, this one's after.

    python bench/stop_bench.py --python /work/main/.venv/bin/python --python .venv/bin/python
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.kube_bench import control_plane  # noqa: E402
from reconciler.operations.model import StepState  # noqa: E402
from reconciler.operations.store import SqliteStore  # noqa: E402
from tests.support.daemons import free_port, reachable  # noqa: E402
from tests.support.e2e_harness import Fleet  # noqa: E402
from tests.support.kube_control_plane import ControlPlane  # noqa: E402
from tests.support.stopping import steps_of  # noqa: E402


def _repo(root: Path, runtimes: int, suffix: str) -> Path:
    fleet = Fleet(root / "repo", suffix)
    module = fleet.module("op")
    fleet.channel[module.name] = "1.0.0"
    for index in range(runtimes):
        fleet.runtime(f"rt{index}", [{"name": module.name}])
    fleet.write()
    for args in (["init", "-q", "-b", "main"], ["add", "-A"], ["commit", "-qm", "fleet"]):
        command = ["git", "-c", "user.name=b", "-c", "user.email=b@example.invalid", *args]
        subprocess.run(command, cwd=fleet.root, check=True, capture_output=True)
    return fleet.root


def _waiting(state: Path) -> int:
    """How many operations have Apply_Modules running."""
    if not state.exists():
        return 0
    store = SqliteStore(state)
    try:
        operations = store.operations(limit=1000)
    finally:
        store.close()
    return sum(steps_of(o).get("Apply_Modules") is StepState.RUNNING for o in operations)


def measure(python: str, plane: ControlPlane, runtimes: int, workers: int) -> tuple[float, int]:
    """(seconds from SIGTERM to exit, exit status) of one daemon run by ``python``."""
    root = Path(tempfile.mkdtemp(prefix="stop-bench-"))
    repo = _repo(root, runtimes, f"{os.getpid() % 10000}{int(time.time()) % 1000}")
    state, port = root / "state.db", free_port()
    command = [
        python, "-m", "reconciler", "daemon", "--repo", str(repo), "--branch", "main",
        "--interval", "1s", "--resync-interval", "1h", "--no-watch", "--workers", str(workers),
        "--listen", f"127.0.0.1:{port}", "--state", f"sqlite:///{state}",
        "--kubeconfig-dir", str(plane.kubeconfig_dir), "--cache-dir", str(root / "cache"),
    ]  # fmt: skip
    with (root / "daemon.log").open("wb") as log:
        process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, cwd=root)
    try:
        deadline = time.monotonic() + 120
        while not reachable(f"http://127.0.0.1:{port}") or _waiting(state) < workers:
            if time.monotonic() > deadline:
                raise SystemExit(f"no run waited; see {root / 'daemon.log'}")
            time.sleep(0.05)
        start = time.monotonic()
        process.send_signal(signal.SIGTERM)
        status = process.wait(120)
        return time.monotonic() - start, status
    finally:
        if process.poll() is None:
            process.kill()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--python", action="append", required=True)
    parser.add_argument("--runtimes", type=int, default=4)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--repeat", type=int, default=3)
    options = parser.parse_args()
    with control_plane() as plane:
        for python in options.python:
            for _ in range(options.repeat):
                seconds, status = measure(python, plane, options.runtimes, options.workers)
                print(f"{python}: SIGTERM to exit {seconds:.2f}s, exit status {status}")


if __name__ == "__main__":
    main()
