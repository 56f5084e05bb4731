"""What checking commit signatures costs the daemon: per new commit, and per commit checked.

Makes a git repository of ``--commits`` commits, each signed with a fresh SSH key (ssh-keygen)
or OpenPGP key (gpg), in temporary homes, and times :func:`verify_commits` (the daemon's
check) ``--runs`` times each:

- ``head``: the newest commit alone (the default policy): the trust home built from the key
  files, one ``git log``;
- ``every``: every commit since the first one (``--verify-every-commit`` after a push of
  ``--commits`` commits): the same, plus one signature check per commit.

Prints, per key kind, the best and median seconds of each and the cost per commit checked
(``(every - head) / (commits - 1)``), as JSON too in ``bench/out/signatures.json``.

    python bench/signatures_bench.py --commits 200 --runs 5
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

from reconciler.source.signatures import TrustedKeys, verify_commits

ROOT = Path(__file__).resolve().parent.parent
GIT = ["git", "-c", "user.email=bench@example.io", "-c", "user.name=bench"]


def _git(work: Path, *args: str, env: dict[str, str] | None = None) -> str:
    done = subprocess.run(
        [*GIT, *args], cwd=work, env=env, capture_output=True, text=True, check=True
    )
    return done.stdout


def _ssh_setup(folder: Path) -> tuple[list[str], dict[str, str], TrustedKeys]:
    key = folder / "key"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(key)], check=True)
    signers = folder / "allowed_signers"
    signers.write_text(f"bench@example.io {key.with_suffix('.pub').read_text()}")
    options = ["-c", "gpg.format=ssh", "-c", f"user.signingkey={key}"]
    return options, dict(os.environ), TrustedKeys(ssh_signers=(signers,))


def _pgp_setup(folder: Path, home: Path) -> tuple[list[str], dict[str, str], TrustedKeys]:
    env = {**os.environ, "GNUPGHOME": str(home)}
    subprocess.run(
        ["gpg", "--batch", "--quiet", "--pinentry-mode", "loopback", "--passphrase", "",
         "--quick-gen-key", "Bench <bench@example.io>", "ed25519", "sign", "never"],
        env=env, capture_output=True, check=True,
    )  # fmt: skip
    public = subprocess.run(
        ["gpg", "--batch", "--armor", "--export"], env=env, capture_output=True, check=True
    ).stdout
    (folder / "bench.asc").write_bytes(public)
    options = ["-c", "gpg.format=openpgp", "-c", "user.signingkey=bench@example.io"]
    return options, env, TrustedKeys(openpgp_keys=(folder / "bench.asc",))


def _history(work: Path, commits: int, options: list[str], env: dict[str, str]) -> list[str]:
    work.mkdir()
    _git(work, "init", "-q", "-b", "main")
    for number in range(commits):
        _git(work, *options, "commit", "-qS", "--allow-empty", "-m", f"c{number}", env=env)
    return _git(work, "rev-list", "--reverse", "HEAD").split()


def _time(runs: int, check: Any) -> list[float]:
    seconds = []
    for _ in range(runs):
        started = time.perf_counter()
        verdict = check()
        seconds.append(time.perf_counter() - started)
        assert verdict.accepted, verdict.reason
    return seconds


def _measure(kind: str, root: Path, commits: int, runs: int) -> dict[str, Any]:
    folder = root / kind
    folder.mkdir()
    home = Path(tempfile.mkdtemp(prefix="rb-", dir="/tmp"))
    try:
        options, env, keys = _ssh_setup(folder) if kind == "ssh" else _pgp_setup(folder, home)
        ids = _history(folder / "work", commits, options, env)
        git_dir = folder / "work" / ".git"
        every = TrustedKeys(keys.ssh_signers, keys.openpgp_keys, every_commit=True)
        head = _time(runs, lambda: verify_commits(git_dir, ids[-1], keys))
        whole = _time(runs, lambda: verify_commits(git_dir, ids[-1], every, since=ids[0]))
    finally:
        agent_env = {**os.environ, "GNUPGHOME": str(home)}
        subprocess.run(["gpgconf", "--kill", "gpg-agent"], env=agent_env, check=False)
        shutil.rmtree(home, ignore_errors=True)
    per_commit = (statistics.median(whole) - statistics.median(head)) / (commits - 1)
    return {
        "kind": kind,
        "commits": commits,
        "head_best_s": min(head),
        "head_median_s": statistics.median(head),
        "every_best_s": min(whole),
        "every_median_s": statistics.median(whole),
        "per_commit_ms": per_commit * 1000,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--commits", type=int, default=200)
    parser.add_argument("--runs", type=int, default=5)
    arguments = parser.parse_args()
    results = []
    with tempfile.TemporaryDirectory() as scratch:
        for kind in ("ssh", "openpgp"):
            result = _measure(kind, Path(scratch), arguments.commits, arguments.runs)
            results.append(result)
            print(
                f"{kind}: head {result['head_median_s']:.3f}s (best {result['head_best_s']:.3f}s), "
                f"every one of {arguments.commits} {result['every_median_s']:.3f}s "
                f"(best {result['every_best_s']:.3f}s): {result['per_commit_ms']:.1f} ms per "
                "commit checked"
            )
    out = ROOT / "bench" / "out"
    out.mkdir(exist_ok=True)
    (out / "signatures.json").write_text(json.dumps(results, indent=2) + "\n")


if __name__ == "__main__":
    main()
