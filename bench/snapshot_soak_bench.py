"""A daemon on N snapshot clusters, watching or not (issue 43): its CPU, memory and threads
over a soak, and how long a channel bump takes to reach the fleet.

    python bench/snapshot_soak_bench.py --fleet DIR --clusters DIR [--seconds 240]
        [--resync 2m] [--modes watch no-watch] [--workdir bench/out]

``--fleet`` is a generated fleet (``bench/generate_fleet.py``), ``--clusters`` its snapshot
folder after a first ``reconciler sync`` (with its store beside it). Per mode, the folder is
copied, the fleet committed to a git repository of its own, and ``reconciler daemon --snapshot``
started on them (4 workers, polling every 2 s); every 5 s the process's CPU time, resident
memory and threads are read from /proc. After ``--seconds``, ``mod-03`` goes from 1.0.0 to 1.1.0
in the ``regular`` channel: the bump has reached the fleet when, after the first, no more
operations of the new commit end for 15 s (the time of the last one is taken; 15 min at most).
"""

from __future__ import annotations

import argparse
import os
import shutil
import socket
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TICK = os.sysconf("SC_CLK_TCK")


def _git(where: Path, *args: str) -> str:
    done = subprocess.run(["git", *args], cwd=where, check=True, capture_output=True, text=True)
    return done.stdout.strip()


def _port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _sample(pid: int) -> tuple[float, int, int]:
    """CPU seconds (user + system), resident kB, threads of ``pid``."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    cpu = (int(fields[11]) + int(fields[12])) / TICK
    status = dict(
        line.split(":", 1) for line in Path(f"/proc/{pid}/status").read_text().splitlines()
    )
    return cpu, int(status["VmRSS"].split()[0]), int(status["Threads"])


def _ended_of(state: Path, commit: str) -> tuple[int, str]:
    with sqlite3.connect(state) as db:
        row = db.execute(
            "SELECT count(*), max(updated) FROM operations WHERE commit_id LIKE ? "
            "AND state = 'succeeded' AND message <> 'no change'",
            (commit + "%",),
        ).fetchone()
    return int(row[0]), str(row[1] or "")


def soak(args: argparse.Namespace, mode: str) -> None:
    work = args.workdir / f"soak-{mode}"
    shutil.rmtree(work, ignore_errors=True)
    repo, clusters = work / "repo", work / "clusters"
    shutil.copytree(args.fleet, repo, ignore=shutil.ignore_patterns(".fleet.json"))
    shutil.copytree(args.clusters, clusters)
    _git(repo, "init", "-q", "-b", "main")
    _git(repo, "add", "-A")
    _git(repo, "-c", "user.name=b", "-c", "user.email=b@b", "commit", "-qm", "fleet")
    command = [sys.executable, "-m", "reconciler", "daemon", "--repo", str(repo)]
    command += ["--snapshot", f"{clusters}/", "--listen", f"127.0.0.1:{_port()}"]
    command += ["--interval", "2s", "--resync-interval", args.resync, "--workers", "4"]
    command += ["--cache-dir", str(work / "cache"), f"--{mode}"]
    log = (work / "daemon.log").open("w")
    daemon = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, cwd=ROOT)
    try:
        samples = []
        start = time.monotonic()
        while time.monotonic() - start < args.seconds:
            time.sleep(5)
            samples.append((time.monotonic() - start, *_sample(daemon.pid)))
        half = [s for s in samples if s[0] >= args.seconds / 2]
        cpu = (half[-1][1] - half[0][1]) / (half[-1][0] - half[0][0]) * 100
        print(f"{mode}: CPU {cpu:.0f}% of a core over the second half of {args.seconds} s, ")
        print(f"  RSS {max(s[2] for s in samples) / 1024:.0f} MB peak, ", end="")
        print(f"threads {max(s[3] for s in samples)} peak, CPU total {samples[-1][1]:.1f} s")
        channel = repo / "channels" / "regular.yaml"
        channel.write_text(channel.read_text().replace("mod-03: 1.0.0", "mod-03: 1.1.0"))
        _git(repo, "-c", "user.name=b", "-c", "user.email=b@b", "commit", "-qam", "bump")
        commit = _git(repo, "rev-parse", "HEAD")
        bumped, seen, still = time.time(), (0, ""), time.monotonic()
        while (not seen[0] or time.monotonic() - still < 15) and time.time() - bumped < 900:
            time.sleep(1)
            now = _ended_of(clusters / "reconciler-state.db", commit)
            if now != seen:
                seen, still = now, time.monotonic()
        last = time.monotonic() - still
        took = time.time() - bumped - last
        print(f"  bump: {seen[0]} runtimes upgraded, the last {took:.0f} s after the commit")
    finally:
        daemon.terminate()
        daemon.wait(60)
        log.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--fleet", type=Path, required=True)
    parser.add_argument("--clusters", type=Path, required=True)
    parser.add_argument("--seconds", type=int, default=240)
    parser.add_argument("--resync", default="2m")
    parser.add_argument("--modes", nargs="+", default=["watch", "no-watch"])
    parser.add_argument("--workdir", type=Path, default=ROOT / "bench" / "out")
    args = parser.parse_args()
    for mode in args.modes:
        soak(args, mode)


if __name__ == "__main__":
    main()
