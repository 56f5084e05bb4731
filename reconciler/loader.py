"""Reads a config repo from disk (the I/O edge of validation).

Walks the layout of DESIGN.md §2 (``reconciler.yaml``, ``runtimes/``, ``modules/<name>/<version>/``
and the channels folder), reads each file safely (rule C6: size limit, strict UTF-8, no symlink
leaving the repo), parses it with :mod:`reconciler.yamlsafe` and hands the result to the pure
:func:`reconciler.validate.validate_repo`. Paths in diagnostics are shown as the user reaches them
from the current directory (``sample-repo/runtimes/prod-eu-1.yaml``). Callers: the CLI, tests and
the benchmark; later the git source, on each commit's snapshot.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from reconciler.diagnostics import Diagnostic
from reconciler.errors import SourceError
from reconciler.schema import SchemaChecker
from reconciler.schemafiles import load_schemas
from reconciler.validate import RawFile, RawModule, RawRepo, RawVersion, Validation, validate_repo
from reconciler.yamlsafe import parse_yaml

#: Files larger than this are refused (C6); ``--max-file-size`` changes it.
DEFAULT_MAX_FILE_SIZE = 5 * 1024 * 1024

SETTINGS_FILE = "reconciler.yaml"


@dataclass(frozen=True, slots=True)
class ReadOptions:
    """How files are read. ``yaml_loader`` None means the libyaml parser."""

    max_file_size: int = DEFAULT_MAX_FILE_SIZE
    channels_dir: Path | None = None
    yaml_loader: type[Any] | None = None


def load_repo(
    path: str | os.PathLike[str],
    options: ReadOptions | None = None,
    checker: SchemaChecker | None = None,
) -> Validation:
    """Read and validate the config repo at ``path``. Raises :class:`SourceError` when the repo
    cannot be read at all (missing folder); every problem *in* it is a diagnostic instead."""
    raw = read_repo(path, options or ReadOptions())
    return validate_repo(raw, checker or SchemaChecker(load_schemas()))


def read_repo(path: str | os.PathLike[str], options: ReadOptions) -> RawRepo:
    """Every file of the repo at ``path``, read and parsed, with the problems met."""
    root = Path(path)
    if not root.is_dir():
        raise SourceError(f"{root}: not a directory (expected a config repo)")
    reader = _Reader(root, str(path), options)
    settings = reader.file(root / SETTINGS_FILE, root) if (root / SETTINGS_FILE).exists() else None
    channels_root, channels_display = reader.channels_location(settings)
    return RawRepo(
        settings=settings,
        runtimes=reader.runtimes(),
        modules=reader.modules(),
        channels=reader.yaml_files(channels_root, channels_display, "channel", channels_root)
        if channels_root is not None
        else (),
        problems=tuple(reader.problems),
    )


class _Reader:
    """One read of one repo; collects problems."""

    def __init__(self, root: Path, display_root: str, options: ReadOptions) -> None:
        self.root = root
        self.display_root = display_root
        self.options = options
        self.problems: list[Diagnostic] = []

    def show(self, path: Path) -> str:
        """``path`` as the user reaches it from the current directory."""
        relative = os.path.relpath(path, self.root)
        return os.path.normpath(os.path.join(self.display_root, relative))

    # -- layout ------------------------------------------------------------------------------

    def runtimes(self) -> tuple[RawFile, ...]:
        folder = self.root / "runtimes"
        return self.yaml_files(folder, self.show(folder), "runtime", self.root)

    def yaml_files(
        self, folder: Path, display: str, what: str, boundary: Path
    ) -> tuple[RawFile, ...]:
        """The ``*.yaml`` files of ``folder``, by name; ``*.yml`` files are reported."""
        files: list[RawFile] = []
        for entry in _entries(folder):
            if entry.name.endswith(".yml"):
                message = f"{what} files are named <name>.yaml, not .yml"
                self.problems.append(Diagnostic(f"{display}/{entry.name}", 1, 1, "C4", message))
            elif entry.name.endswith(".yaml") and not entry.is_dir():
                shown = f"{display}/{entry.name}"
                files.append(self.file(Path(entry.path), boundary, shown))
        return tuple(files)

    def modules(self) -> tuple[RawModule, ...]:
        folder = self.root / "modules"
        return tuple(
            self.module(Path(e.path)) for e in _entries(folder) if self.is_folder(e, self.root)
        )

    def module(self, folder: Path) -> RawModule:
        module_file = folder / "module.yaml"
        versions = tuple(
            self.version(Path(e.path)) for e in _entries(folder) if self.is_folder(e, self.root)
        )
        module = self.file(module_file, self.root) if module_file.exists() else None
        return RawModule(folder.name, self.show(folder), module, versions)

    def version(self, folder: Path) -> RawVersion:
        manifest, default = folder / "manifest.yaml", folder / "default.yaml"
        return RawVersion(
            folder.name,
            self.show(folder),
            self.file(manifest, self.root) if manifest.exists() else None,
            self.file(default, self.root) if default.exists() else None,
        )

    def is_folder(self, entry: os.DirEntry[str], boundary: Path) -> bool:
        if entry.name.startswith(".") or not entry.is_dir():
            return False
        return not entry.is_symlink() or self.inside(Path(entry.path), boundary)

    def channels_location(self, settings: RawFile | None) -> tuple[Path | None, str]:
        """Where channels are read from: ``--channels``, ``channelsFrom.path`` or ``channels/``."""
        if self.options.channels_dir is not None:
            folder = self.options.channels_dir
            return folder, os.path.normpath(str(folder))
        configured = _channels_from(settings)
        if configured is None:
            folder = self.root / "channels"
            return folder, self.show(folder)
        if "git" in configured:
            raise SourceError(
                f"{settings.path if settings else SETTINGS_FILE}: channels come from git "
                f"({configured['git']}); pass --channels DIR with a checkout of them"
            )
        folder = self.root / str(configured["path"])
        if not folder.is_dir():
            assert settings is not None
            document = settings.documents[0]
            message = f"channels folder '{configured['path']}' does not exist"
            pointer = ("spec", "channelsFrom", "path")
            self.problems.append(document.diagnostic("C2", message, pointer))
            return None, ""
        return folder, self.show(folder)

    # -- files -------------------------------------------------------------------------------

    def file(self, path: Path, boundary: Path, display: str | None = None) -> RawFile:
        """Read and parse one YAML file; a problem makes it ``broken`` and is recorded."""
        shown = display or self.show(path)
        text, problem = self.read_text(path, boundary, shown)
        if problem is not None:
            self.problems.append(problem)
            return RawFile(shown, broken=True)
        assert text is not None
        loader = self.options.yaml_loader
        documents, problems = (
            parse_yaml(text, shown)
            if loader is None
            else parse_yaml(text, shown, loader_class=loader)
        )
        if problems:
            self.problems.extend(problems)
            return RawFile(shown, broken=True)
        return RawFile(shown, tuple(documents))

    def read_text(
        self, path: Path, boundary: Path, shown: str
    ) -> tuple[str | None, Diagnostic | None]:
        if path.is_symlink() and not self.inside(path, boundary):
            return None, Diagnostic(shown, 1, 1, "C6", "symbolic link pointing outside the repo")
        try:
            with path.open("rb") as handle:
                size = os.fstat(handle.fileno()).st_size
                if size > self.options.max_file_size:
                    return None, Diagnostic(shown, 1, 1, "C6", _too_big(size, self.options))
                data = handle.read()
        except OSError as error:
            return None, Diagnostic(shown, 1, 1, "C6", f"cannot read: {error.strerror}")
        return _decode(data, shown)

    def inside(self, path: Path, boundary: Path) -> bool:
        return path.resolve().is_relative_to(boundary.resolve())


def _entries(folder: Path) -> list[os.DirEntry[str]]:
    try:
        with os.scandir(folder) as entries:
            return sorted(entries, key=lambda e: e.name)
    except FileNotFoundError:
        return []
    except NotADirectoryError:
        return []


def _channels_from(settings: RawFile | None) -> dict[str, Any] | None:
    if settings is None or settings.broken or len(settings.documents) != 1:
        return None
    data = settings.documents[0].data
    spec = data.get("spec") if isinstance(data, dict) else None
    found = spec.get("channelsFrom") if isinstance(spec, dict) else None
    if not isinstance(found, dict):
        return None
    if isinstance(found.get("git"), str):
        return found
    return found if isinstance(found.get("path"), str) else None


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
        column = error.start - (before.rfind(b"\n") + 1) + 1
        byte = data[error.start]
        message = f"not UTF-8: byte 0x{byte:02x} cannot be decoded (files must be UTF-8)"
        return None, Diagnostic(shown, line, column, "C6", message)
