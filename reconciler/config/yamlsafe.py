"""Safe YAML reading (rule C6) that remembers where every value came from.

Parses text (never files: the loader does the reading) into JSON-compatible documents with the
libyaml C parser where present. Refuses duplicate keys, unsupported tags, non-scalar keys,
unbounded alias expansion ("billion laughs"), nesting deeper than :data:`MAX_DEPTH` in any form
(checked before composing: the composers recurse, and deep block or flow nesting would overflow
the C stack), scalars that Kubernetes cannot read (``!!int abc``, ``.inf``: see
:mod:`reconciler.config.scalars`, which reads plain scalars as ``kubectl apply`` does) and work
past a :class:`~reconciler.config.budget.TimeBudget`, each as a
:class:`~reconciler.core.diagnostics.Diagnostic` with line and column. Each :class:`Document`
keeps the text it came from; when a later check needs the line and column of a JSON pointer,
the text is composed again (only then, and once per file), so a valid repo never holds node
trees in memory; each mapping on the way is indexed once, so locating many diagnostics stays
linear.

Used by the loader (every YAML file of a config repo) and by tests.
"""

from __future__ import annotations

import operator
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import yaml

from reconciler.config import scalars
from reconciler.config.budget import TimeBudget, budget_diagnostic
from reconciler.core.diagnostics import Diagnostic, Pointer, format_pointer
from reconciler.errors import OverBudgetError

_SafeLoader: type[Any] = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
_SCALAR, _MAPPING = yaml.ScalarNode, yaml.MappingNode

#: Plain scalars already read (tag and value, by Kubernetes' rules: :mod:`.scalars`): the same
#: keys and values ("name", "spec", "true", "1.0.0") repeat across thousands of files.
_PLAIN: dict[str, tuple[str, Any, str | None]] = {}
_PLAIN_MAX = 200_000
#: The tag of a plain scalar that cannot be sent as JSON (``.inf``, ``.nan``): refused when built.
_NOT_JSON = "tag:reconciler.dev,2026:not-json"


def read_plain(text: str) -> tuple[str, Any, str | None]:
    """The tag and value of a plain scalar as Kubernetes reads it, and why that reading may
    surprise its author (see :func:`~reconciler.config.scalars.surprise`), memoised."""
    found = _PLAIN.get(text)
    if found is None:
        try:
            tag, value = scalars.read_plain(text)
        except scalars.NotJsonError:
            tag, value = _NOT_JSON, text
        found = (tag, value, scalars.surprise(text))
        if len(_PLAIN) >= _PLAIN_MAX:
            _PLAIN.clear()
        _PLAIN[text] = found
    return found


#: PyYAML's default tags of a quoted scalar, a mapping and a sequence without an explicit tag
#: (what its resolver answers without path resolvers, here without the detour).
_STR_TAG, _MAP_TAG, _SEQ_TAG = (f"tag:yaml.org,2002:{t}" for t in ("str", "map", "seq"))


class _BaseLoader(_SafeLoader):  # type: ignore[misc]
    """The safe loader resolving plain scalars by Kubernetes' rules (sigs.k8s.io/yaml over
    goyaml.v2) instead of PyYAML's YAML 1.1 ones."""

    def resolve(self, kind: Any, value: Any, implicit: Any) -> Any:
        if kind is _SCALAR and implicit[0]:
            known = _PLAIN.get(value)  # read_plain's memory, without the call (every scalar)
            return known[0] if known is not None else read_plain(value)[0]
        if self.yaml_path_resolvers:  # none are registered; PyYAML's own answer, if ever
            return super().resolve(kind, value, implicit)
        if kind is _SCALAR:
            return _STR_TAG
        return _MAP_TAG if kind is _MAPPING else _SEQ_TAG

    #: PyYAML's composer calls these two for every node, to follow the path that path resolvers
    #: match; none is registered here (:meth:`resolve` answers without them), so both are C
    #: functions that ignore their arguments: two Python calls per node cost 8% of parsing.
    descend_resolver = staticmethod(operator.is_)  # (parent, index): ignored
    ascend_resolver = staticmethod(tuple)  # (): ignored


#: Expanded nodes allowed per document: aliases may repeat content, but not without bound.
MAX_EXPANDED_NODES = 1_000_000
#: Nesting depth allowed per document (also stops recursive aliases).
MAX_DEPTH = 200
#: The time budget is looked at every this many nodes or events (a power of two, minus one).
_CHECK_EVERY = 1023

_TAG = "tag:yaml.org,2002:"
_STR, _INT, _FLOAT, _BOOL, _NULL = (
    scalars.STR,
    scalars.INT,
    scalars.FLOAT,
    scalars.BOOL,
    scalars.NULL,
)
_TIMESTAMP, _MAP, _SEQ, _MERGE = (_TAG + t for t in ("timestamp", "map", "seq", "merge"))
_KEY_TAGS = frozenset({_STR, _INT, _FLOAT, _BOOL, _NULL, _TIMESTAMP})


@dataclass(frozen=True, slots=True)
class Position:
    """A 1-based line and column in a file."""

    line: int
    column: int


_Entry = tuple[yaml.Node, yaml.Node]


class SourceText:
    """The text of one file, with its node trees composed on first demand and its mappings
    indexed by key on first use (so each lookup costs the length of its pointer)."""

    __slots__ = ("_index", "_loader_class", "_nodes", "text")

    def __init__(self, text: str, loader_class: type[Any]) -> None:
        self.text = text
        self._loader_class = loader_class
        self._nodes: list[yaml.Node | None] | None = None
        self._index: dict[int, dict[str, _Entry]] = {}

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

    def position(self, index: int, pointer: Pointer, *, key: bool) -> Position:
        """See :meth:`Document.position`."""
        node = self.node(index)
        if node is None:
            return Position(1, 1)
        current: yaml.Node = node
        for i, segment in enumerate(pointer):
            child = self._child(current, segment, want_key=key and i == len(pointer) - 1)
            if child is None:
                break
            current = child
        mark = current.start_mark
        return Position(mark.line + 1, mark.column + 1)

    def _child(self, node: yaml.Node, segment: str | int, *, want_key: bool) -> yaml.Node | None:
        if isinstance(node, yaml.MappingNode):
            entries = self._index.get(id(node))  # nodes live as long as self._nodes
            if entries is None:
                entries = self._index[id(node)] = mapping_index(node)
            entry = entries.get(str(segment))
            if entry is None:
                return None
            return entry[0] if want_key else entry[1]
        if isinstance(node, yaml.SequenceNode) and isinstance(segment, int):
            return node.value[segment] if 0 <= segment < len(node.value) else None
        return None


def mapping_index(node: yaml.MappingNode) -> dict[str, _Entry]:
    """The (key node, value node) of each scalar key of ``node``; the first of equal keys."""
    index: dict[str, _Entry] = {}
    for key_node, value_node in node.value:
        key = _key_text(key_node)
        if key is not None:
            index.setdefault(key, (key_node, value_node))
    return index


@dataclass(frozen=True, slots=True)
class Document:
    """One YAML document of a file: its data, its place in the file and the file's text."""

    path: str
    index: int
    data: Any
    source: SourceText | None = field(default=None, compare=False, repr=False)
    #: Plain scalars whose Kubernetes reading may surprise (``y`` is true): rules Y1 and Y2.
    warnings: tuple[Diagnostic, ...] = field(default=(), compare=False, repr=False)

    def position(self, pointer: Pointer, *, key: bool = False) -> Position:
        """Where ``pointer`` is in the file: the deepest existing node on its way.

        With ``key=True`` and a pointer ending in a mapping key, the key's position instead of
        its value's (e.g. to point at an unknown field's name).
        """
        if self.source is None:
            return Position(1, 1)
        return self.source.position(self.index, pointer, key=key)

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
    """Work done on one document: nodes expanded, and the time budget to look at now and then."""

    time: TimeBudget | None = None
    nodes: int = 0
    mark: Any = None  # where the work was when the time budget was last checked
    #: The surprising plain scalars met in the document: (node, why).
    surprises: list[tuple[yaml.Node, str]] = field(default_factory=list)


def parse_yaml(
    text: str,
    path: str,
    *,
    loader_class: type[Any] = _BaseLoader,
    budget: TimeBudget | None = None,
) -> tuple[list[Document], list[Diagnostic]]:
    """Parse a (multi-document) YAML text safely. Empty documents are skipped.

    Returns the documents and, if the text is not acceptable, the diagnostics (in that case the
    documents read before the problem are returned too, but callers should not act on them).
    ``loader_class`` chooses the parser: the libyaml one by default, ``yaml.SafeLoader`` for the
    pure-Python baseline of the benchmark. With a ``budget``, a file past its time is one C6
    diagnostic at the place reached; past the commit's time, the
    :class:`~reconciler.errors.OverBudgetError` is raised, located at that place.
    """
    documents: list[Document] = []
    work = _Budget(budget)
    try:
        too_deep = _too_deep(text, path, work)
        if too_deep is not None:
            return documents, [too_deep]
        return _parse(text, path, loader_class, work, documents)
    except OverBudgetError as over:
        mark = work.mark
        line, column = (mark.line + 1, mark.column + 1) if mark is not None else (1, 1)
        diagnostic = budget_diagnostic(over, path, line, column)
        if over.scope != "file":
            raise
        return documents, [diagnostic]


def _parse(
    text: str, path: str, loader_class: type[Any], work: _Budget, documents: list[Document]
) -> tuple[list[Document], list[Diagnostic]]:
    source = SourceText(text, loader_class)
    try:
        loader = loader_class(text)
    except yaml.reader.ReaderError as err:  # the pure-Python reader checks characters at once
        return documents, [_reader_problem(path, text, err)]
    try:
        for index, node in enumerate(_nodes(loader)):
            if node is None or _is_empty(node):
                continue
            work.nodes, work.mark, work.surprises = 0, node.start_mark, []
            data = _construct(node, work, 0)
            warnings = tuple(_warning(path, n, why) for n, why in work.surprises)
            documents.append(Document(path, index, data, source, warnings))
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


#: Where a block collection can start on a line: after indentation and the compact indicators
#: of block sequences, complex keys and their values ("- - x", "? ? x", ": - x"); a byte order
#: mark and tabs are counted too, to be safe. Compiled per length, for a text's first line and
#: for the lines after a line break (of any kind libyaml knows).
_PREFIX = "[ \t?:\ufeff-]{%d}"
_PREFIXES: dict[int, tuple[re.Pattern[str], re.Pattern[str]]] = {}


def _long_line_prefix(text: str, length: int) -> bool:
    """Whether a line of ``text`` starts with ``length`` characters of the prefix above."""
    patterns = _PREFIXES.get(length)
    if patterns is None:
        prefix = _PREFIX % length
        patterns = _PREFIXES[length] = (
            re.compile(prefix),
            re.compile("[\n\r\x85\u2028\u2029]" + prefix),
        )
    first, after_break = patterns
    return first.match(text) is not None or after_break.search(text) is not None


def _may_be_too_deep(text: str) -> bool:
    """Whether ``text`` might nest deeper than :data:`MAX_DEPTH` (cheap, never wrong that way).

    Flow collections each start with a bracket, and a flow sequence entry may open one
    single-pair mapping more: at most ``2 * "[" + "{"`` levels. Each block collection starts at
    a column inside the prefix above; a nested one starts further right than its parent, except
    a sequence directly under a mapping key: a line prefix of ``P`` characters allows at most
    ``2 * P + 2`` block levels. Only texts over the limit by this count are scanned exactly.
    """
    flow = 2 * text.count("[") + text.count("{")
    room = MAX_DEPTH - 1 - flow  # collections allowed: MAX_DEPTH + 1, the root being one
    if room < 0:
        return True
    return _long_line_prefix(text, room // 2 + 1)


def _too_deep(text: str, path: str, work: _Budget) -> Diagnostic | None:
    """Refuse nesting deeper than :data:`MAX_DEPTH` before composing, in any form (block or flow
    sequences and mappings, complex keys): the composers build node trees recursively, and a
    few kilobytes of ``[[[[`` or ``- - - -`` would exhaust the C stack. Texts that might nest
    that deep (see :func:`_may_be_too_deep`) are scanned event by event, without recursion,
    and refused where the limit is crossed."""
    if not _may_be_too_deep(text):
        return None
    try:
        return _first_too_deep(text, path, work, _SafeLoader)
    except yaml.YAMLError as err:
        if _SafeLoader is yaml.SafeLoader or "nesting depth" not in str(err):
            return None  # the real parse reports it
    # libyaml 0.2.6 stops at its own flow nesting limit while scanning ahead, before the event
    # that crosses ours: the pure-Python parser (no such limit, no recursion) finds that place
    try:
        return _first_too_deep(text, path, work, yaml.SafeLoader)
    except yaml.YAMLError:
        return None  # the real parse reports it


def _first_too_deep(text: str, path: str, work: _Budget, loader: type[Any]) -> Diagnostic | None:
    """The first collection of ``text`` deeper than :data:`MAX_DEPTH`, scanned event by event."""
    depth = 0
    for count, event in enumerate(yaml.parse(text, Loader=loader)):
        if work.time is not None and count & _CHECK_EVERY == 0:
            work.mark = event.start_mark
            work.time.check()
        if isinstance(event, yaml.CollectionStartEvent):
            depth += 1  # the document's root collection is level 0, as in _construct
            if depth > MAX_DEPTH + 1:
                return _at(path, event.start_mark, f"nesting deeper than {MAX_DEPTH} levels")
        elif isinstance(event, yaml.CollectionEndEvent):
            depth -= 1
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
    if budget.time is not None and budget.nodes & _CHECK_EVERY == 0:
        budget.mark = node.start_mark
        budget.time.check()
    if budget.nodes > MAX_EXPANDED_NODES:
        raise YamlProblemError(
            f"document expands to more than {MAX_EXPANDED_NODES:,} nodes (alias bomb?)", node
        )
    if depth > MAX_DEPTH:
        raise YamlProblemError(f"nesting deeper than {MAX_DEPTH} levels (recursive alias?)", node)
    if isinstance(node, yaml.ScalarNode):
        return _tagged(node, budget)[1]
    if isinstance(node, yaml.SequenceNode):
        if node.tag != _SEQ:
            raise YamlProblemError(f"unsupported tag {node.tag}", node)
        return [_child(child, budget, depth + 1) for child in node.value]
    if isinstance(node, yaml.MappingNode):
        if node.tag != _MAP:
            raise YamlProblemError(f"unsupported tag {node.tag}", node)
        return _mapping(node, budget, depth)
    raise YamlProblemError("unsupported YAML node", node)


def _child(node: yaml.Node, budget: _Budget, depth: int) -> Any:
    """A collection's item: a string scalar at once (the most common node by far; counted as
    :func:`_construct` counts it, which takes every other node and every budget look)."""
    if node.tag == _STR and type(node) is _SCALAR and depth <= MAX_DEPTH:
        nodes = budget.nodes + 1
        if nodes & _CHECK_EVERY and nodes <= MAX_EXPANDED_NODES:
            budget.nodes = nodes
            return node.value
    return _construct(node, budget, depth)


def _warning(path: str, node: yaml.Node, why: str) -> Diagnostic:
    """A warning of rule Y1 (a word read as a boolean) or Y2 (a leading zero read as a number)."""
    mark = node.start_mark
    rule = "Y1" if "boolean" in why else "Y2"
    return Diagnostic(path, mark.line + 1, mark.column + 1, rule, why)


def _tagged(node: yaml.ScalarNode, budget: _Budget | None = None) -> tuple[str, Any]:
    """The tag and value of a scalar: plain ones as Kubernetes reads them, explicitly tagged
    ones (``!!int "0x1F"``) checked against that reading, as goyaml.v2 checks them."""
    tag, text = node.tag, str(node.value)
    if tag in (_STR, _TIMESTAMP):  # timestamps stay strings: JSON has no dates
        return _STR, text
    if tag == _NOT_JSON:
        raise YamlProblemError(f"'{text}' is a number JSON cannot carry ({_QUOTE_IT})", node)
    what = _EXPLICIT.get(tag)
    if what is None:
        raise YamlProblemError(f"unsupported tag {tag}", node)
    read_tag, value, why = read_plain(text)
    if why is not None and budget is not None and not node.style:  # plain: None or ""
        budget.surprises.append((node, why))
    if read_tag == tag or (tag == _FLOAT and read_tag == _INT):
        return tag, value
    message = f"not a valid {what} ({len(text):,} characters; {_QUOTE_IT})"
    raise YamlProblemError(message, node)


_EXPLICIT = {_BOOL: "boolean", _INT: "integer", _FLOAT: "number", _NULL: "null", _MERGE: "key"}
_QUOTE_IT = "quote it if it is meant as a string"


def _mapping(node: yaml.MappingNode, budget: _Budget, depth: int) -> dict[str, Any]:
    result: dict[str, Any] = {}
    merged: dict[str, Any] = {}
    for key_node, value_node in node.value:
        if key_node.tag == _MERGE:
            _merge_into(merged, _construct(value_node, budget, depth + 1), value_node)
            continue
        key = key_node.value if key_node.tag == _STR and type(key_node) is _SCALAR else None
        if key is None:
            key = _key(key_node, budget)
        if key in result:
            first = _key_line(node, key)
            raise YamlProblemError(
                f"duplicate key '{key}' (first defined on line {first})", key_node
            )
        if depth > 0:
            result[key] = _child(value_node, budget, depth + 1)
        else:
            result[key] = _construct_entry(key_node, value_node, budget, depth)
    return {**merged, **result} if merged else result


def _key(node: yaml.Node, budget: _Budget | None = None) -> str:
    """A mapping key as sigs.k8s.io/yaml writes it in JSON (``y`` is "true", ``1e3`` is
    "1000"); keys that are not scalars or read as null are refused, as kubectl refuses them."""
    if not isinstance(node, yaml.ScalarNode):
        raise YamlProblemError("mapping keys must be plain scalars", node)
    if node.tag not in _KEY_TAGS:
        raise YamlProblemError(f"unsupported tag {node.tag}", node)
    tag, value = _tagged(node, budget)
    if tag == _NULL:
        raise YamlProblemError(f"a key that reads as null ({_QUOTE_IT})", node)
    return scalars.key_string(tag, value)


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
        if _key_text(key_node) == key:
            return int(key_node.start_mark.line) + 1
    return int(node.start_mark.line) + 1


def _key_text(node: yaml.Node) -> str | None:
    """The JSON key of a key node, or None for a key that is refused."""
    try:
        return _key(node)
    except YamlProblemError:
        return None
