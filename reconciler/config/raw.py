"""The config repo as the loader read it, before any check (pure values).

The loader (:mod:`reconciler.source.loader`) reads every file of a revision into these values:
each file's display path and parsed documents (or ``broken`` when it could not be read), module
folders with their version folders, and the problems met while reading. Validation
(:mod:`reconciler.config.validate`) takes a :class:`RawRepo` and checks it as a whole.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from reconciler.config.settings_checks import StepTraits
from reconciler.config.yamlsafe import Document
from reconciler.core.diagnostics import Diagnostic


@dataclass(frozen=True, slots=True)
class RawFile:
    """One file as read: its display path and documents. ``broken`` when reading failed."""

    path: str
    documents: tuple[Document, ...] = ()
    broken: bool = False

    @property
    def stem(self) -> str:
        """The file name without folder and ``.yaml``."""
        name = self.path.rsplit("/", 1)[-1]
        return name.removesuffix(".yaml")

    def at(self, rule: str, message: str) -> Diagnostic:
        """A diagnostic about the file as a whole (line 1, column 1)."""
        return Diagnostic(self.path, 1, 1, rule, message)


@dataclass(frozen=True, slots=True)
class RawTemplate:
    """The files a templated version renders from (a chart's folder, an overlay's folder),
    as bytes by path relative to ``root`` (the displayed folder), and their content digest."""

    root: str
    files: Mapping[str, bytes]
    digest: str


@dataclass(frozen=True, slots=True)
class RawVersion:
    """A version folder of a module. ``markers`` are the files that decide its kind
    (``manifest.yaml``, ``chart/Chart.yaml``, ``kustomization.yaml``, ``source.yaml``) found
    in it; ``template`` the files a templated kind renders from; ``values`` its
    ``values.yaml``; ``source`` its ``source.yaml``."""

    name: str
    path: str
    manifest: RawFile | None = None
    default: RawFile | None = None
    markers: tuple[str, ...] = ()
    template: RawTemplate | None = None
    values: RawFile | None = None
    source: RawFile | None = None


@dataclass(frozen=True, slots=True)
class RawModule:
    """A module folder: its ``module.yaml`` and version folders."""

    name: str
    path: str
    module: RawFile | None = None
    versions: tuple[RawVersion, ...] = ()


@dataclass(frozen=True, slots=True)
class RawRepo:
    """Everything the loader read, before any check."""

    settings: RawFile | None = None
    runtimes: tuple[RawFile, ...] = ()
    modules: tuple[RawModule, ...] = ()
    channels: tuple[RawFile, ...] = ()
    problems: tuple[Diagnostic, ...] = ()
    #: The channels folder could not be read (reported once); runtimes do not repeat it.
    channels_unavailable: bool = False
    #: Steps of the installed plugins, for ``disabledSteps`` and ``retryWithoutFail``.
    plugin_steps: Mapping[str, StepTraits] = field(default_factory=dict)
    #: Files runtimes name in ``valuesFrom``, by their path in the repo (read when they are
    #: files inside the repo; validation reports the others).
    values_files: Mapping[str, RawFile] = field(default_factory=dict)
