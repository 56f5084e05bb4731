"""A small fleet as text, for tests on real git histories: a config repo in ``fleet/`` and channels
in ``channels/`` beside it (as in the project), its files by path (``BASE_FILES``), git run in a
folder, and files written (or removed, for ``None``) as a commit would change them."""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Mapping
from pathlib import Path

SETTINGS = """\
apiVersion: reconciler.dev/v1alpha1
kind: Settings
metadata: {name: fleet}
spec: {channelsFrom: {path: ../channels}}
"""


def module_yaml(name: str, extra: str = "") -> str:
    return (
        "apiVersion: reconciler.dev/v1alpha1\nkind: Module\n"
        f"metadata: {{name: {name}}}\nspec:\n  namespace: {name}-system\n"
        f"  operator: {{kind: Deployment, name: {name}-operator}}\n{extra}"
    )


def manifest_yaml(name: str, version: str, extra_config: bool = False) -> str:
    kind = name.capitalize()
    text = f"""\
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {{name: {name}s.example.io}}
spec:
  group: example.io
  scope: Namespaced
  names: {{kind: {kind}, plural: {name}s, singular: {name}}}
  versions: [{{name: v1, served: true, storage: true}}]
---
apiVersion: apps/v1
kind: Deployment
metadata:
  name: {name}-operator
  labels: {{app.kubernetes.io/version: "{version}"}}
spec:
  replicas: 1
  template: {{spec: {{containers: [{{name: manager, image: "example.io/{name}:{version}"}}]}}}}
"""
    if extra_config:
        text += "---\napiVersion: v1\nkind: ConfigMap\n"
        text += f"metadata: {{name: {name}-extra}}\ndata: {{a: b}}\n"
    return text


def default_yaml(name: str) -> str:
    kind = name.capitalize()
    return f"apiVersion: example.io/v1\nkind: {kind}\nmetadata: {{name: default}}\nspec: {{}}\n"


def channel_yaml(name: str, modules: dict[str, str]) -> str:
    entries = ", ".join(f"{m}: {v}" for m, v in modules.items())
    return (
        f"apiVersion: reconciler.dev/v1alpha1\nkind: Channel\nmetadata: {{name: {name}}}\n"
        f"spec: {{modules: {{{entries}}}}}\n"
    )


#: Settings whose rollouts go in two waves: the canary (``tier=dev``), then everyone.
CANARY_SETTINGS = """\
apiVersion: reconciler.dev/v1alpha1
kind: Settings
metadata: {name: fleet}
spec:
  channelsFrom: {path: ../channels}
  rollout:
    waves:
      - {name: canary, selector: tier=dev}
      - {name: everyone}
    healthyFor: 30m
"""


def tiered_runtime_yaml(name: str, tier: str) -> str:
    """A runtime labelled ``tier`` (``dev``: in the canary of :data:`CANARY_SETTINGS`) on the
    ``regular`` channel, with the module ``widget``."""
    return (
        "apiVersion: reconciler.dev/v1alpha1\nkind: Runtime\n"
        f"metadata: {{name: {name}, labels: {{tier: {tier}}}}}\nspec:\n  channel: regular\n"
        f"  cluster: {{context: {name}}}\n  modules: [{{name: widget}}]\n"
    )


def runtime_yaml(name: str, channel: str, modules: str, extra: str = "") -> str:
    return (
        "apiVersion: reconciler.dev/v1alpha1\nkind: Runtime\n"
        f"metadata: {{name: {name}}}\nspec:\n  channel: {channel}\n"
        f"  cluster: {{context: {name}}}\n  modules: {modules}\n{extra}"
    )


BASE_FILES = {
    "fleet/reconciler.yaml": SETTINGS,
    "fleet/modules/widget/module.yaml": module_yaml("widget"),
    "fleet/modules/widget/1.0.0/manifest.yaml": manifest_yaml("widget", "1.0.0", extra_config=True),
    "fleet/modules/widget/1.0.0/default.yaml": default_yaml("widget"),
    "fleet/modules/widget/2.0.0/manifest.yaml": manifest_yaml("widget", "2.0.0"),
    "fleet/modules/widget/2.0.0/default.yaml": default_yaml("widget"),
    "fleet/modules/gadget/module.yaml": module_yaml("gadget"),
    "fleet/modules/gadget/1.0.0/manifest.yaml": manifest_yaml("gadget", "1.0.0"),
    "fleet/modules/mesh/module.yaml": module_yaml("mesh"),
    "fleet/modules/mesh/1.0.0/manifest.yaml": manifest_yaml("mesh", "1.0.0"),
    "channels/regular.yaml": channel_yaml(
        "regular", {"widget": "1.0.0", "gadget": "1.0.0", "mesh": "1.0.0"}
    ),
    "channels/fast.yaml": channel_yaml(
        "fast", {"widget": "2.0.0", "gadget": "1.0.0", "mesh": "1.0.0"}
    ),
    "fleet/runtimes/a.yaml": runtime_yaml("a", "regular", "[{name: widget}, {name: gadget}]"),
    "fleet/runtimes/b.yaml": runtime_yaml(
        "b", "regular", "[{name: widget}, {name: gadget, strategy: Ignore}]"
    ),
    "fleet/runtimes/c.yaml": runtime_yaml("c", "fast", "[{name: widget}]"),
}


def git(root: Path, *args: str) -> str:
    done = subprocess.run(
        ["git", "-c", "user.email=t@example.io", "-c", "user.name=t", *args],
        cwd=root,
        capture_output=True,
        text=True,
        check=True,
    )
    return done.stdout


def write_tree(root: Path, files: Mapping[str, str | None]) -> None:
    for relative, text in files.items():
        path = root / relative
        if text is None:
            if path.is_dir():
                shutil.rmtree(path)
            else:
                path.unlink()
            continue
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
