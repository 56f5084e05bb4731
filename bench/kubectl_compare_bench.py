"""A cold install of a 30-module runtime (210 objects: CRDs, default configurations and all) to
Ready: ``reconciler sync`` against ``kubectl apply --server-side`` of the same rendered objects
(issue 31, item 4), each on a fresh control plane (bench/kube_bench.py).

    python bench/kubectl_compare_bench.py [--modules 30] [--rounds 2] [--kubectl /usr/bin/kubectl]

Readiness is played the same way for both: the Deployments are made available as they appear
(tests/support/kube_workloads.py). kubectl does what a script would: apply the CRDs and Namespaces,
``kubectl wait --for=condition=Established`` on the CRDs, apply the rest, ``kubectl wait
--for=condition=Available`` on the Deployments, each command with a discovery cache of its
own (cold, as ours). Ours is one ``reconciler sync --wait 120`` process, which must end with
every module Ready. Times are wall-clock from the first command's start to the last one's end.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.kube_bench import Fleet, control_plane
from tests.support.economy_fleet import rendered_objects
from tests.support.kube_workloads import deployments_made_available

FIRST = ("CustomResourceDefinition", "Namespace")


def _kubectl(
    kubectl: str, kubeconfig: Path, cache: Path, *args: str, may_fail: bool = False
) -> None:
    command = [kubectl, "--kubeconfig", str(kubeconfig), "--cache-dir", str(cache), *args]
    start = time.monotonic()
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    print(f"  kubectl {' '.join(args[:2])}: {time.monotonic() - start:.2f} s", flush=True)
    if done.returncode != 0 and may_fail:
        failed = [line for line in done.stderr.splitlines() if "error" in line.lower()]
        print(f"  ({len(failed)} error lines, the first: {failed[0][:160] if failed else ''})")
    elif done.returncode != 0:
        raise SystemExit(f"{' '.join(args[:3])} failed:\n{done.stderr[-2000:]}")


def _write(path: Path, objects: list[dict[str, Any]]) -> Path:
    path.write_text(yaml.safe_dump_all(objects, sort_keys=False), encoding="utf-8")
    return path


def kubectl_install(kubectl: str, fleet: Fleet) -> float:
    """Seconds for kubectl to install the fleet's rendered objects and see them Ready."""
    objects = rendered_objects(fleet.repo, fleet.runtime)
    first = _write(fleet.root / "first.yaml", [o for o in objects if o["kind"] in FIRST])
    rest = _write(fleet.root / "rest.yaml", [o for o in objects if o["kind"] not in FIRST])
    config, cache = fleet.plane.kubeconfig, fleet.root / "kubectl-cache"
    ssa = ("apply", "--server-side", "--force-conflicts", "--field-manager", "reconciler")
    start = time.monotonic()
    _kubectl(kubectl, config, cache, *ssa, "-f", str(first))
    _kubectl(kubectl, config, cache, "wait", "--for=condition=Established", "crd", "--all",
             "--timeout=120s")  # fmt: skip
    _kubectl(kubectl, config, cache, *ssa, "-f", str(rest))
    _kubectl(kubectl, config, cache, "wait", "--for=condition=Available", "deployments",
             "--all-namespaces", "--all", "--timeout=120s")  # fmt: skip
    return time.monotonic() - start


def kubectl_one_apply(kubectl: str, fleet: Fleet) -> float:
    """The issue's shape: one ``kubectl apply --server-side`` of every object, then a wait.

    The default configurations are refused (their kinds are not served before their CRDs are
    Established), so this installs less than ours does: a lower bound for any kubectl script.
    """
    objects = rendered_objects(fleet.repo, fleet.runtime)
    everything = _write(fleet.root / "all.yaml", objects)
    config, cache = fleet.plane.kubeconfig, fleet.root / "kubectl-cache"
    ssa = ("apply", "--server-side", "--force-conflicts", "--field-manager", "reconciler")
    start = time.monotonic()
    _kubectl(kubectl, config, cache, *ssa, "-f", str(everything), may_fail=True)
    _kubectl(kubectl, config, cache, "wait", "--for=condition=Available", "deployments",
             "--all-namespaces", "--all", "--timeout=120s")  # fmt: skip
    return time.monotonic() - start


def ours_install(fleet: Fleet) -> float:
    seconds, output = fleet.sync()
    if "succeeded" not in output or output.count(" Ready ") < fleet.modules:
        raise SystemExit(f"not every module Ready:\n{output}")
    return seconds


def one_round(tool: str, modules: int, kubectl: str) -> float:
    with (
        tempfile.TemporaryDirectory(prefix="kubectl-compare-") as work,
        control_plane() as plane,
        deployments_made_available(plane.kubeconfig),
    ):
        fleet = Fleet(plane, Path(work), modules, "cmp").write()
        if tool == "kubectl-one-apply":
            return kubectl_one_apply(kubectl, fleet)
        return kubectl_install(kubectl, fleet) if tool == "kubectl" else ours_install(fleet)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--modules", type=int, default=30)
    parser.add_argument("--rounds", type=int, default=2)
    default = shutil.which("kubectl") or "/usr/bin/kubectl"
    parser.add_argument("--kubectl", default=os.environ.get("KUBECTL", default))
    args = parser.parse_args()
    tools = ("ours", "kubectl", "kubectl-one-apply")
    times: dict[str, list[float]] = {tool: [] for tool in tools}
    for _ in range(args.rounds):
        for tool in tools:
            seconds = one_round(tool, args.modules, args.kubectl)
            times[tool].append(seconds)
            print(f"{tool}: {seconds:.2f} s", flush=True)
    for tool, values in times.items():
        print(f"{tool}: best {min(values):.2f} s, worst {max(values):.2f} s over {len(values)}")


if __name__ == "__main__":
    main()
