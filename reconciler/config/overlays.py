"""What a Kustomize overlay may name: only files of its own version folder (rule C6) (pure).

kustomize reads every file a kustomization names through one loader, which also fetches
``http(s)://`` URLs and clones git repositories, and which follows a relative path wherever it
leads. So every field of every kustomization of a version folder that names a file or a folder
(kustomize's ``api/types/kustomization.go``: ``resources``, ``components``, ``bases``, ``crds``,
``configurations``, ``patches[].path``, ``patchesJson6902[].path``, ``patchesStrategicMerge``,
``replacements[].path``, ``configMapGenerator``/``secretGenerator`` ``files``, ``envs`` and
``env``, ``openapi.path``, ``generators``/``transformers``/``validators`` and the file fields of
the built-in plugin configurations they hold or name, ``helmGlobals``/``helmCharts`` files) must
be a relative path that stays inside the version folder: never a URL, a remote repository
(``github.com/org/repo``, ``git@...``), an absolute path or a path climbing out with ``../``.

:func:`overlay_problems` finds them all, each a C6 diagnostic at the value (file, line, column,
pointer). Callers: the validator (before anything is rendered) and, once more before each build,
:mod:`reconciler.render.kustomize` (an overlay handed to the renderer without validation is
refused the same way).
"""

from __future__ import annotations

import posixpath
from collections.abc import Iterator, Mapping
from typing import Any

from reconciler.config.yamlsafe import Document, parse_yaml
from reconciler.core.diagnostics import Diagnostic, Pointer
from reconciler.core.redaction import mask

#: The names kustomize reads a kustomization from, in the order it looks for them.
KUSTOMIZATION_NAMES = ("kustomization.yaml", "kustomization.yml", "Kustomization")
RULE = "C6"

#: Fields holding a list of resources: files, kustomization folders (or, refused, remote ones).
_RESOURCE_LISTS = ("resources", "components", "bases")
#: Fields holding a list of file paths.
_FILE_LISTS = ("crds", "configurations")
#: Fields holding a list of mappings, each naming a file in ``path``.
_PATH_ENTRIES = ("patches", "patchesJson6902", "replacements")
#: Fields holding a list of plugin configurations: a file or folder, or the configuration inline.
_PLUGIN_LISTS = ("generators", "transformers", "validators")
#: File fields of a generator's arguments and of a built-in plugin's configuration.
_SINGLE_FILES = ("path", "env", "valuesFile", "chartHome", "configHome")
_MANY_FILES = ("paths", "files", "envs", "additionalValuesFiles")

#: Endings of a file name (``missing.yaml/``), not of a host name (``github.com/``).
_FILE_ENDINGS = (".yaml", ".yml", ".json")
#: (where the value is, the value, whether it may name a resource: a folder or a host)
_Named = tuple[Pointer, str, bool]


def overlay_problems(files: Mapping[str, bytes], root: str) -> list[Diagnostic]:
    """One C6 diagnostic per value of a kustomization in ``files`` (an overlay's version folder,
    shown as ``root``) that names something outside the folder."""
    found: list[Diagnostic] = []
    for path in sorted(files):
        if posixpath.basename(path) not in KUSTOMIZATION_NAMES:
            continue
        document = _first_document(files[path], f"{root}/{path}")
        if document is None:
            continue  # kustomize reports a broken file itself, at the build
        folder = posixpath.dirname(path)
        for pointer, value, resource in _named(document.data):
            problem = _problem(value, folder, files, resource=resource)
            if problem is not None:
                found.append(document.diagnostic(RULE, _message(pointer, problem), pointer))
        found.extend(_named_plugin_files(document, folder, files, root))
    return found


def _first_document(data: bytes, shown: str) -> Document | None:
    documents, problems = parse_yaml(data.decode(errors="replace"), shown)
    if problems or not documents or not isinstance(documents[0].data, Mapping):
        return None
    return documents[0]


def _named(body: Mapping[str, Any]) -> Iterator[_Named]:
    """Every value of a kustomization that names a file or a folder, with its place."""
    for field in _RESOURCE_LISTS:
        yield from _strings(body.get(field), (field,), resource=True)
    for field in _FILE_LISTS:
        yield from _strings(body.get(field), (field,))
    for field in _PATH_ENTRIES:
        for index, entry in _items(body.get(field)):
            yield from _file_fields(entry, (field, index))
    for index, entry in _items(body.get("patchesStrategicMerge")):
        if isinstance(entry, str) and "\n" not in entry:  # else the patch itself, inline
            yield (("patchesStrategicMerge", index), entry, False)
    for field in ("configMapGenerator", "secretGenerator", "helmCharts"):
        for index, entry in _items(body.get(field)):
            yield from _file_fields(entry, (field, index))
    yield from _file_fields(body.get("openapi"), ("openapi",))
    yield from _file_fields(body.get("helmGlobals"), ("helmGlobals",))
    for field in _PLUGIN_LISTS:
        for index, entry in _items(body.get(field)):
            if isinstance(entry, str) and "\n" not in entry:
                yield ((field, index), entry, True)
            elif isinstance(entry, str):
                yield from _inline_plugin_files(entry, (field, index))


def _items(value: Any) -> Iterator[tuple[int, Any]]:
    return enumerate(value) if isinstance(value, list) else iter(())


def _strings(value: Any, at: Pointer, *, resource: bool = False) -> Iterator[_Named]:
    for index, entry in _items(value):
        if isinstance(entry, str):
            yield ((*at, index), entry, resource)


def _file_fields(entry: Any, at: Pointer) -> Iterator[_Named]:
    """The file fields of a mapping: a patch's ``path``, a generator's ``files`` (``key=path``
    or ``path``), ``envs`` and ``env``, a built-in plugin configuration's ``paths``."""
    if not isinstance(entry, Mapping):
        return
    for field in _SINGLE_FILES:
        value = entry.get(field)
        if isinstance(value, str):
            yield ((*at, field), value, False)
    for field in _MANY_FILES:
        for pointer, value, _ in _strings(entry.get(field), (*at, field)):
            key, equals, path = value.partition("=")
            named = path if equals and "://" not in key else value  # "key=path" reads the path
            yield (pointer, named, False)
    for index, replacement in _items(entry.get("replacements")):
        yield from _file_fields(replacement, (*at, "replacements", index))


def _inline_plugin_files(text: str, at: Pointer) -> Iterator[_Named]:
    """The file fields of plugin configurations written inline (located at the entry)."""
    documents, problems = parse_yaml(text, "inline")
    for document in documents if not problems else []:
        for _, value, _ in _file_fields(document.data, ()):
            yield (at, value, False)


def _named_plugin_files(
    document: Document, folder: str, files: Mapping[str, bytes], root: str
) -> Iterator[Diagnostic]:
    """The file fields of plugin configurations in the files a kustomization's ``generators``,
    ``transformers`` and ``validators`` name (located in those files)."""
    for field in _PLUGIN_LISTS:
        for _, entry in _items(document.data.get(field)):
            if not isinstance(entry, str) or "\n" in entry:
                continue
            path = posixpath.normpath(posixpath.join(folder, entry))
            if path not in files:
                continue  # a folder (its kustomization is checked as every one is) or nothing
            configurations, problems = parse_yaml(
                files[path].decode(errors="replace"), f"{root}/{path}"
            )
            for configuration in configurations if not problems else []:
                for pointer, value, _ in _file_fields(configuration.data, ()):
                    problem = _problem(value, posixpath.dirname(path), files, resource=False)
                    if problem is not None:
                        yield configuration.diagnostic(RULE, _message(pointer, problem), pointer)


def _problem(value: str, folder: str, files: Mapping[str, bytes], *, resource: bool) -> str | None:
    """Why kustomize would read ``value`` from outside the version folder (``None``: it would
    not). ``resource``: the value may name a folder, and kustomize reads ``host/org/repo`` as
    a remote repository when no such folder exists."""
    shown = f"'{mask(value)}'"
    if "://" in value or value.startswith("git@"):
        return f"{shown} is a remote resource: builds are offline (keep it in the version folder)"
    if posixpath.isabs(value):
        return f"{shown} is an absolute path: a build reads only the version folder"
    local = posixpath.normpath(posixpath.join(folder, value))
    if local == ".." or local.startswith("../"):
        return f"{shown} climbs out of the version folder: a build reads only that folder"
    if not resource or local in files or any(name.startswith(local + "/") for name in files):
        return None
    first, slash, _ = value.partition("/")
    if slash and "." in first.strip(".") and not first.endswith(_FILE_ENDINGS):  # github.com/o/r
        return f"{shown} is a remote resource: builds are offline (keep it in the version folder)"
    return f"{shown} is neither a file nor a folder of the version folder"


def _message(pointer: Pointer, problem: str) -> str:
    field = ".".join(str(p) if isinstance(p, str) else f"[{p}]" for p in pointer)
    return f"{field.replace('.[', '[')} {problem}"
