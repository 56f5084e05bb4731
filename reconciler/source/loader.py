"""Reads a config repo from disk (the I/O edge of validation).

Walks the layout of DESIGN.md §2 (``reconciler.yaml``, ``runtimes/``, ``modules/<name>/<version>/``
and the channels folder), reads each file safely (rule C6: size limit, strict UTF-8, no symlink
leaving the repo), parses it with :mod:`reconciler.config.yamlsafe` and hands the result to the pure
:func:`reconciler.config.validate.validate_repo`. Paths in diagnostics are shown as the user reaches
them
from the current directory (``sample-repo/runtimes/prod-eu-1.yaml``). Callers: the CLI, tests and
the benchmark, on a folder or on a git revision's tree.
"""

from __future__ import annotations

import hashlib
import os
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from reconciler.config.budget import (
    DEFAULT_COMMIT_SECONDS,
    DEFAULT_FILE_SECONDS,
    TimeBudget,
    budget_diagnostic,
)
from reconciler.config.raw import RawFile, RawModule, RawRepo, RawTemplate, RawVersion
from reconciler.config.remotes import ref_problem, remote_problem
from reconciler.config.schema import SchemaChecker
from reconciler.config.validate import Validation, validate_repo
from reconciler.config.yamlsafe import parse_yaml
from reconciler.core.diagnostics import Diagnostic
from reconciler.core.model import ChannelsFrom
from reconciler.core.redaction import mask
from reconciler.core.templates import Capabilities, RenderCache, TemplateRenderer
from reconciler.errors import OverBudgetError, SourceError, UnreadableError
from reconciler.source.folder import FolderTree
from reconciler.source.plugins import load_plugin_step_names
from reconciler.source.schemas import load_schemas
from reconciler.source.tree import Entry, SourceTree, SubTree

#: Files larger than this are refused (C6); ``--max-file-size`` changes it.
DEFAULT_MAX_FILE_SIZE = 5 * 1024 * 1024

SETTINGS_FILE = "reconciler.yaml"

#: The file a version folder holds, by module kind (docs/charts.md): exactly one of them.
CHART_MARKER = "chart/Chart.yaml"
KUSTOMIZE_MARKER = "kustomization.yaml"
KIND_MARKERS = ("manifest.yaml", CHART_MARKER, KUSTOMIZE_MARKER, "source.yaml")


@dataclass(frozen=True, slots=True)
class ReadOptions:
    """How files are read. ``yaml_loader`` None means the libyaml parser."""

    max_file_size: int = DEFAULT_MAX_FILE_SIZE
    channels_dir: Path | None = None
    yaml_loader: type[Any] | None = None
    #: Channels from another source (``channelsFrom.git``, fetched by the caller).
    channels_tree: SourceTree | None = None
    channels_label: str = "channels"
    #: Seconds allowed to read and check one file, and a whole commit (C6: then refused).
    file_time_budget: float = DEFAULT_FILE_SECONDS
    commit_time_budget: float = DEFAULT_COMMIT_SECONDS
    #: The clock of the time budgets: the reading thread's CPU time, so that a busy machine (a
    #: loaded CI runner, other replicas' work) does not spend a file's budget (tests pass a
    #: fake one).
    clock: Callable[[], float] = time.thread_time

    def time_budget(self) -> TimeBudget:
        """A new time budget for one read of a repo; the commit's time starts now."""
        return TimeBudget(self.file_time_budget, self.commit_time_budget, self.clock)


def load_repo(
    path: str | os.PathLike[str],
    options: ReadOptions | None = None,
    checker: SchemaChecker | None = None,
    *,
    tree: SourceTree | None = None,
    cache: ParseCache | None = None,
    renderer: TemplateRenderer | None = None,
    render_cache: RenderCache | None = None,
    capabilities: Mapping[str, Capabilities] | None = None,
) -> Validation:
    """Read and validate the config repo at ``path``. Raises :class:`SourceError` when the repo
    cannot be read at all (missing folder); every problem *in* it is a diagnostic instead.
    ``renderer`` (injected by the caller: ``reconciler.render.default_renderer()``) renders
    the templated modules the runtimes get, through ``render_cache``, for each runtime's
    cluster's ``capabilities`` (core.templates)."""
    options = options or ReadOptions()
    budget = options.time_budget()
    raw = read_repo(path, options, tree=tree, cache=cache, budget=budget)
    return validate_repo(
        raw,
        checker or SchemaChecker(load_schemas()),
        budget=budget,
        renderer=renderer,
        render_cache=render_cache,
        capabilities=capabilities,
    )


def read_repo(
    path: str | os.PathLike[str],
    options: ReadOptions,
    *,
    tree: SourceTree | None = None,
    cache: ParseCache | None = None,
    budget: TimeBudget | None = None,
) -> RawRepo:
    """Every file of the repo at ``path``, read and parsed, with the problems met.

    ``tree`` reads from somewhere else than the folder ``path`` (a git revision; ``path`` is then
    only the prefix of displayed paths); ``cache`` keeps parsed files by content id across reads.
    ``budget`` (by default a new one from ``options``) limits the time per file and per commit:
    past the commit's, the only problem returned says so, at the file reached.
    """
    if tree is None:
        root = Path(path)
        if not root.is_dir():
            raise SourceError(f"{root}: not a directory (expected a config repo)")
        tree = FolderTree(root)
    check_layout(tree, str(path))  # also a git revision's tree
    budget = budget or options.time_budget()
    try:
        return _read_repo(_Reader(tree, str(path), options, cache, budget=budget))
    except OverBudgetError as over:
        return RawRepo(
            problems=(budget_diagnostic(over, str(path), 1, 1),), channels_unavailable=True
        )


def _read_repo(reader: _Reader) -> RawRepo:
    settings = reader.file(SETTINGS_FILE, "") if reader.tree.is_file(SETTINGS_FILE) else None
    channels_tree, channels_root, channels_display = reader.channels_location(settings)
    channels: tuple[RawFile, ...] = ()
    if channels_root is not None:
        channels = _Reader(
            channels_tree,
            channels_display,
            reader.options,
            reader.cache,
            reader.problems,
            reader.budget,
        ).yaml_files("", "channel", "")
    runtimes = reader.runtimes()
    return RawRepo(
        settings=settings,
        runtimes=runtimes,
        modules=reader.modules(),
        channels=channels,
        problems=tuple(reader.problems),
        channels_unavailable=channels_root is None,
        plugin_steps=load_plugin_step_names() if _disables_steps(settings) else {},
        values_files=reader.values_files(runtimes),
    )


def check_layout(tree: SourceTree, shown: str) -> None:
    """Refuse a folder that is not a config repo: every config repo has a ``runtimes/`` folder,
    so the wrong folder, an empty one or a commit without it never reads as "a fleet with no
    runtimes" (which would deprovision every runtime the state store knows)."""
    if tree.is_dir("runtimes") or tree.escapes("runtimes", ""):  # the link is reported
        return
    found = ((SETTINGS_FILE, tree.is_file(SETTINGS_FILE)), ("modules/", tree.is_dir("modules")))
    present = [name for name, there in found if there]
    has = f" (it has {' and '.join(present)})" if present else ""
    below = [f"{shown.rstrip('/')}/{name}" for name in _config_repos_below(tree)]
    hint = f"; {' and '.join(below[:2])} {'is one' if len(below) == 1 else 'are'}" if below else ""
    raise SourceError(
        f"{shown}: not a config repo: no runtimes/ folder{has}{hint}; name the folder that holds "
        "runtimes/, modules/ and reconciler.yaml (e.g. reconciler validate "
        f"{below[0] if below else 'path/to/repo'})"
    )


def _config_repos_below(tree: SourceTree) -> list[str]:
    """The folders right below the root that hold a ``runtimes/`` folder (a config repo kept
    in a folder of a larger repository)."""
    return [
        entry.name
        for entry in tree.entries("")
        if entry.is_dir and not entry.is_link and tree.is_dir(f"{entry.name}/runtimes")
    ]


#: Parsed files by (content id, displayed path).
ParseCache = dict[tuple[str, str], RawFile]


class _Reader:
    """One read of one repo (or channels folder) from a tree; collects problems."""

    def __init__(
        self,
        tree: SourceTree,
        display_root: str,
        options: ReadOptions,
        cache: ParseCache | None,
        problems: list[Diagnostic] | None = None,
        budget: TimeBudget | None = None,
    ) -> None:
        self.tree = tree
        self.display_root = display_root
        self.options = options
        self.cache = cache
        self.problems: list[Diagnostic] = problems if problems is not None else []
        self.budget = budget or options.time_budget()
        #: The displayed root, normalised ("" for "."; ``None`` for "/", joined the long way).
        root = os.path.normpath(display_root)
        self._shown_root = None if root.endswith("/") else ("" if root == "." else root)

    def show(self, path: str) -> str:
        """``path`` as the user reaches it from the current directory."""
        if _is_normal(path) and self._shown_root is not None:  # most paths: joined, not parsed
            return f"{self._shown_root}/{path}" if self._shown_root else path
        return os.path.normpath(os.path.join(self.display_root, path))

    # -- layout ------------------------------------------------------------------------------

    def runtimes(self) -> tuple[RawFile, ...]:
        return self.yaml_files("runtimes", "runtime", "", strict=True)

    def yaml_files(
        self, folder: str, what: str, boundary: str, *, strict: bool = False
    ) -> tuple[RawFile, ...]:
        """The ``*.yaml`` files of ``folder``, by name; ``*.yml`` and ``*.YAML`` files are
        reported. ``strict`` (``runtimes/``, where a file not read is a runtime deprovisioned)
        reports every other entry too, hidden ones aside."""
        files: list[RawFile] = []
        if self.refused_folder(folder, boundary):
            return ()
        for entry in self.tree.entries(folder):
            path = _join(folder, entry.name)
            if self.refused_entry(entry, path, boundary):
                continue
            if entry.name.endswith(".yaml") and not entry.is_dir:
                files.append(self.file(path, boundary))
            elif entry.name.endswith(".yml"):
                message = f"{what} files are named <name>.yaml, not .yml"
                self.problems.append(Diagnostic(self.show(path), 1, 1, "C4", message))
            elif entry.name.lower().endswith((".yaml", ".yml")) and not entry.is_dir:
                message = f"{what} files are named <name>.yaml, in lower case"
                self.problems.append(Diagnostic(self.show(path), 1, 1, "C4", message))
            elif strict and not entry.name.startswith("."):
                message = (
                    f"{folder}/ holds only <name>.yaml files, one {what} each: "
                    f"this {'folder' if entry.is_dir else 'file'} would be ignored"
                )
                self.problems.append(Diagnostic(self.show(path), 1, 1, "C4", message))
        return tuple(files)

    def modules(self) -> tuple[RawModule, ...]:
        return tuple(self.module(f) for f in self.folders("modules"))

    def folders(self, folder: str) -> list[str]:
        """Sub-folders of ``folder`` (not hidden, not links leading out of the repo)."""
        if self.refused_folder(folder, ""):
            return []
        found = []
        for entry in self.tree.entries(folder):
            path = _join(folder, entry.name)
            if entry.name.startswith(".") or self.refused_entry(entry, path, ""):
                continue
            if entry.is_dir:
                found.append(path)
        return found

    def refused_folder(self, folder: str, boundary: str) -> bool:
        """C6: a folder of the layout (``runtimes``, ``modules``) that is a link out of the
        repo is reported once and not read."""
        if not folder or not self.tree.escapes(folder, boundary):
            return False
        message = "symbolic link pointing outside the repo"
        self.problems.append(Diagnostic(self.show(folder), 1, 1, "C6", message))
        return True

    def refused_entry(self, entry: Entry, path: str, boundary: str) -> bool:
        """C6 entries that are reported, not read: a git submodule (its files are in another
        repository), a link leading out of the repo (to a folder, a file or nothing: the same
        verdict in a checkout, where a link to a folder is a folder, and in a commit, where
        it is a link)."""
        if entry.is_submodule:
            message = "git submodule: its files are not in this commit (keep them in the repo)"
        elif entry.is_link and self.tree.escapes(path, boundary):
            message = "symbolic link pointing outside the repo"
        else:
            return False
        self.problems.append(Diagnostic(self.show(path), 1, 1, "C6", message))
        return True

    def module(self, folder: str) -> RawModule:
        module_file = _join(folder, "module.yaml")
        versions = tuple(self.version(v) for v in self.folders(folder))
        module = self.file(module_file, "") if self.tree.is_file(module_file) else None
        return RawModule(folder.rsplit("/", 1)[-1], self.show(folder), module, versions)

    def version(self, folder: str) -> RawVersion:
        markers = tuple(m for m in KIND_MARKERS if self.tree.is_file(_join(folder, m)))
        return RawVersion(
            folder.rsplit("/", 1)[-1],
            self.show(folder),
            self.optional_file(_join(folder, "manifest.yaml")),
            self.optional_file(_join(folder, "default.yaml")),
            markers,
            self.template(folder, markers),
            self.optional_file(_join(folder, "values.yaml")),
            self.optional_file(_join(folder, "source.yaml")),
        )

    def optional_file(self, path: str) -> RawFile | None:
        """The file at ``path``, read and parsed, or ``None`` when there is none."""
        return self.file(path, "") if self.tree.is_file(path) else None

    def template(self, folder: str, markers: tuple[str, ...]) -> RawTemplate | None:
        """The files of a chart (``chart/``) or an overlay (the version folder itself)."""
        if markers == (CHART_MARKER,):
            root = _join(folder, "chart")
        elif markers == (KUSTOMIZE_MARKER,):
            root = folder
        else:
            return None
        files = dict(self.template_files(root, "", folder))
        digest = hashlib.sha256()
        for name, data in sorted(files.items()):
            digest.update(f"{name}\0{len(data)}\0".encode())
            digest.update(data)
        return RawTemplate(self.show(root), files, "sha256:" + digest.hexdigest())

    def template_files(self, root: str, sub: str, boundary: str) -> Iterator[tuple[str, bytes]]:
        """Every file under ``root`` (hidden ones aside) by path relative to it; links out of
        the version folder, submodules and files over the size limit are reported (C6)."""
        for entry in self.tree.entries(_join(root, sub)):
            relative = _join(sub, entry.name)
            path = _join(root, relative)
            if entry.name.startswith(".") or self.refused_entry(entry, path, boundary):
                continue
            if entry.is_dir:
                yield from self.template_files(root, relative, boundary)
                continue
            shown = self.show(path)
            problem = self.check_limits(path, boundary, shown)  # before reading: size, links
            text, problem = (None, problem) if problem else self.read_text(path, boundary, shown)
            if problem is not None:
                self.problems.append(problem)
            elif text is not None:
                yield relative, text.encode()

    def values_files(self, runtimes: tuple[RawFile, ...]) -> dict[str, RawFile]:
        """The files named by the runtimes' ``valuesFrom`` (read leniently: validation checks
        the documents), each read once; paths leaving the repo are not read (C6, reported by
        validation)."""
        found: dict[str, RawFile] = {}
        for path in (p for f in runtimes for p in _values_from(f)):
            normal = os.path.normpath(path)
            if path in found or os.path.isabs(path) or normal.startswith(".."):
                continue
            if self.tree.is_file(normal) and not self.tree.escapes(normal, ""):
                found[path] = self.file(normal, "")
        return found

    def channels_location(self, settings: RawFile | None) -> tuple[SourceTree, str | None, str]:
        """Where channels are read from: ``--channels``, ``channelsFrom.path`` or ``channels/``.

        Returns the tree to read them from, the folder in that tree (``None`` when missing) and
        how to display it."""
        configured = _channels_from(settings)
        outside = self._channels_outside(settings, configured)
        if self.options.channels_dir is not None:
            override = self.options.channels_dir
            return FolderTree(override), "", os.path.normpath(str(override))
        if self.options.channels_tree is not None:
            return self.options.channels_tree, "", self.options.channels_label
        if configured is None and self.refused_folder("channels", ""):
            return self.tree, None, ""
        if configured is None:
            return SubTree(self.tree, "channels"), "", self.show("channels")
        if outside or (configured.git is not None and _refused(configured)):
            return self.tree, None, ""  # reported with its place (here, or by validation)
        if configured.git is not None:
            raise SourceError(
                f"{settings.path if settings else SETTINGS_FILE}: channels come from git "
                f"({mask(configured.git)}); pass --channels DIR with a checkout of them"
            )
        assert configured.path is not None
        folder = os.path.normpath(configured.path)
        if not self.tree.is_dir(folder):
            assert settings is not None
            document = settings.documents[0]
            message = f"channels folder '{configured.path}' does not exist"
            pointer = ("spec", "channelsFrom", "path")
            self.problems.append(document.diagnostic("C2", message, pointer))
            return self.tree, None, ""
        return SubTree(self.tree, folder), "", self.show(folder)

    def _channels_outside(self, settings: RawFile | None, configured: ChannelsFrom | None) -> bool:
        """C6: ``channelsFrom.path`` may not leave the repository (an absolute path, or ``..``
        beyond its top), whether or not ``--channels`` replaces it here."""
        if settings is None or configured is None or configured.path is None:
            return False
        folder = configured.path
        if not os.path.isabs(folder) and self.tree.inside(os.path.normpath(folder)):
            return False
        message = (
            "channels folder leads outside the repository (an absolute path or one climbing "
            "out of the git repository holding the config repo is refused)"
        )
        pointer = ("spec", "channelsFrom", "path")
        self.problems.append(settings.documents[0].diagnostic("C6", message, pointer))
        return True

    # -- files -------------------------------------------------------------------------------

    def file(self, path: str, boundary: str) -> RawFile:
        """Read and parse one YAML file; a problem makes it ``broken`` and is recorded. A file
        parsed already (the same content at the same place: the other side's) is taken as it
        is, outside the file's time budget (it costs nothing more)."""
        shown = self.show(path)
        problem = self.check_limits(path, boundary, shown)
        if problem is not None:  # before anything reads the file (identity hashes it)
            self.problems.append(problem)
            return RawFile(shown, broken=True)
        key = None
        if self.cache is not None:
            identity = self.tree.identity(path)
            key = (identity, shown) if identity is not None else None
            cached = self.cache.get(key) if key is not None else None
            if cached is not None and not cached.broken:  # a broken one is reported again
                return cached
        try:
            with self.budget.file(shown):
                parsed = self._parse(path, boundary, shown)
        except OverBudgetError as over:  # the parser gives the place; else the file's start
            diagnostic = budget_diagnostic(over, shown, 1, 1)
            if over.scope != "file":
                raise
            self.problems.append(diagnostic)
            return RawFile(shown, broken=True)
        if key is not None and self.cache is not None:
            self.cache[key] = parsed
        return parsed

    def _parse(self, path: str, boundary: str, shown: str) -> RawFile:
        text, problem = self.read_text(path, boundary, shown)
        if problem is not None:
            self.problems.append(problem)
            return RawFile(shown, broken=True)
        assert text is not None
        loader = self.options.yaml_loader
        documents, problems = (
            parse_yaml(text, shown, budget=self.budget)
            if loader is None
            else parse_yaml(text, shown, loader_class=loader, budget=self.budget)
        )
        if problems:
            self.problems.extend(problems)
            return RawFile(shown, broken=True)
        return RawFile(shown, tuple(documents))

    def check_limits(self, path: str, boundary: str, shown: str) -> Diagnostic | None:
        """C6 checks that need no reading: links out of the repo, size."""
        if self.tree.escapes(path, boundary):
            return Diagnostic(shown, 1, 1, "C6", "symbolic link pointing outside the repo")
        try:
            size = self.tree.size(path)
        except (UnreadableError, OSError) as error:
            return Diagnostic(shown, 1, 1, "C6", f"cannot read: {error}")
        if size > self.options.max_file_size:
            return Diagnostic(shown, 1, 1, "C6", _too_big(size, self.options))
        return None

    def read_text(
        self, path: str, boundary: str, shown: str
    ) -> tuple[str | None, Diagnostic | None]:
        try:
            data = self.tree.read(path)
        except (UnreadableError, OSError) as error:
            return None, Diagnostic(shown, 1, 1, "C6", f"cannot read: {error}")
        if len(data) > self.options.max_file_size:  # it grew since it was measured
            return None, Diagnostic(shown, 1, 1, "C6", _too_big(len(data), self.options))
        return _decode(data, shown)


def _values_from(runtime: RawFile) -> Iterator[str]:
    """The ``valuesFrom`` paths of a runtime file not validated yet."""
    for document in runtime.documents:
        spec = document.data.get("spec") if isinstance(document.data, dict) else None
        entries = spec.get("modules") if isinstance(spec, dict) else None
        for entry in entries if isinstance(entries, list) else ():
            path = entry.get("valuesFrom") if isinstance(entry, dict) else None
            if isinstance(path, str) and path:
                yield path


def _is_normal(path: str) -> bool:
    """Whether ``path`` is relative and already normal (no ``.`` or ``..`` segment, no empty
    one): joined to a normal folder it needs no ``normpath``."""
    return (
        bool(path)
        and path[0] not in "./"
        and "/." not in path
        and "//" not in path
        and path[-1] != "/"
    )


def _join(folder: str, name: str) -> str:
    return f"{folder}/{name}" if folder else name


@dataclass(frozen=True, slots=True)
class ChannelsRepository:
    """``channelsFrom.git``: channels kept in a repository of their own."""

    url: str
    ref: str
    sub_path: str


def channels_repository(
    path: str | os.PathLike[str], tree: SourceTree | None = None
) -> ChannelsRepository | None:
    """The channels repository the repo's ``reconciler.yaml`` names, if any and if git may
    fetch it (read leniently: validation reports a broken settings file or a refused remote,
    with its place, and nothing runs git on it)."""
    source = tree if tree is not None else FolderTree(Path(path))
    if not source.is_file(SETTINGS_FILE):
        return None
    reader = _Reader(source, str(path), ReadOptions(), None)
    found = _channels_from(reader.file(SETTINGS_FILE, ""))
    if found is None or found.git is None or _refused(found):
        return None  # a refused remote is never fetched: validation reports it
    return ChannelsRepository(found.git, found.ref, found.sub_path)


def _refused(channels_from: ChannelsFrom) -> bool:
    """Whether git may not fetch ``channelsFrom.git`` (a commit names it)."""
    assert channels_from.git is not None
    return (
        remote_problem(channels_from.git) is not None or ref_problem(channels_from.ref) is not None
    )


def _disables_steps(settings: RawFile | None) -> bool:
    """Whether a settings file not validated yet names steps (``spec.operations.disabledSteps``
    to switch off, ``retryWithoutFail`` to limit): only then are the installed plugins' steps
    looked up (reading package metadata costs ~10 ms)."""
    for document in settings.documents if settings is not None else ():
        spec = document.data.get("spec") if isinstance(document.data, dict) else None
        operations = spec.get("operations") if isinstance(spec, dict) else None
        if isinstance(operations, dict) and {"disabledSteps", "retryWithoutFail"} & set(operations):
            return True
    return False


def _channels_from(settings: RawFile | None) -> ChannelsFrom | None:
    """``channelsFrom`` of a settings file not validated yet, read leniently into the same
    typed value as :attr:`Settings.channels_from <reconciler.core.model.Settings>`."""
    if settings is None or settings.broken or len(settings.documents) != 1:
        return None
    data = settings.documents[0].data
    spec = data.get("spec") if isinstance(data, dict) else None
    return ChannelsFrom.of(spec.get("channelsFrom") if isinstance(spec, dict) else None)


def _too_big(size: int, options: ReadOptions) -> str:
    limit = _size(options.max_file_size)
    return f"file is {_size(size)}, over the {limit} limit (--max-file-size)"


def _size(count: int) -> str:
    for unit, scale in (("MiB", 1 << 20), ("KiB", 1 << 10)):
        if count >= scale:
            return f"{count / scale:.1f} {unit}"
    return f"{count} bytes"


def _decode(data: bytes, shown: str) -> tuple[str | None, Diagnostic | None]:
    try:
        return data.decode("utf-8").removeprefix("\ufeff"), None
    except UnicodeDecodeError as error:
        before = data[: error.start]
        line = before.count(b"\n") + 1
        line_start = before.rfind(b"\n") + 1
        column = len(data[line_start : error.start].decode("utf-8", "replace")) + 1
        byte = data[error.start]
        message = f"not UTF-8: byte 0x{byte:02x} cannot be decoded (files must be UTF-8)"
        return None, Diagnostic(shown, line, column, "C6", message)
