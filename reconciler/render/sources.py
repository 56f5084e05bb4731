"""Module versions of kind ``source``: a chart or bundle pulled by digest, cached on disk (edge).

A ``source.yaml`` names an artifact in an OCI registry or an HTTP chart repository by URL,
version and digest (schemas/source.schema.json, docs/sources.md). Its archive is looked up in the
**disk cache** first, a folder of archives by digest (``<cache>/sha256/<hex>.tgz``, beside each
the sha256 of its bytes, checked at every read): a pinned digest names one content for ever, so
a cached archive is used without asking the registry, and a registry that is down does not stop a
render it served before. Otherwise it is pulled (:mod:`reconciler.render.oci`), its chart version
checked against the pin, and stored. Then a ``chart`` is rendered by Helm's engine like a
``chart/`` folder (:class:`~reconciler.render.helm.HelmChartRenderer`), with the same values
layers; a ``manifests`` bundle's ``crds/`` and ``manifests/`` files are read as objects.

The cache folder is ``$RECONCILER_SOURCE_CACHE``, else ``$XDG_CACHE_HOME/reconciler/sources``
(``~/.cache/reconciler/sources``). Registry credentials come from the file named by
``$RECONCILER_REGISTRY_CREDENTIALS``: a Docker config JSON (``{"auths": {HOST: {"auth":
base64(user:password)}}}``), which is also what a Kubernetes Secret of type
``kubernetes.io/dockerconfigjson`` holds, mounted as a file. Never from the repo, never logged.
"""

from __future__ import annotations

import ast
import base64
import hashlib
import io
import json
import os
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import yaml

from reconciler.core.model import ModuleKind, RenderedTemplate, TemplateSource
from reconciler.core.templates import RenderRequest
from reconciler.errors import RenderError, TransientError
from reconciler.render.documents import objects_of
from reconciler.render.helm import HelmChartRenderer
from reconciler.render.oci import Artifact, Login
from reconciler.render.sandbox import RenderLimits, Sandbox, configured_limits, shared_sandbox

CACHE_VARIABLE = "RECONCILER_SOURCE_CACHE"
CREDENTIALS_VARIABLE = "RECONCILER_REGISTRY_CREDENTIALS"


def default_cache_dir(fallback: Path | None = None) -> Path:
    """The disk cache of pulled archives: ``$RECONCILER_SOURCE_CACHE``, else ``fallback`` (the
    daemon's, beside its fetched commits), else the user's cache folder."""
    named = os.environ.get(CACHE_VARIABLE)
    if named:
        return Path(named)
    if fallback is not None:
        return fallback
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "reconciler" / "sources"


def default_credentials_file() -> Path | None:
    """The registry credentials file, when ``$RECONCILER_REGISTRY_CREDENTIALS`` names one."""
    named = os.environ.get(CREDENTIALS_VARIABLE)
    return Path(named) if named else None


@dataclass(slots=True)
class SourceRenderer:
    """Renders ``source`` versions; counts the pulls it made (the disk cache answers the rest).
    ``cache_dir`` is used when ``$RECONCILER_SOURCE_CACHE`` does not name one."""

    cache_dir: Path | None = None
    credentials_file: Path | None = None
    charts: HelmChartRenderer = field(default_factory=HelmChartRenderer)
    pulls: int = 0
    pull_sandbox: Sandbox = field(default_factory=lambda: shared_sandbox(network=True))

    def render(self, request: RenderRequest) -> RenderedTemplate:
        """The objects of the artifact ``request``'s ``source.yaml`` pins."""
        shown = request.template.root
        spec = source_spec(request.template.files["source.yaml"])
        artifact = Artifact(
            spec["url"],
            str(spec["version"]),
            spec["digest"],
            spec.get("chart", ""),
            bool(spec.get("plainHttp", False)),
        )
        try:
            files = chart_files(self.archive(artifact), artifact, self.pull_sandbox.limits)
        except RenderError as error:
            raise RenderError(str(error), error.path or f"{shown}/source.yaml") from None
        except TransientError as error:
            raise TransientError(f"{shown}/source.yaml: {error}", error.retry_after) from None
        if spec.get("type", "chart") == "manifests":
            return _bundle(files, request.key, shown)
        chart = TemplateSource(
            ModuleKind.CHART,
            request.template.digest,
            files,
            shown,
            request.template.values,
            request.template.values_path,
        )
        return self.charts.render(replace(request, template=chart))

    def archive(self, artifact: Artifact) -> bytes:
        """The artifact's archive: from the disk cache, else pulled (and then cached)."""
        cache = default_cache_dir(self.cache_dir)
        cached = read_cached(cache, artifact.digest)
        if cached is not None:
            return cached
        login = registry_login(self.credentials_file or default_credentials_file(), artifact)
        self.pulls += 1
        import tempfile  # only when something is pulled (startup time of every command)

        with tempfile.TemporaryDirectory(prefix="reconciler-pull-") as folder:
            pulled = Path(self.pull_sandbox.run("pull", (artifact, login, folder), ""))
            data = read_archive(pulled, artifact, self.pull_sandbox.limits)
        if not artifact.oci and _sha256(data) != artifact.digest:
            raise RenderError(
                f"{artifact.shown}: the repository's archive has digest {_sha256(data)}, "
                f"source.yaml pins {artifact.digest}; refused (pin the digest you reviewed)"
            )
        chart_files(data, artifact, self.pull_sandbox.limits)  # the pinned version, then kept
        write_cached(cache, artifact.digest, data)
        return data


def source_spec(text: bytes) -> Mapping[str, Any]:
    """The checked ``spec`` of a ``source.yaml``, as the validator handed it over (the sorted
    items of the document, as Python literals: config.templates)."""
    body = dict(ast.literal_eval(text.decode()))
    spec: Mapping[str, Any] = body["spec"]
    return spec


def read_cached(cache: Path, digest: str) -> bytes | None:
    """The archive cached under ``digest``, or None (absent, or its bytes do not match the
    sha256 recorded beside it: a torn or altered file is pulled again)."""
    path = _cache_path(cache, digest)
    try:
        data = path.read_bytes()
        recorded = path.with_suffix(".sha256").read_text(encoding="ascii").strip()
    except OSError:
        return None
    return data if _sha256(data) == recorded else None


def write_cached(cache: Path, digest: str, data: bytes) -> None:
    """Keep ``data`` under ``digest`` (written aside, then renamed: never half a file)."""
    path = _cache_path(cache, digest)
    path.parent.mkdir(parents=True, exist_ok=True)
    import tempfile

    for target, content in ((path, data), (path.with_suffix(".sha256"), _sha256(data).encode())):
        with tempfile.NamedTemporaryFile(dir=path.parent, delete=False) as aside:
            aside.write(content)
        os.replace(aside.name, target)


def _cache_path(cache: Path, digest: str) -> Path:
    algorithm, _, hexdigest = digest.partition(":")
    return cache / algorithm / f"{hexdigest}.tgz"


def _sha256(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


def registry_login(path: Path | None, artifact: Artifact) -> Login | None:
    """The credentials for ``artifact``'s host in the Docker config JSON at ``path``."""
    if path is None:
        return None
    try:
        auths = json.loads(path.read_text(encoding="utf-8")).get("auths", {})
    except (OSError, ValueError, AttributeError):
        message = f"{CREDENTIALS_VARIABLE}: {path} is not a readable Docker config JSON file"
        raise RenderError(message) from None
    entry = auths.get(artifact.host) if isinstance(auths, Mapping) else None
    if not isinstance(entry, Mapping):
        return None
    if "auth" in entry:
        try:
            decoded = base64.b64decode(str(entry["auth"]), validate=True).decode()
        except ValueError:  # binascii.Error and UnicodeDecodeError are ValueErrors
            message = f"{CREDENTIALS_VARIABLE}: {path}: the 'auth' of {artifact.host} is not "
            raise RenderError(message + "base64 of user:password") from None
        user, _, password = decoded.partition(":")
        return Login(user, password)
    return Login(str(entry.get("username", "")), str(entry.get("password", "")))


def read_archive(path: Path, artifact: Artifact, limits: RenderLimits) -> bytes:
    """The pulled archive at ``path``, refused from its size when over ``chart_size``."""
    size = path.stat().st_size
    if size > limits.chart_size:
        message = f"the archive is {size} bytes, over the {limits.chart_size}-byte limit"
        raise RenderError(f"{artifact.shown}: {message} (--chart-size-limit); refused")
    return path.read_bytes()


def chart_files(
    archive: bytes, artifact: Artifact, limits: RenderLimits | None = None
) -> dict[str, bytes]:
    """The files of a chart archive by path inside its top folder; its ``Chart.yaml`` version
    must be the pinned one. Each file's size is checked from its header before it is unpacked
    (an archive bomb is refused at its first file over ``limits.chart_file``, or when its files
    add up to over ``limits.chart_size``)."""
    import tarfile  # only when a chart archive is read (startup time of every command)

    limits = limits or configured_limits()
    files: dict[str, bytes] = {}
    total = 0
    try:
        with tarfile.open(fileobj=io.BytesIO(archive), mode="r:gz") as tar:
            for member in tar:  # one header at a time: a file is judged before it is read
                total += member.size
                refused = _refused_member(member.name, member.size, total, limits)
                if refused is not None:
                    raise RenderError(f"{artifact.shown}: {refused}")
                parts = member.name.split("/", 1)
                extracted = tar.extractfile(member) if member.isfile() else None
                if len(parts) == 2 and extracted is not None and ".." not in parts[1].split("/"):
                    files[parts[1]] = extracted.read()
    except (tarfile.TarError, OSError, EOFError):
        raise RenderError(f"{artifact.shown}: not a chart archive (.tgz)") from None
    try:
        chart = yaml.safe_load(files.get("Chart.yaml", b"{}")) or {}
    except yaml.YAMLError:
        raise RenderError(f"{artifact.shown}: its Chart.yaml is not YAML") from None
    found = str(chart.get("version", "")) if isinstance(chart, Mapping) else ""
    if found != artifact.version:
        message = f"{artifact.shown}: the pinned digest holds version '{found}', not the pin's"
        raise RenderError(message)
    return files


def _refused_member(name: str, size: int, total: int, limits: RenderLimits) -> str | None:
    """Why an archive's file is refused from its header (too big, alone or with the others)."""
    if size > limits.chart_file:
        over = f"unpacks to {size} bytes, over the {limits.chart_file}-byte limit"
        return f"its file {name} {over} (--chart-file-limit); refused before unpacking"
    if total > limits.chart_size:
        over = f"unpack to over {limits.chart_size} bytes"
        return f"its files {over} (--chart-size-limit); refused before unpacking"
    return None


def _bundle(files: Mapping[str, bytes], key: str, shown: str) -> RenderedTemplate:
    """A bundle's objects: its ``crds/`` files first, then ``manifests/``, by path."""
    names = (p for p in files if p.startswith(("crds/", "manifests/")))
    picked = {p: files[p].decode(errors="replace") for p in names if p.endswith((".yaml", ".yml"))}
    crds = {p: t for p, t in picked.items() if p.startswith("crds/")}
    rest = {p: t for p, t in picked.items() if not p.startswith("crds/")}
    objects = (*objects_of(crds, shown), *objects_of(rest, shown))
    return RenderedTemplate(tuple(objects), key)
