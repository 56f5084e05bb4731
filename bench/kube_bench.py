"""Shared by the benchmarks on a real API server: the control plane of the tests
(tests/support/kube_control_plane.py, binaries from ``RECONCILER_K8S_ASSETS`` or ``../shared/k8s``),
a fleet of :mod:`tests.support.economy_fleet` written for it, ``reconciler sync`` run as a user runs
it (a fresh process), and the API calls of a run counted from the server's audit log
(tests/support/kube_audit.py).
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.support.economy_fleet import economy_files  # noqa: E402
from tests.support.kube_audit import Calls, audit_calls  # noqa: E402
from tests.support.kube_control_plane import (  # noqa: E402
    ASSETS_ENV,
    ControlPlane,
    start_control_plane,
    unpack,
)
from tests.support.repos import write_files  # noqa: E402


@contextmanager
def control_plane() -> Iterator[ControlPlane]:
    """A fresh control plane (stopped and removed after)."""
    assets = Path(os.environ.get(ASSETS_ENV) or ROOT.parent / "shared" / "k8s").resolve()
    with start_control_plane(unpack(assets)) as started:
        yield started


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
