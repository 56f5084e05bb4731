"""The credential scan (rule C6) of the files a chart or an overlay renders from (pure).

A chart's templates, its own ``values.yaml``, its ``crds/`` and other files, and an overlay's
resources, kustomizations and generator files reach the clusters as surely as a manifest does,
so they are scanned as a manifest is, each finding at its file and line:

- a ``.yaml``, ``.yml`` or ``.json`` file that parses (values files, ``Chart.yaml``,
  ``crds/``, ``values.schema.json``, an overlay's resources and kustomizations, a template
  without actions) as YAML, document by document, with :func:`find_inline_credentials` (a
  Secret with data, a field or variable named like a credential set literally, every token
  shape; ``{{ .Values.x }}`` is a reference, not a value);
- every other file as text, with :func:`~reconciler.config.credential_text.text_kind` (what it
  finds in an embedded file: ``name: value`` lines, ``NAME=value``, PEM keys, token shapes): a
  chart's templates (``{{ }}`` makes most of them no YAML until rendered), helpers, notes and
  files, an overlay's generator files (``.env``, ``.properties``). A text's findings are
  located at the line where each is complete.

:func:`credential_scans` yields one scan per file and the document it is reported at, for the
validator to run within each file's time budget. Callers: ``config.module_checks``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping

from reconciler.config.budget import TimeBudget
from reconciler.config.credential_text import text_kind
from reconciler.config.credentials import ADVICE, find_inline_credentials
from reconciler.config.yamlsafe import Document, parse_yaml
from reconciler.core.diagnostics import Diagnostic

#: A scan of one file, given the time budget: its findings.
Scan = Callable[[TimeBudget | None], list[Diagnostic]]
#: Files read as YAML (JSON is YAML) when they parse.
_STRUCTURED_ENDINGS = (".yaml", ".yml", ".json")
#: Files of a version folder that are not an overlay's own (scanned where they are read).
_VERSION_FILES = frozenset({"values.yaml", "default.yaml"})


def credential_scans(
    files: Mapping[str, bytes], root: str, *, chart: bool
) -> Iterator[tuple[Document, Scan]]:
    """One scan per file of a chart (``chart``) or an overlay, with the document (its file)
    a budget overrun is reported at. An overlay's ``values.yaml`` and ``default.yaml`` are not
    its files (they are read, and scanned, as a version folder's)."""
    for path in sorted(files):
        if not chart and path in _VERSION_FILES:
            continue
        shown = f"{root}/{path}"
        text = files[path].decode(errors="replace")
        as_yaml = path.endswith(_STRUCTURED_ENDINGS)
        yield Document(shown, 0, None), _scan(text, shown, as_yaml=as_yaml)


def _scan(text: str, shown: str, *, as_yaml: bool) -> Scan:
    def scan(budget: TimeBudget | None) -> list[Diagnostic]:
        if as_yaml:
            documents, problems = parse_yaml(text, shown, budget=budget)
            if not problems:
                return [d for doc in documents for d in find_inline_credentials(doc, budget)]
        return text_credentials(text, shown, budget)

    return scan


def text_credentials(text: str, shown: str, budget: TimeBudget | None) -> list[Diagnostic]:
    """One C6 diagnostic per credential in ``text`` (a file shown as ``shown``), at the line
    where it is complete: the first line whose text up to it holds a credential, then the
    same in the rest (a binary search over lines: a clean file is read once)."""
    check = budget.check if budget is not None else _nothing
    lines = text.splitlines(keepends=True)
    found: list[Diagnostic] = []
    start = 0
    while start < len(lines):
        what = text_kind("".join(lines[start:]), check=check)
        if what is None:
            break
        end = _first_end(lines, start, check)
        found.append(Diagnostic(shown, end, 1, "C6", f"{what}: {ADVICE}"))
        start = end
    return found


def _first_end(lines: list[str], start: int, check: Callable[[], None]) -> int:
    """The smallest ``end`` such that ``lines[start:end]`` holds a credential (the whole rest
    does)."""
    low, high = start + 1, len(lines)
    while low < high:
        middle = (low + high) // 2
        if text_kind("".join(lines[start:middle]), check=check) is None:
            low = middle + 1
        else:
            high = middle
    return low


def _nothing() -> None:
    """A check that never stops a scan."""
