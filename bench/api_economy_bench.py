"""API economy on a real API server (issue 31, item 3): the calls and writes of a cold install
and of a sync that changes nothing, for runtimes of 1, 30 and 100 modules of
:mod:`tests.support.economy_fleet` (7 objects each, the default configuration included), counted
from the server's audit log (bench/kube_bench.py).

    python bench/api_economy_bench.py [--modules 1 30 100]

One control plane for all sizes (each fleet has names of its own); its Deployments are made
available as they appear (tests/support/kube_workloads.py), so a cold install runs to Ready. Each
sync is a fresh ``reconciler sync --wait 120`` process. Prints a table (markdown) and writes
``bench/out/api_economy.json``.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.kube_bench import ROOT, Fleet, control_plane
from tests.support.economy_fleet import OBJECTS_PER_MODULE, SHARED_KINDS
from tests.support.kube_workloads import deployments_made_available


def measure(fleet: Fleet) -> dict[str, object]:
    """Cold install, then a sync that changes nothing: calls and writes of each."""
    cold_seconds, output, cold = fleet.measured_sync()
    if "succeeded" not in output:
        raise SystemExit(f"the cold install did not finish:\n{output}")
    _, _, again = fleet.measured_sync()
    objects = fleet.modules * OBJECTS_PER_MODULE
    kinds = SHARED_KINDS + fleet.modules
    row = {
        "modules": fleet.modules,
        "objects": objects,
        "kinds": kinds,
        "cold_seconds": round(cold_seconds, 2),
        "cold": cold.by_kind,
        "cold_calls": cold.calls,
        "cold_writes": cold.writes,
        "cold_events": cold.events,
        "writes_per_object": round(cold.writes / objects, 3),
        "nochange": again.by_kind,
        "nochange_calls": again.calls,
        "nochange_writes": again.writes,
    }
    print(f"{fleet.modules} modules, cold install: {cold.text()}", flush=True)
    print(f"{fleet.modules} modules, no change: {again.text()}", flush=True)
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--modules", type=int, nargs="+", default=[1, 30, 100])
    args = parser.parse_args()
    rows = []
    with (
        tempfile.TemporaryDirectory(prefix="economy-") as work,
        control_plane() as plane,
        deployments_made_available(plane.kubeconfig),
    ):
        for index, modules in enumerate(args.modules):
            root = Path(work) / f"fleet-{modules}"
            rows.append(measure(Fleet(plane, root, modules, f"e{index}m").write()))
    print("\n| modules | objects | cold: calls | cold: writes | writes/object | Events "
          "| no change: calls | no change: writes | kinds + 2 |")  # fmt: skip
    print("|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['modules']} | {r['objects']} | {r['cold_calls']} | {r['cold_writes']} "
              f"| {r['writes_per_object']} | {r['cold_events']} | {r['nochange_calls']} "
              f"| {r['nochange_writes']} | {int(str(r['kinds'])) + 2} |")  # fmt: skip
    out = ROOT / "bench" / "out"
    out.mkdir(parents=True, exist_ok=True)
    (out / "api_economy.json").write_text(json.dumps(rows, indent=1), encoding="utf-8")


if __name__ == "__main__":
    main()
