"""Shared by the benchmarks on a real API server: the control plane of the tests
(tests/kube_control_plane.py, binaries from ``RECONCILER_K8S_ASSETS`` or ``../shared/k8s``),
a fleet of :mod:`bench.economy_fleet` written for it, ``reconciler sync`` run as a user runs it
(a fresh process), and the API calls of a run counted from the server's audit log.

Counted are the requests of the admin user (the reconciler's and kubectl's), but for those of
the stand-in Deployment controller (tests/kube_workloads.py): ``calls`` is every request,
``writes`` every create, update, patch and delete, Events included, and they are broken down
by verb and resource (``discovery`` for requests that name no resource).
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.economy_fleet import economy_files  # noqa: E402
from tests.conftest import write_files  # noqa: E402
from tests.kube_control_plane import ASSETS_ENV, ControlPlane, start_control_plane, unpack  # noqa: E402
from tests.kube_workloads import USER_AGENT  # noqa: E402

WRITES = frozenset({"create", "update", "patch", "delete", "deletecollection"})


@contextmanager
def control_plane() -> Iterator[ControlPlane]:
    """A fresh control plane (stopped and removed after)."""
    assets = Path(os.environ.get(ASSETS_ENV) or ROOT.parent / "shared" / "k8s").resolve()
    with start_control_plane(unpack(assets)) as started:
        yield started


@dataclass(frozen=True, slots=True)
class Calls:
    """The requests of one run, from the audit log."""

    by_kind: dict[str, int]

    @property
    def calls(self) -> int:
        return sum(self.by_kind.values())

    @property
    def writes(self) -> int:
        return sum(n for key, n in self.by_kind.items() if key.split(" ")[0] in WRITES)

    @property
    def events(self) -> int:
        return sum(n for key, n in self.by_kind.items() if key.endswith(" events"))

    def text(self) -> str:
        parts = ", ".join(f"{k} {n}" for k, n in sorted(self.by_kind.items()))
        return f"{self.calls} calls, {self.writes} writes ({parts})"


def audit_calls(events: list[dict[str, Any]]) -> Calls:
    """The requests of ``events`` but the stand-in controller's, by ``verb resource``."""
    counts: Counter[str] = Counter()
    for event in events:
        if str(event.get("userAgent") or "").startswith(USER_AGENT):
            continue
        resource = (event.get("objectRef") or {}).get("resource") or "discovery"
        counts[f"{event.get('verb')} {resource}"] += 1
    return Calls(dict(counts))


@dataclass(frozen=True, slots=True)
class Fleet:
    """A fleet of N modules written for ``plane``, its runtime reaching it by kubeconfig file."""

    plane: ControlPlane
    root: Path
    modules: int
    prefix: str

    @property
    def runtime(self) -> str:
        return f"{self.prefix}-rt"

    @property
    def repo(self) -> Path:
        return self.root / "repo"

    def write(self) -> Fleet:
        cluster = {"kubeconfigFile": self.plane.kubeconfig_name}
        files = economy_files(
            self.modules,
            runtime=self.runtime,
            prefix=self.prefix,
            cluster=cluster,
            system_namespace=f"{self.prefix}-system-rs",
        )
        write_files(self.repo, files)
        return self

    def sync(self, wait: float = 120.0) -> tuple[float, str]:
        """``reconciler sync`` of the runtime in a fresh process: (seconds, its output)."""
        command = [sys.executable, "-m", "reconciler", "sync", str(self.repo)]
        command += ["--runtime", self.runtime, "--kubeconfig-dir", str(self.plane.kubeconfig_dir)]
        command += ["--state", f"sqlite:///{self.root / 'state.db'}", "--wait", str(wait)]
        env = {**os.environ, "XDG_CACHE_HOME": str(self.root / "cache"), "NO_COLOR": "1"}
        start = time.monotonic()
        done = subprocess.run(command, capture_output=True, text=True, env=env, cwd=ROOT)
        seconds = time.monotonic() - start
        if done.returncode != 0:
            raise SystemExit(f"sync failed ({done.returncode}):\n{done.stdout}\n{done.stderr}")
        return seconds, done.stdout

    def measured_sync(self, wait: float = 120.0) -> tuple[float, str, Calls]:
        """:meth:`sync`, with the calls it made."""
        mark = self.plane.audit_mark()
        seconds, output = self.sync(wait)
        return seconds, output, audit_calls(self.plane.audit_events(mark))
