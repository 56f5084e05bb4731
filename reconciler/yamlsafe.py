"""Safe YAML reading (rule C6) that remembers where every value came from.

Parses text (never files: the loader does the reading) into JSON-compatible documents with the
libyaml C parser where present. Refuses duplicate keys, unsupported tags, non-scalar keys,
unbounded alias expansion ("billion laughs") and excessive nesting, each as a
:class:`~reconciler.diagnostics.Diagnostic` with line and column. Each :class:`Document` keeps the
text it came from; when a later check needs the line and column of a JSON pointer, the text is
composed again (only then, and once per file), so a valid repo never holds node trees in memory.

Used by the loader (every YAML file of a config repo) and by tests.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import yaml

from reconciler.diagnostics import Diagnostic, Pointer, format_pointer

_SafeLoader: type[Any] = getattr(yaml, "CSafeLoader", yaml.SafeLoader)

#: Implicit tags of plain scalars already resolved: the same keys and values ("name", "spec",
#: "true", "1.0.0") repeat across thousands of files, and PyYAML resolves each with regexes.
_PLAIN_TAGS: dict[str, str] = {}
_PLAIN_TAGS_MAX = 200_000


class _BaseLoader(_SafeLoader):  # type: ignore[misc]
    """The safe loader with a memo of plain-scalar tags (same result, less work)."""

    def resolve(self, kind: Any, value: Any, implicit: Any) -> Any:
        if kind is not yaml.ScalarNode or not implicit[0]:
            return super().resolve(kind, value, implicit)
        tag = _PLAIN_TAGS.get(value)
        if tag is None:
            tag = super().resolve(kind, value, implicit)
            if len(_PLAIN_TAGS) >= _PLAIN_TAGS_MAX:
                _PLAIN_TAGS.clear()
            _PLAIN_TAGS[value] = tag
        return tag


#: Expanded nodes allowed per document: aliases may repeat content, but not without bound.
MAX_EXPANDED_NODES = 1_000_000
#: Nesting depth allowed per document (also stops recursive aliases).
MAX_DEPTH = 200

_TAG = "tag:yaml.org,2002:"
_STR, _INT, _FLOAT, _BOOL, _NULL = (_TAG + t for t in ("str", "int", "float", "bool", "null"))
_TIMESTAMP, _MAP, _SEQ, _MERGE = (_TAG + t for t in ("timestamp", "map", "seq", "merge"))
_SCALARS = yaml.constructor.SafeConstructor()
_KEY_TAGS = frozenset({_STR, _INT, _FLOAT, _BOOL, _NULL, _TIMESTAMP})


@dataclass(frozen=True, slots=True)
class Position:
    """A 1-based line and column in a file."""

    line: int
    column: int


class SourceText:
    """The text of one file, with its node trees composed on first demand."""

    __slots__ = ("_loader_class", "_nodes", "text")

    def __init__(self, text: str, loader_class: type[Any]) -> None:
        self.text = text
        self._loader_class = loader_class
        self._nodes: list[yaml.Node | None] | None = None

    def node(self, index: int) -> yaml.Node | None:
        """The node tree of document ``index`` (as counted by :func:`parse_yaml`)."""
        if self._nodes is None:
            composed: list[yaml.Node | None] = []
            loader = self._loader_class(self.text)
            try:
                for node in _nodes(loader):
                    composed.append(node)
            except yaml.YAMLError:  # a later document is broken; earlier ones were composed
                pass
            finally:
                loader.dispose()
            self._nodes = composed
        return self._nodes[index] if index < len(self._nodes) else None


@dataclass(frozen=True, slots=True)
class Document:
    """One YAML document of a file: its data, its place in the file and the file's text."""

    path: str
    index: int
    data: Any
    source: SourceText | None = field(default=None, compare=False, repr=False)

    def position(self, pointer: Pointer, *, key: bool = False) -> Position:
        """Where ``pointer`` is in the file: the deepest existing node on its way.

        With ``key=True`` and a pointer ending in a mapping key, the key's position instead of
        its value's (e.g. to point at an unknown field's name).
        """
        node = self.source.node(self.index) if self.source is not None else None
        return _position(node, pointer, key=key)

    def diagnostic(
        self, rule: str, message: str, pointer: Pointer, *, key: bool = False
    ) -> Diagnostic:
        """A diagnostic for ``pointer`` in this document, with its line and column."""
        pos = self.position(pointer, key=key)
        return Diagnostic(self.path, pos.line, pos.column, rule, message, format_pointer(pointer))


class YamlProblemError(Exception):
    """Raised inside construction; becomes a C6 diagnostic."""

    def __init__(self, message: str, node: yaml.Node) -> None:
        super().__init__(message)
        self.message = message
        self.node = node


@dataclass(slots=True)
class _Budget:
    nodes: int = 0


def parse_yaml(
    text: str, path: str, *, loader_class: type[Any] = _BaseLoader
) -> tuple[list[Document], list[Diagnostic]]:
    """Parse a (multi-document) YAML text safely. Empty documents are skipped.

    Returns the documents and, if the text is not acceptable, the diagnostics (in that case the
    documents read before the problem are returned too, but callers should not act on them).
    ``loader_class`` chooses the parser: the libyaml one by default, ``yaml.SafeLoader`` for the
    pure-Python baseline of the benchmark.
    """
    source = SourceText(text, loader_class)
    documents: list[Document] = []
    too_deep = _too_deep(text, path)
    if too_deep is not None:
        return documents, [too_deep]
    try:
        loader = loader_class(text)
    except yaml.reader.ReaderError as err:  # the pure-Python reader checks characters at once
        return documents, [_reader_problem(path, text, err)]
    try:
        for index, node in enumerate(_nodes(loader)):
            if node is None or _is_empty(node):
                continue
            data = _construct(node, _Budget(), 0)
            documents.append(Document(path, index, data, source))
    except YamlProblemError as problem:
        mark = problem.node.start_mark
        return documents, [_at(path, mark, problem.message)]
    except yaml.reader.ReaderError as err:
        return documents, [_reader_problem(path, text, err)]
    except yaml.MarkedYAMLError as err:
        mark = err.problem_mark or err.context_mark
        message = " ".join(p for p in (err.context, err.problem) if p) or "invalid YAML"
        return documents, [_at(path, mark, f"invalid YAML: {message}")]
    except yaml.YAMLError as err:
        first_line = str(err).splitlines()[0] if str(err) else "invalid YAML"
        return documents, [Diagnostic(path, 1, 1, "C6", f"invalid YAML: {first_line}")]
    except RecursionError:
        message = f"nesting deeper than {MAX_DEPTH} levels"
        return documents, [Diagnostic(path, 1, 1, "C6", message)]
    finally:
        loader.dispose()
    return documents, []


def _too_deep(text: str, path: str) -> Diagnostic | None:
    """Refuse flow nesting deeper than :data:`MAX_DEPTH` before composing: the composers build
    node trees recursively and a few kilobytes of ``[[[[`` would exhaust the C stack. Only
    texts with that many brackets at all are scanned (event by event, without recursion)."""
    if text.count("[") + text.count("{") <= MAX_DEPTH:
        return None
    depth = 0
    try:
        for event in yaml.parse(text, Loader=_SafeLoader):
            if isinstance(event, yaml.CollectionStartEvent):
                depth += 1  # the document's root collection is level 0, as in _construct
                if depth > MAX_DEPTH + 1:
                    mark = event.start_mark
                    message = f"nesting deeper than {MAX_DEPTH} levels"
                    return _at(path, mark, message)
            elif isinstance(event, yaml.CollectionEndEvent):
                depth -= 1
    except yaml.YAMLError:
        return None  # the real parse reports it
    return None


def _reader_problem(path: str, text: str, err: yaml.reader.ReaderError) -> Diagnostic:
    """A character YAML does not allow, at its line and column (the error has no mark)."""
    position = int(err.position)
    before = text[:position]
    line = before.count("\n") + 1
    column = position - (before.rfind("\n") + 1) + 1
    character = err.character
    code = ord(character) if isinstance(character, str) else int(character)
    return Diagnostic(path, line, column, "C6", f"character #x{code:04x} is not allowed in YAML")


def _nodes(loader: Any) -> Iterator[yaml.Node | None]:
    while loader.check_node():
        yield loader.get_node()


def _is_empty(node: yaml.Node) -> bool:
    """An empty document (``---`` with nothing after it) reads as a plain empty null scalar."""
    return isinstance(node, yaml.ScalarNode) and node.tag == _NULL and node.value == ""


def _at(path: str, mark: Any, message: str) -> Diagnostic:
    line, column = (mark.line + 1, mark.column + 1) if mark is not None else (1, 1)
    return Diagnostic(path, line, column, "C6", message)


def _construct(node: yaml.Node, budget: _Budget, depth: int) -> Any:
    budget.nodes += 1
    if budget.nodes > MAX_EXPANDED_NODES:
        raise YamlProblemError(
            f"document expands to more than {MAX_EXPANDED_NODES:,} nodes (alias bomb?)", node
        )
    if depth > MAX_DEPTH:
        raise YamlProblemError(f"nesting deeper than {MAX_DEPTH} levels (recursive alias?)", node)
    if isinstance(node, yaml.ScalarNode):
        return _scalar(node)
    if isinstance(node, yaml.SequenceNode):
        if node.tag != _SEQ:
            raise YamlProblemError(f"unsupported tag {node.tag}", node)
        return [_construct(child, budget, depth + 1) for child in node.value]
    if isinstance(node, yaml.MappingNode):
        if node.tag != _MAP:
            raise YamlProblemError(f"unsupported tag {node.tag}", node)
        return _mapping(node, budget, depth)
    raise YamlProblemError("unsupported YAML node", node)


def _scalar(node: yaml.ScalarNode) -> Any:
    tag = node.tag
    if tag == _STR:
        return node.value
    if tag == _NULL:
        return None
    if tag == _BOOL:
        return _SCALARS.construct_yaml_bool(node)
    if tag == _INT:
        return _SCALARS.construct_yaml_int(node)
    if tag == _FLOAT:
        return _SCALARS.construct_yaml_float(node)
    if tag == _TIMESTAMP:
        return node.value  # kept as written: JSON has no dates, Kubernetes wants strings
    raise YamlProblemError(f"unsupported tag {tag}", node)


def _mapping(node: yaml.MappingNode, budget: _Budget, depth: int) -> dict[str, Any]:
    result: dict[str, Any] = {}
    merged: dict[str, Any] = {}
    for key_node, value_node in node.value:
        if key_node.tag == _MERGE:
            _merge_into(merged, _construct(value_node, budget, depth + 1), value_node)
            continue
        if not isinstance(key_node, yaml.ScalarNode):
            raise YamlProblemError("mapping keys must be plain scalars", key_node)
        if key_node.tag not in _KEY_TAGS:
            raise YamlProblemError(f"unsupported tag {key_node.tag}", key_node)
        key = str(key_node.value)
        if key in result:
            first = _key_line(node, key)
            raise YamlProblemError(
                f"duplicate key '{key}' (first defined on line {first})", key_node
            )
        result[key] = _construct_entry(key_node, value_node, budget, depth)
    return {**merged, **result} if merged else result


def _construct_entry(
    key_node: yaml.Node, value_node: yaml.Node, budget: _Budget, depth: int
) -> Any:
    """A mapping value; an alias bomb in a top-level entry is reported at that entry's key,
    not deep inside the anchor it repeats."""
    if depth > 0:
        return _construct(value_node, budget, depth + 1)
    try:
        return _construct(value_node, budget, depth + 1)
    except YamlProblemError as problem:
        if problem.node is not value_node and budget.nodes > MAX_EXPANDED_NODES:
            raise YamlProblemError(problem.message, key_node) from problem
        raise


def _merge_into(merged: dict[str, Any], value: Any, node: yaml.Node) -> None:
    sources = value if isinstance(value, list) else [value]
    for source in reversed(sources):
        if not isinstance(source, dict):
            raise YamlProblemError("a merge key (<<) needs a mapping or a list of mappings", node)
        merged.update(source)


def _key_line(node: yaml.MappingNode, key: str) -> int:
    for key_node, _ in node.value:
        if isinstance(key_node, yaml.ScalarNode) and str(key_node.value) == key:
            return int(key_node.start_mark.line) + 1
    return int(node.start_mark.line) + 1


def _position(node: yaml.Node | None, pointer: Pointer, *, key: bool) -> Position:
    if node is None:
        return Position(1, 1)
    current: yaml.Node = node
    for i, segment in enumerate(pointer):
        child = _child(current, segment, want_key=key and i == len(pointer) - 1)
        if child is None:
            break
        current = child
    mark = current.start_mark
    return Position(mark.line + 1, mark.column + 1)


def _child(node: yaml.Node, segment: str | int, *, want_key: bool) -> yaml.Node | None:
    if isinstance(node, yaml.MappingNode):
        for key_node, value_node in node.value:
            if isinstance(key_node, yaml.ScalarNode) and str(key_node.value) == str(segment):
                return key_node if want_key else value_node
        return None
    if isinstance(node, yaml.SequenceNode) and isinstance(segment, int):
        return node.value[segment] if 0 <= segment < len(node.value) else None
    return None
