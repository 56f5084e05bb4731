"""The renderer sandbox: every render runs in a worker process with bounded time and memory and
no network (edge: processes).

A chart's templates, an overlay's kustomization and a pulled archive are the commit's code, run
by engines written in Go: a template can ask for 100 GB (``repeat``), recurse until Go's stack
overflows, or loop. Go answers those with a ``fatal error`` that ends the whole process, so the
engines never run in the process that reads commits. A worker (:mod:`reconciler.render.worker`)
is a fresh Python interpreter (``-P``: nothing of the caller's folder on its path) that, before it
loads any engine, limits its own writable memory (``RLIMIT_DATA``: Go reserves about 1.8 GB of
address space it never touches, so ``RLIMIT_AS`` cannot say "1 GiB") and leaves the network
(``unshare(CLONE_NEWNET)``, in a new user namespace when it is not root; a pull keeps it). Each
job also gets a CPU budget (``RLIMIT_CPU``, raised by the job's allowance before each job) and a
wall-clock deadline here: a worker that overruns is killed with its process group (kubectl with
it) and replaced. A worker that dies, loops or overflows is a :class:`RenderError` of the version
being rendered, never a dead caller. Workers are started on the first render (a repo of plain
manifests starts none) and reused across renders (docs/security.md, "The renderer sandbox").
"""

from __future__ import annotations

import atexit
import contextlib
import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
from dataclasses import dataclass, field
from multiprocessing.connection import Connection
from pathlib import Path
from typing import IO, Any

import reconciler
from reconciler.errors import RenderError, TransientError

#: The defaults of the limits (flags of ``reconciler``: ``--render-timeout`` and the others).
DEFAULT_SECONDS = 30.0
DEFAULT_MEMORY = 1 << 30
DEFAULT_CHART_SIZE = 100 << 20
DEFAULT_CHART_FILE = 5 << 20
#: The most a render may hand back (a module of Kubernetes objects is far smaller).
OUTPUT_LIMIT = 64 << 20
#: Idle workers kept for the next renders.
IDLE_WORKERS = 4
#: Lines of a dead worker's error output read to tell why it stopped.
_STDERR_BYTES = 4096
#: What a worker that ran out of memory says (Go, Python, or Go starting a thread).
_OUT_OF_MEMORY = (
    "out of memory",
    "cannot allocate memory",
    "malloc failed",
    "MemoryError",
    "pthread_create failed",
)


@dataclass(frozen=True, slots=True)
class RenderLimits:
    """What one render may use: wall-clock ``seconds`` (also its CPU seconds), writable
    ``memory`` in bytes, and for a pulled archive the sum of its files (``chart_size``) and each
    file (``chart_file``), checked from the archive's headers before anything is unpacked."""

    seconds: float = DEFAULT_SECONDS
    memory: int = DEFAULT_MEMORY
    chart_size: int = DEFAULT_CHART_SIZE
    chart_file: int = DEFAULT_CHART_FILE


@dataclass(slots=True)
class _Worker:
    process: subprocess.Popen[bytes]
    requests: Connection
    answers: Connection
    stderr: IO[bytes]

    def stop(self) -> None:
        """Kill the worker and whatever it started (its process group), and reap it."""
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.process.pid, signal.SIGKILL)
        self.process.wait()
        self.close()

    def close(self) -> None:
        for end in (self.requests, self.answers):
            end.close()
        self.stderr.close()

    def reason(self) -> str:
        """Why a worker stopped, from its exit status and its error output (Go's ``fatal
        error`` line, Python's last line)."""
        self.stderr.seek(0)
        text = self.stderr.read(_STDERR_BYTES).decode(errors="replace")
        code = self.process.returncode
        if code == -signal.SIGXCPU:
            return "cpu"
        if code == -signal.SIGKILL:  # not by us: we read no answer of a worker we killed
            return "killed (SIGKILL: the memory limit of its container, or a person)"
        if any(sign in text for sign in _OUT_OF_MEMORY):
            return "memory"
        lines = [line.strip() for line in text.splitlines() if line.strip()]
        fatal = next((line for line in lines if line.startswith("fatal error:")), None)
        if fatal is not None:
            return fatal.removeprefix("fatal error:").strip()
        return lines[-1] if lines else f"exit status {code}"


@dataclass(slots=True)
class Sandbox:
    """A pool of worker processes that run jobs under :class:`RenderLimits`. ``network``:
    whether the workers keep the network (pulls of pinned archives do; renders never)."""

    limits: RenderLimits = field(default_factory=RenderLimits)
    network: bool = False
    _idle: list[_Worker] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    #: Workers started (a reused one is not counted again).
    started: int = 0

    def run(self, job: str, args: tuple[Any, ...], blamed: str) -> Any:
        """The answer of ``job`` (a name :mod:`reconciler.render.worker` knows) run on
        ``args`` in a worker; raises what the job raised, or a :class:`RenderError` at
        ``blamed`` when the worker overran its time, its memory, or died."""
        worker = self._take()
        try:
            worker.requests.send((job, args, self.limits.seconds))
        except OSError:  # died before the job (at its start): its output says why
            worker.process.wait()
            raise self._died(worker, blamed) from None
        if not worker.answers.poll(self.limits.seconds):
            worker.stop()
            message = f"the render took over {self.limits.seconds:g} s and was stopped"
            raise RenderError(f"{message} (--render-timeout)", blamed)
        try:
            answer = worker.answers.recv_bytes(OUTPUT_LIMIT)
        except (EOFError, ConnectionError):
            worker.process.wait()
            raise self._died(worker, blamed) from None
        except OSError:  # over OUTPUT_LIMIT: the rest of the answer is never read
            worker.stop()
            limit = _size(OUTPUT_LIMIT)
            raise RenderError(f"the render's output is over {limit}; refused", blamed) from None
        self._give_back(worker)
        return _value_of(answer, blamed)

    def idle_workers(self) -> list[int]:
        """The process ids of the workers waiting for a job."""
        with self._lock:
            return [worker.process.pid for worker in self._idle]

    def close(self) -> None:
        """Stop the idle workers (a busy one stops when its job is done and it is not taken
        back; a worker whose caller is gone stops at the end of its requests)."""
        with self._lock:
            idle, self._idle = self._idle, []
        for worker in idle:
            worker.stop()

    def _take(self) -> _Worker:
        with self._lock:
            if self._idle:
                return self._idle.pop()
            self.started += 1
        return _start_worker(self.limits, self.network)

    def _give_back(self, worker: _Worker) -> None:
        with self._lock:
            if len(self._idle) < IDLE_WORKERS:
                self._idle.append(worker)
                return
        worker.stop()

    def _died(self, worker: _Worker, blamed: str) -> RenderError:
        reason = worker.reason()
        worker.close()
        if reason == "cpu":
            message = f"the render used over {self.limits.seconds:g} s of CPU and was stopped"
            return RenderError(f"{message} (--render-timeout)", blamed)
        if reason == "memory":
            limit = _size(self.limits.memory)
            return RenderError(
                f"the render needed over {limit} of memory and was stopped (--render-memory)",
                blamed,
            )
        return RenderError(f"the template engine stopped: {reason}", blamed)


def _start_worker(limits: RenderLimits, network: bool) -> _Worker:
    """A new worker process, talking over two pipes of its own."""
    request_read, request_write = os.pipe()
    answer_read, answer_write = os.pipe()
    package_root = str(Path(reconciler.__file__).resolve().parent.parent)
    environment = {
        **os.environ,
        "PYTHONPATH": package_root,  # the same checkout as the caller's
        "GOTRACEBACK": "none",  # a fatal error is one line, not every goroutine's stack
        "GOMEMLIMIT": str(limits.memory * 3 // 4),  # Go collects before the hard limit
    }
    command = [
        sys.executable,
        "-P",
        "-m",
        "reconciler.render.worker",
        str(request_read),
        str(answer_write),
        str(limits.memory),
        "network" if network else "offline",
    ]
    stderr = tempfile.TemporaryFile(prefix="reconciler-render-")  # noqa: SIM115 (the worker's)
    try:
        process = subprocess.Popen(
            command,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=stderr,
            pass_fds=(request_read, answer_write),
            cwd="/",
            env=environment,
            start_new_session=True,  # its own process group: killed with what it started
        )
    finally:
        os.close(request_read)
        os.close(answer_write)
    requests = Connection(request_write, readable=False)
    answers = Connection(answer_read, writable=False)
    return _Worker(process, requests, answers, stderr)


def _size(count: int) -> str:
    for unit, shift in (("GiB", 30), ("MiB", 20), ("KiB", 10)):
        if count >= 1 << shift and count % (1 << shift) == 0:
            return f"{count >> shift} {unit}"
    return f"{count} bytes"


_configured = RenderLimits()
_sandboxes: dict[bool, Sandbox] = {}
_sandboxes_lock = threading.Lock()


def configure(limits: RenderLimits) -> None:
    """Set the limits of every later render of this process (``reconciler --render-*``)."""
    global _configured
    with _sandboxes_lock:
        _configured = limits
        old = list(_sandboxes.values())
        _sandboxes.clear()
    for sandbox in old:
        sandbox.close()


def configured_limits() -> RenderLimits:
    """The limits :func:`configure` set (the defaults until then)."""
    return _configured


def shared_sandbox(network: bool = False) -> Sandbox:
    """The process's sandbox of offline workers (renders) or networked ones (pulls)."""
    with _sandboxes_lock:
        found = _sandboxes.get(network)
        if found is None:
            if not _sandboxes:
                atexit.register(_close_shared)
            found = _sandboxes[network] = Sandbox(_configured, network)
        return found


def _close_shared() -> None:
    """At exit: stop the idle workers (they would stop at the end of their requests anyway)."""
    with _sandboxes_lock:
        shared = list(_sandboxes.values())
    for sandbox in shared:
        sandbox.close()


def _value_of(answer: bytes, blamed: str) -> Any:
    """The value of a worker's answer, or the error it reports raised here (at ``blamed``
    unless it names its own file)."""
    found = json.loads(answer)
    if "transient" in found:
        raise TransientError(str(found["transient"]), float(found["retry_after"]))
    if "error" in found:
        raise RenderError(str(found["error"]), str(found.get("path") or blamed))
    return found["value"]
