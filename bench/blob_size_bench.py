"""Peak memory of reading a commit that holds one huge all-zero YAML blob (issue 23, #6).

A blob of zeros compresses to almost nothing (2 GiB is about 2 MB in git), so anyone who can
push may commit one; the reader must refuse it from its size without reading it. The script
copies ``sample-repo/`` and ``channels/`` into a git repository, commits ``--size`` MiB of
zeros as ``sample-repo/runtimes/zero.yaml`` (from a sparse file: no disk, no memory), then
measures, each in a fresh process:

- ``diff --base``: ``reconciler diff sample-repo --base HEAD~1 --head HEAD`` (a revision read
  with no checkout, as in a pull-request review);
- ``daemon read``: what the daemon does for a new commit, :class:`RemoteSource` fetching the
  repository from a ``git daemon`` on 127.0.0.1 into a bare cache (the server's own memory,
  another machine's in production, is not counted), then ``load_repo`` on the commit's tree.

For each: the exit status, the diagnostic naming the file, and the peak RSS
(``ru_maxrss``) of the Python process alone and of any git process it ran. The exit status is
0 only when every Python peak is under ``--max-mib`` and the blob is refused.

    python bench/blob_size_bench.py --size 2048 --max-mib 150
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
BLOB = "sample-repo/runtimes/zero.yaml"
GIT = ["git", "-c", "user.email=bench@example.io", "-c", "user.name=bench"]

#: Runs ``argv`` (the rest of the command line) in a child and prints its exit status, the
#: first line of its error output naming the blob and the peak RSS of it and of its own
#: children, in KiB.
MEASURE = """\
import json, resource, subprocess, sys
done = subprocess.run(sys.argv[1:], capture_output=True, text=True)
usage = resource.getrusage(resource.RUSAGE_CHILDREN)
lines = [line for line in done.stderr.splitlines() if "zero.yaml" in line] or [""]
print(json.dumps({"status": done.returncode, "said": lines[0],
                  "peak_kib": usage.ru_maxrss}))
"""

#: The daemon's reading of a new commit; prints its own peak RSS and its git children's, in KiB.
DAEMON_READ = """\
import json, resource, sys
from pathlib import Path
from reconciler.source.git import RemoteSource
from reconciler.source.loader import load_repo
source = RemoteSource(sys.argv[1], "main", "sample-repo", Path(sys.argv[2]))
revision = source.revision(source.check())
validation = load_repo("sample-repo", tree=revision.tree)
errors = [d.format() for d in validation.diagnostics]
print(json.dumps({"errors": errors,
                  "python_kib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss,
                  "git_kib": resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss}))
"""


def make_repository(work: Path, size_mib: int) -> Path:
    """The sample fleet committed, then a second commit adding ``size_mib`` MiB of zeros."""
    repo = work / "repo"
    shutil.copytree(ROOT / "sample-repo", repo / "sample-repo")
    shutil.copytree(ROOT / "channels", repo / "channels")
    subprocess.run([*GIT, "init", "-q", "-b", "main"], cwd=repo, check=True)
    subprocess.run([*GIT, "add", "-A"], cwd=repo, check=True)
    subprocess.run([*GIT, "commit", "-qm", "fleet"], cwd=repo, check=True)
    zeros = work / "zeros"
    with zeros.open("wb") as sparse:
        sparse.truncate(size_mib << 20)
    blob = subprocess.run(
        ["git", "hash-object", "-w", str(zeros)], cwd=repo, check=True, capture_output=True
    ).stdout.decode()
    zeros.unlink()
    index = f"100644,{blob.strip()},{BLOB}"
    subprocess.run([*GIT, "update-index", "--add", "--cacheinfo", index], cwd=repo, check=True)
    subprocess.run([*GIT, "commit", "-qm", "zeros"], cwd=repo, check=True)
    return repo


def measure_diff(repo: Path) -> dict[str, Any]:
    """``reconciler diff --base HEAD~1 --head HEAD`` in a fresh process."""
    command = [sys.executable, "-m", "reconciler", "diff", "sample-repo"]
    command += ["--base", "HEAD~1", "--head", "HEAD"]
    done = subprocess.run(
        [sys.executable, "-c", MEASURE, *command],
        cwd=repo,
        capture_output=True,
        text=True,
        check=True,
    )
    found: dict[str, Any] = json.loads(done.stdout)
    return found


def measure_daemon_read(repo: Path, work: Path) -> dict[str, Any]:
    """The daemon's fetch (from ``git daemon`` on 127.0.0.1) and read of the commit, in a
    fresh process."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = int(probe.getsockname()[1])
    server = subprocess.Popen(
        [
            *("git", "daemon", "--reuseaddr", "--export-all", f"--base-path={work}"),
            *("--listen=127.0.0.1", f"--port={port}", str(work)),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    url = f"git://127.0.0.1:{port}/{repo.name}"
    try:
        while subprocess.run(["git", "ls-remote", url], capture_output=True).returncode != 0:
            time.sleep(0.1)
        done = subprocess.run(
            [sys.executable, "-c", DAEMON_READ, url, str(work / "cache")],
            capture_output=True,
            text=True,
            check=True,
            env={**os.environ, "PYTHONPATH": str(ROOT)},
        )
    finally:
        os.killpg(server.pid, signal.SIGKILL)
        server.wait()
    found: dict[str, Any] = json.loads(done.stdout)
    return found


def main() -> int:
    """Build the repository, measure both readings, print a table; 0 when both hold."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--size", type=int, default=2048, help="MiB of zeros (default 2048)")
    parser.add_argument("--max-mib", type=float, default=150.0, help="peak RSS allowed")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="blob-bench-") as folder:
        work = Path(folder)
        repo = make_repository(work, args.size)
        diff = measure_diff(repo)
        daemon = measure_daemon_read(repo, work)
    diff_mib = diff["peak_kib"] / 1024
    python_mib, git_mib = daemon["python_kib"] / 1024, daemon["git_kib"] / 1024
    refused = [e for e in daemon["errors"] if e.startswith(BLOB)]
    print(f"blob: {args.size} MiB of zeros at {BLOB}")
    print(f"diff --base:  exit {diff['status']}, peak RSS {diff_mib:.0f} MiB (with git)")
    print(f"  {diff['said']}")
    print(f"daemon read:  peak RSS {python_mib:.0f} MiB (Python), {git_mib:.0f} MiB (git fetch)")
    print(f"  {refused[0] if refused else 'NOT REFUSED: ' + repr(daemon['errors'])}")
    holds = diff_mib < args.max_mib and python_mib < args.max_mib and bool(refused)
    print(f"under {args.max_mib:g} MiB and refused: {'yes' if holds else 'NO'}")
    return 0 if holds else 1


if __name__ == "__main__":
    sys.exit(main())
