"""A worker process of the renderer sandbox: runs render jobs, one at a time (edge: engines).

Started by :mod:`reconciler.render.sandbox` as ``python -P -m reconciler.render.worker
REQUESTS ANSWERS MEMORY offline|network``. Before it imports any engine it limits its writable
memory (``RLIMIT_DATA``) and, offline, leaves the network (a new network namespace: no interface
but a loopback that is down). Then it answers each request ``(job, args, seconds)`` with the job's
result, under a CPU allowance of ``seconds`` more than it has used so far; it ends when its
caller closes the requests (the caller is gone or the pool shrinks).
"""

from __future__ import annotations

import ctypes
import math
import resource
import sys
from collections.abc import Callable
from multiprocessing.connection import Connection
from typing import Any

from reconciler.render.sandbox import answer_of

_CLONE_NEWNET = 0x40000000
_CLONE_NEWUSER = 0x10000000


def main(argv: list[str]) -> None:
    """Serve the requests of the pipes named by ``argv`` until they end."""
    request_fd, answer_fd, memory, mode = int(argv[0]), int(argv[1]), int(argv[2]), argv[3]
    resource.setrlimit(resource.RLIMIT_DATA, (memory, memory))
    if mode == "offline":
        leave_network()
    requests = Connection(request_fd, writable=False)
    answers = Connection(answer_fd, readable=False)
    while True:
        try:
            job, args, seconds = requests.recv()
        except EOFError:
            return
        allow_cpu(seconds)
        answers.send_bytes(answer_of(_job(job), args))


def leave_network() -> bool:
    """Enter a new, empty network namespace (as root; else inside a new user namespace, where
    the kernel allows them); whether it worked. Without one, renders rely on the engines being
    offline (docs/security.md)."""
    libc = ctypes.CDLL(None, use_errno=True)
    tries = (_CLONE_NEWNET, _CLONE_NEWUSER | _CLONE_NEWNET)
    return any(libc.unshare(flags) == 0 for flags in tries)


def allow_cpu(seconds: float) -> None:
    """Let the next job use ``seconds`` of CPU more than this process has used so far."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    soft = math.ceil(usage.ru_utime + usage.ru_stime + seconds)
    hard = resource.getrlimit(resource.RLIMIT_CPU)[1]
    if hard != resource.RLIM_INFINITY:
        soft = min(soft, hard)
    resource.setrlimit(resource.RLIMIT_CPU, (soft, hard))


def _job(name: str) -> Callable[..., Any]:
    """The function of a job, its module imported on its first use."""
    job: Callable[..., Any]
    if name == "chart":
        from reconciler.render.helm import render_chart_here as job
    elif name == "kustomize":
        from reconciler.render.kustomize import build_here as job
    elif name == "pull":
        from reconciler.render.sources import pull_here as job
    else:
        raise ValueError(f"unknown job {name!r}")
    return job


if __name__ == "__main__":
    main(sys.argv[1:])
