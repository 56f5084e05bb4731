"""Credential scan benchmark (issue 23, finding 5): how long the scan of one long hostile value
takes, per shape and size, to show that it is linear (the cost per MiB stays the same).

Each shape is a short unit repeated to the size (``eyJ-eyJ-...``, ``a=a=...``, blank lines,
...): the inputs that made the old backtracking patterns slow. A value is put in a ConfigMap's
``data`` and the document parsed first (not timed); what is timed is
``find_inline_credentials`` on it, in a fresh process per measurement (``--timeout`` stops a
run that does not end). No time budget: the figures are the work itself.

``--code DIR`` runs another checkout's ``reconciler`` (e.g. the commit before the fix:
``git archive <rev> reconciler schemas | tar -x -C DIR``; there use ``--sizes 0.025,0.05``:
the old scan was quadratic). Results: ``bench/out/credential_scan.json``.

    python bench/credential_scan_bench.py [--code DIR] [--sizes 1,2,5] [--shapes eyJ-,a=]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
MIB = 1 << 20

#: Shape name -> the unit repeated.
SHAPES = {
    "eyJ-": "eyJ-",
    "a=": "a=",
    "a.": "a.",
    "ghp_": "ghp_",
    "base64 run": "QUJDRA+/",
    "blank lines": " \n",
    "newlines": "\n",
    "Bearer": "Bearer ",
    "a://": "a://",
    "JSON pairs": '"a":"b",',
    "--password": "--password ",
    "password: lines": "password: \n",
    "quotes": '"',
    "plain x": "x",
}

CHILD = """\
import json, sys, time
sys.path.insert(0, {code!r})
from reconciler.config.yamlsafe import parse_yaml
from reconciler.config.credentials import find_inline_credentials
unit = {unit!r}
value = unit * ({size} // len(unit))
text = "apiVersion: v1\\nkind: ConfigMap\\nmetadata: {{name: c}}\\ndata:\\n  big: "
text += json.dumps(value) + "\\n"
documents, problems = parse_yaml(text, "m.yaml")
started = time.perf_counter()
found = find_inline_credentials(documents[0])
print(time.perf_counter() - started, len(found))
"""


def measure(code: Path, unit: str, size: int, timeout: float) -> dict[str, Any]:
    """Scan ``size`` characters of ``unit`` repeated, in a fresh process."""
    script = CHILD.format(code=str(code), unit=unit, size=size)
    try:
        done = subprocess.run(
            [sys.executable, "-c", script], capture_output=True, text=True, timeout=timeout
        )
    except subprocess.TimeoutExpired:
        return {"chars": size, "seconds": None, "note": f"over {timeout:g} s, stopped"}
    if done.returncode != 0:
        return {"chars": size, "seconds": None, "note": done.stderr.strip()[-300:]}
    seconds, found = done.stdout.split()
    return {"chars": size, "seconds": float(seconds), "findings": int(found)}


def shape_row(code: Path, name: str, sizes: list[float], timeout: float) -> dict[str, Any]:
    """One shape at every size, with its cost per MiB."""
    runs = [measure(code, SHAPES[name], int(mib * MIB), timeout) for mib in sizes]
    for run in runs:
        if run["seconds"] is not None:
            run["seconds_per_mib"] = run["seconds"] / (run["chars"] / MIB)
    return {"shape": name, "unit": SHAPES[name], "runs": runs}


def _shown(run: dict[str, Any]) -> str:
    if run["seconds"] is None:
        return str(run["note"])[:40]
    return f"{run['seconds']:.3f} s ({run['seconds_per_mib']:.3f}/MiB)"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--code", type=Path, default=ROOT, help="checkout whose code to run")
    parser.add_argument("--sizes", default="1,2,5", help="MiB, comma-separated")
    parser.add_argument("--shapes", default=",".join(SHAPES), help="names, comma-separated")
    parser.add_argument("--timeout", type=float, default=300.0, help="per run")
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "out" / "credential_scan.json")
    args = parser.parse_args(argv)
    sizes = [float(s) for s in args.sizes.split(",") if s]
    code = args.code.resolve()
    started = time.perf_counter()
    rows = []
    for name in (s for s in args.shapes.split(",") if s):
        row = shape_row(code, name, sizes, args.timeout)
        rows.append(row)
        print(f"{name:16} " + "  ".join(_shown(run) for run in row["runs"]), flush=True)
    results: dict[str, Any] = {"code": str(code), "sizes_mib": sizes, "shapes": rows}
    results["wall_seconds"] = time.perf_counter() - started
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
