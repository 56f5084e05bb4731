"""Memory of the process that reads a commit while its renders are hostile (issue 38).

Each case runs ``validate`` of a small repo in a fresh process (``load_repo`` with the default
renderer, as the commands and the daemon) and prints that process's peak resident memory
(``ru_maxrss``) and the largest of its render workers', with the one-line verdict:

- ``one-line-render``: a chart whose template renders one 200 MB line (before the sandbox: 1.7-1.9
  GB in the caller);
- ``repeat-bomb``: ``{{ repeat 100000000000 "x" }}`` (before: Go's fatal error ended the caller);
- ``big-chart-file``: a 1 GiB file in the chart folder (before: 2.6-3.3 GB);
- ``archive-bomb``: a pinned chart archive of about 2 MiB whose one file unpacks to 2 GiB (before:
  2.1 GB for a 2 MB archive);
- ``endless-index``: an HTTP chart repository whose ``index.yaml`` never ends (before: 3.7 GB for 1
  GB).

    python bench/render_sandbox_bench.py [--case NAME]
"""

from __future__ import annotations

import argparse
import contextlib
import gzip
import hashlib
import io
import json
import resource
import subprocess
import sys
import tarfile
import tempfile
import threading
from collections.abc import Iterator, Mapping
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from reconciler.render import default_renderer  # noqa: E402
from reconciler.render.sources import write_cached  # noqa: E402
from reconciler.source.loader import load_repo  # noqa: E402
from tests.support.charts import chart_module_files  # noqa: E402
from tests.support.render_modules import source_module_files  # noqa: E402
from tests.support.repos import channel_file, runtime_file, write_files  # noqa: E402

CASES = ("one-line-render", "repeat-bomb", "big-chart-file", "archive-bomb", "endless-index")
TEMPLATE = "modules/web/1.0.0/chart/templates/bomb.yaml"


def chart_repo(folder: Path, template: str | None = None) -> Path:
    """A repo whose runtime ``a`` takes chart module ``web`` (with ``template`` added)."""
    tree = {
        **chart_module_files("web"),
        **channel_file("regular", {"web": "1.0.0"}),
        **runtime_file("a", "regular", [{"name": "web"}]),
    }
    if template is not None:
        tree[TEMPLATE] = template
    return write_files(folder, tree)


def source_repo(folder: Path, spec: Mapping[str, object]) -> Path:
    tree = {
        **source_module_files(spec),
        **channel_file("regular", {"web": "1.0.0"}),
        **runtime_file("a", "regular", [{"name": "web"}]),
    }
    return write_files(folder, tree)


def bomb_archive() -> bytes:
    """A chart archive whose one file unpacks to 2 GiB of zeros (its header says so)."""
    buffer = io.BytesIO()
    packed = gzip.GzipFile(fileobj=buffer, mode="wb", compresslevel=9)
    with packed, tarfile.open(fileobj=packed, mode="w|") as archive:
        chart = b"apiVersion: v2\nname: web\nversion: 1.0.0\n"
        info = tarfile.TarInfo("web/Chart.yaml")
        info.size = len(chart)
        archive.addfile(info, io.BytesIO(chart))
        info = tarfile.TarInfo("web/files/zeros.bin")
        info.size = 2 << 30
        archive.addfile(info, _Zeros(info.size))
    return buffer.getvalue()


class _Zeros(io.RawIOBase):
    def __init__(self, size: int) -> None:
        self.left = size

    def readinto(self, buffer: memoryview) -> int:  # type: ignore[override]
        count = min(len(buffer), self.left)
        buffer[:count] = bytes(count)
        self.left -= count
        return count

    def readable(self) -> bool:
        return True


class _EndlessIndex(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        self.send_response(200)
        self.end_headers()
        with contextlib.suppress(OSError):
            while True:
                self.wfile.write((b"# " + b"x" * 1022 + b"\n") * 1024)

    def log_message(self, *args: object) -> None:
        pass


@contextlib.contextmanager
def endless_repository() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _EndlessIndex)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def run_case(case: str, folder: Path) -> str:
    """Validate the case's repo here; the first diagnostic (or "valid")."""
    if case == "one-line-render":
        repo = chart_repo(folder / "repo", 'big: {{ repeat 200000000 "x" }}\n')
    elif case == "repeat-bomb":
        repo = chart_repo(folder / "repo", '{{ repeat 100000000000 "x" }}\n')
    elif case == "big-chart-file":
        repo = chart_repo(folder / "repo")
        big = repo / "modules/web/1.0.0/chart/files/big.txt"
        big.parent.mkdir()
        with big.open("wb") as file:  # 1 GiB of text, written a MiB at a time
            for _ in range(1024):
                file.write(b"x" * (1 << 20))
    elif case == "archive-bomb":
        archive = bomb_archive()
        digest = "sha256:" + hashlib.sha256(archive).hexdigest()
        cache = folder / "cache"
        write_cached(cache, digest, archive)
        spec = {"url": "oci://127.0.0.1:1/charts/web", "version": "1.0.0", "digest": digest}
        repo = source_repo(folder / "repo", spec)
        return _verdict(repo, cache, f"archive {len(archive) >> 10} KiB: ")
    else:
        with endless_repository() as url:
            digest = "sha256:" + "0" * 64
            spec = {"url": url, "chart": "web", "version": "1.0.0", "digest": digest}
            return _verdict(source_repo(folder / "repo", spec), folder / "cache")
    return _verdict(repo, folder / "cache")


def _verdict(repo: Path, cache: Path, prefix: str = "") -> str:
    validation = load_repo(repo, renderer=default_renderer(source_cache=cache))
    found = [d.format().split(": ", 1)[1] for d in validation.diagnostics]
    return prefix + (found[0] if found else "valid")


def measure(case: str) -> dict[str, object]:
    """Run ``case`` in a fresh process; its verdict and peak memory, and its workers'."""
    done = subprocess.run(
        [sys.executable, __file__, "--case", case, "--child"],
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        return {"case": case, "exit": done.returncode, "stderr": done.stderr[-300:]}
    return {"case": case, **json.loads(done.stdout)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--case", choices=CASES)
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    options = parser.parse_args()
    if options.child:
        with tempfile.TemporaryDirectory(prefix="sandbox-bench-") as folder:
            verdict = run_case(options.case, Path(folder))
        mine = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss >> 10
        workers = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss >> 10
        print(json.dumps({"caller_peak_mib": mine, "worker_peak_mib": workers, "verdict": verdict}))
        return
    for case in (options.case,) if options.case else CASES:
        print(json.dumps(measure(case)), flush=True)


if __name__ == "__main__":
    main()
