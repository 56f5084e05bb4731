"""Generates a large, valid config repo: N runtimes over M modules with V versions each.

Used by the benchmarks (validation of 10,000 runtimes; later the daemon and fleet diffs over
1,000 runtimes x 10 modules). Deterministic for a seed. ``--corrupt K`` plants K mistakes of
different kinds and lists them in ``<out>/.corruptions.json`` (file and kind of each), so a
benchmark can check that every mistake is found.

    python bench/generate_fleet.py bench/out/fleet-10000 --runtimes 10000
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import time
from dataclasses import dataclass
from pathlib import Path

CHANNELS = ("regular", "fast", "experimental")
DAYS = ("Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun")
ZONES = ("UTC", "Europe/Berlin", "America/New_York", "Asia/Tokyo")
REGIONS = ("eu", "us", "ap", "sa")


@dataclass(frozen=True)
class Corruption:
    """One planted mistake: the file (relative to the repo) and what is wrong in it."""

    path: str
    kind: str


def module_names(count: int) -> list[str]:
    """``mod-00`` .. ``mod-NN``."""
    return [f"mod-{i:02d}" for i in range(count)]


def versions_of(count: int) -> list[str]:
    """``1.0.0``, ``1.1.0``, ..."""
    return [f"1.{i}.0" for i in range(count)]


def manifest(module: str, version: str) -> str:
    """A realistic operator manifest: CRD, ServiceAccount, RBAC and the operator Deployment."""
    kind = "".join(part.capitalize() for part in module.split("-"))
    return f"""\
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: {module}s.operator.example.io
spec:
  group: operator.example.io
  names: {{kind: {kind}, listKind: {kind}List, plural: {module}s, singular: {module}}}
  scope: Namespaced
  versions:
    - name: v1alpha1
      served: true
      storage: true
      subresources: {{status: {{}}}}
      schema:
        openAPIV3Schema:
          type: object
          properties:
            spec:
              type: object
              properties:
                replicas: {{type: integer, minimum: 1}}
                logLevel: {{type: string, enum: [debug, info, warn, error]}}
            status:
              type: object
              x-kubernetes-preserve-unknown-fields: true
---
apiVersion: v1
kind: ServiceAccount
metadata:
  name: {module}-operator
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata:
  name: {module}-operator
rules:
  - apiGroups: [operator.example.io]
    resources: ["{module}s", "{module}s/status"]
    verbs: [get, list, watch, update, patch]
  - apiGroups: [apps]
    resources: [deployments]
    verbs: [get, list, watch, create, update, patch, delete]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata:
  name: {module}-operator
roleRef: {{apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: {module}-operator}}
subjects:
  - {{kind: ServiceAccount, name: {module}-operator, namespace: example-system}}
---
apiVersion: apps/v1
kind: Deployment
metadata:
  name: {module}-operator
  labels:
    app.kubernetes.io/name: {module}-operator
    app.kubernetes.io/version: "{version}"
spec:
  replicas: 1
  selector:
    matchLabels: {{app.kubernetes.io/name: {module}-operator}}
  template:
    metadata:
      labels: {{app.kubernetes.io/name: {module}-operator}}
    spec:
      serviceAccountName: {module}-operator
      containers:
        - name: manager
          image: registry.example.io/{module}-operator:{version}
          args: [--leader-elect]
          resources:
            requests: {{cpu: 10m, memory: 64Mi}}
            limits: {{cpu: 500m, memory: 256Mi}}
"""


def default_configuration(module: str) -> str:
    """The default configuration CR of ``module``."""
    kind = "".join(part.capitalize() for part in module.split("-"))
    return f"""\
apiVersion: operator.example.io/v1alpha1
kind: {kind}
metadata:
  name: default
  namespace: example-system
spec:
  replicas: 1
  logLevel: info
"""


def module_file(module: str, index: int, names: list[str], versions: list[str]) -> str:
    """``module.yaml``: the first module is mandatory, every fourth depends on the previous,
    and the newest version of the second module requires downtime."""
    lines = [
        "apiVersion: reconciler.dev/v1alpha1",
        "kind: Module",
        f"metadata: {{name: {module}}}",
        "spec:",
        f"  description: Generated module {module}.",
        "  namespace: example-system",
        f"  operator: {{kind: Deployment, name: {module}-operator}}",
    ]
    if index == 0:
        lines.append("  mandatory: true")
    if index % 4 == 3:
        lines.append(f"  dependsOn: [{names[index - 1]}]")
    if index == 1:
        lines.append(f"  versions: {{{versions[-1]}: {{requiresDowntime: true}}}}")
    return "\n".join(lines) + "\n"


def channel_file(name: str, position: int, names: list[str], versions: list[str]) -> str:
    """A channel: regular serves the oldest versions, experimental the newest."""
    lines = [
        "apiVersion: reconciler.dev/v1alpha1",
        "kind: Channel",
        f"metadata: {{name: {name}}}",
        "spec:",
        "  modules:",
    ]
    top = len(versions) - 1
    for module in names:
        lines.append(f"    {module}: {versions[min(position, top)]}")
    return "\n".join(lines) + "\n"


def runtime_file(name: str, rng: random.Random, names: list[str], versions: list[str]) -> str:
    """A runtime with 3-8 modules, some pinned, overridden or ignored, maybe a window."""
    channel = rng.choice(CHANNELS)
    lines = [
        "apiVersion: reconciler.dev/v1alpha1",
        "kind: Runtime",
        "metadata:",
        f"  name: {name}",
        "  labels:",
        f"    region: {rng.choice(REGIONS)}",
        f"    tier: {'prod' if channel == 'regular' else 'dev'}",
        "spec:",
        f"  channel: {channel}",
        "  cluster:",
        f"    kubeconfigSecret: {{name: {name}-kubeconfig, key: config}}",
        "  modules:",
    ]
    for module in sorted(rng.sample(names[1:], min(len(names) - 1, rng.randint(3, 8)))):
        lines.append(f"    - name: {module}")
        roll = rng.random()
        if roll < 0.05:
            lines.append(f"      version: {rng.choice(versions)}")
        elif roll < 0.10:
            lines.append(f"      channel: {rng.choice(CHANNELS)}")
        elif roll < 0.15:
            lines.append("      strategy: Ignore")
    if rng.random() < 0.3:
        days = ", ".join(sorted(rng.sample(DAYS, 2), key=DAYS.index))
        lines += [
            "  maintenanceWindow:",
            f"    days: [{days}]",
            f'    start: "0{rng.randint(0, 5)}:00"',
            "    duration: 4h",
            f"    timezone: {rng.choice(ZONES)}",
        ]
    return "\n".join(lines) + "\n"


def generate_fleet(
    out: Path, runtimes: int, modules: int = 10, versions: int = 3, seed: int = 1, corrupt: int = 0
) -> list[Corruption]:
    """Write the repo to ``out`` (replacing it); return the planted corruptions."""
    rng = random.Random(seed)
    if out.exists():
        shutil.rmtree(out)
    names, tags = module_names(modules), versions_of(versions)
    files: dict[str, str] = {
        "reconciler.yaml": SETTINGS,
        **{f"channels/{c}.yaml": channel_file(c, i, names, tags) for i, c in enumerate(CHANNELS)},
    }
    for index, module in enumerate(names):
        files[f"modules/{module}/module.yaml"] = module_file(module, index, names, tags)
        for version in tags:
            files[f"modules/{module}/{version}/manifest.yaml"] = manifest(module, version)
            files[f"modules/{module}/{version}/default.yaml"] = default_configuration(module)
    for i in range(runtimes):
        name = f"rt-{i:05d}"
        files[f"runtimes/{name}.yaml"] = runtime_file(name, rng, names, tags)
    corruptions = plant_corruptions(files, rng, corrupt)
    _write(out, files)
    if corruptions:
        listing = [c.__dict__ for c in corruptions]
        (out / ".corruptions.json").write_text(json.dumps(listing, indent=2), encoding="utf-8")
    return corruptions


SETTINGS = """\
apiVersion: reconciler.dev/v1alpha1
kind: Settings
metadata: {name: generated-fleet}
spec:
  systemNamespace: reconciler-system
  deletionBrake: {maxDeletionsPerSync: 10}
"""


def _unknown_field(text: str) -> str:
    return text.replace("  channel:", "  chanel:", 1)


def _unknown_channel(text: str) -> str:
    return text.replace("  channel: ", "  channel: nightly-", 1)


def _unknown_module(text: str) -> str:
    return text.replace("    - name: mod-", "    - name: mdo-", 1)


def _missing_pin(text: str) -> str:
    return text.replace("  modules:\n", "  modules:\n    - {name: mod-00, version: 9.9.9}\n", 1)


def _wrong_name(text: str) -> str:
    return text.replace("  name: rt-", "  name: renamed-rt-", 1)


def _duplicate_key(text: str) -> str:
    return text + "  suspend: false\n  suspend: true\n"


def _wrong_type(text: str) -> str:
    return text.replace("kind: Runtime\n", "kind: Runtime\n", 1).replace(
        "  cluster:\n", "  suspend: sometimes\n  cluster:\n", 1
    )


def _bad_enum(text: str) -> str:
    return text.replace("  modules:\n", "  modules:\n    - {name: mod-00, strategy: Keep}\n", 1)


RUNTIME_MISTAKES = {
    "unknown field": _unknown_field,
    "unknown channel": _unknown_channel,
    "unknown module": _unknown_module,
    "pin to a missing version": _missing_pin,
    "metadata.name differs from the file name": _wrong_name,
    "duplicate key": _duplicate_key,
    "wrong type": _wrong_type,
    "bad enum value": _bad_enum,
}


def plant_corruptions(files: dict[str, str], rng: random.Random, count: int) -> list[Corruption]:
    """Change ``count`` runtime files in place, cycling through the kinds of mistake; one
    channel entry to a missing version and one unknown dependency are added when count > 8."""
    runtime_paths = sorted(p for p in files if p.startswith("runtimes/"))
    chosen = rng.sample(runtime_paths, min(count, len(runtime_paths)))
    planted: list[Corruption] = []
    kinds = list(RUNTIME_MISTAKES)
    for index, path in enumerate(chosen[: max(0, count - 2) if count > 8 else count]):
        kind = kinds[index % len(kinds)]
        files[path] = RUNTIME_MISTAKES[kind](files[path])
        planted.append(Corruption(path, kind))
    if count > 8:
        files["channels/fast.yaml"] += "    mod-ghost: 1.0.0\n"
        planted.append(Corruption("channels/fast.yaml", "channel maps a missing module"))
        module = sorted(p for p in files if p.endswith("/module.yaml"))[-1]
        files[module] += "  dependsOn: [mod-nowhere]\n"
        planted.append(Corruption(module, "dependsOn names a missing module"))
    return planted


def _write(out: Path, files: dict[str, str]) -> None:
    made: set[Path] = set()
    for relative, text in files.items():
        path = out / relative
        if path.parent not in made:
            path.parent.mkdir(parents=True, exist_ok=True)
            made.add(path.parent)
        path.write_text(text, encoding="utf-8")


def main(argv: list[str] | None = None) -> int:
    """Command line; see the module docstring."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("out", type=Path, help="folder to write (replaced if it exists)")
    parser.add_argument("--runtimes", type=int, default=1000)
    parser.add_argument("--modules", type=int, default=10)
    parser.add_argument("--versions", type=int, default=3)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--corrupt", type=int, default=0, help="plant this many mistakes")
    args = parser.parse_args(argv)
    started = time.perf_counter()
    planted = generate_fleet(
        args.out, args.runtimes, args.modules, args.versions, args.seed, args.corrupt
    )
    elapsed = time.perf_counter() - started
    print(
        f"wrote {args.out}: {args.runtimes} runtimes, {args.modules} modules x "
        f"{args.versions} versions, {len(planted)} mistakes, in {elapsed:.2f}s"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
