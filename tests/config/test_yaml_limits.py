"""Nesting bounded: every form of YAML nesting (block, flow, complex keys, indentation, mixed) is
refused before composing at the level too deep, with one located C6 diagnostic, and never crashes
the process however deep; nesting at the limit is read. (The other limits of the reader, alias
expansion above all, are in test_yamlsafe.py; scalars Kubernetes cannot read in
test_yaml_conformance.py.)"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any, ClassVar

import pytest
import yaml

from reconciler.config import yamlsafe
from reconciler.config.yamlsafe import MAX_DEPTH, parse_yaml
from reconciler.core.diagnostics import Diagnostic
from tests.support.yaml_nesting import FORMS

ROOT = Path(__file__).resolve().parents[2]


def _problem(text: str, **options: Any) -> Diagnostic:
    _, problems = parse_yaml(text, "f.yaml", **options)
    assert len(problems) == 1, problems
    return problems[0]


# -- nesting: every form, refused before composing -----------------------------------------------


class _CountingLoader(yamlsafe._BaseLoader):
    """The default loader, counting how often a text is composed."""

    created: ClassVar[int] = 0

    def __init__(self, stream: str) -> None:
        type(self).created += 1
        super().__init__(stream)


@pytest.mark.parametrize("form", list(FORMS))
def test_deep_nesting_is_refused_before_composing_at_the_level_too_deep(form: str) -> None:
    make, place = FORMS[form]
    _CountingLoader.created = 0

    problem = _problem(make(2 * MAX_DEPTH), loader_class=_CountingLoader)

    assert problem.rule == "C6"
    assert problem.message == f"nesting deeper than {MAX_DEPTH} levels"
    assert (problem.line, problem.column) == place
    assert _CountingLoader.created == 0  # nothing was composed


@pytest.mark.parametrize("form", list(FORMS))
def test_nesting_at_the_limit_is_read(form: str) -> None:
    make, _ = FORMS[form]
    text = make(MAX_DEPTH)  # MAX_DEPTH levels below the root at most

    _, problems = parse_yaml(text, "f.yaml")

    assert [p for p in problems if "nesting" in p.message] == []


#: 100-200 KB of nesting: enough to overflow the C stack when composed.
HUGE = 100_000


@pytest.mark.parametrize(
    "form",
    [
        "block sequence",
        "complex key",
        "complex key and sequence",
        "value of a complex key",
        "flow single-pair mapping",
        "flow in block",
    ],
)
def test_very_deep_nesting_of_each_form_does_not_crash_the_process(form: str) -> None:
    script = (
        "import sys\n"
        "from tests.support.yaml_nesting import FORMS\n"
        "from reconciler.config.yamlsafe import parse_yaml\n"
        f"_, problems = parse_yaml(FORMS[{form!r}][0]({HUGE}), 'deep.yaml')\n"
        "print([p.format() for p in problems])\n"
    )

    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120, cwd=ROOT
    )

    assert done.returncode == 0, f"exit status {done.returncode}: {done.stderr[-300:]}"
    assert f"C6 nesting deeper than {MAX_DEPTH} levels" in done.stdout


def _max_depth(text: str) -> int:
    """The deepest nesting of collections in ``text``, by libyaml's events (0 if it is broken)."""
    depth = deepest = 0
    try:
        for event in yaml.parse(text, Loader=yamlsafe._SafeLoader):
            if isinstance(event, yaml.CollectionStartEvent):
                depth += 1
                deepest = max(deepest, depth)
            elif isinstance(event, yaml.CollectionEndEvent):
                depth -= 1
    except yaml.YAMLError:
        return deepest
    return deepest


@pytest.mark.parametrize("form", list(FORMS))
@pytest.mark.parametrize("depth", [MAX_DEPTH + 2, MAX_DEPTH + 3, 3 * MAX_DEPTH])
def test_the_cheap_pre_check_never_misses_a_text_too_deep(form: str, depth: int) -> None:
    text = FORMS[form][0](depth)
    nested = "a:\n  b:\n" + "".join(f"    {line}\n" for line in text.splitlines())
    for candidate in (text, nested, text.replace("\n", "\r\n"), "\ufeff" + text):
        if _max_depth(candidate) > MAX_DEPTH + 1:
            assert yamlsafe._may_be_too_deep(candidate)


def test_the_cheap_pre_check_lets_ordinary_files_through_without_scanning() -> None:
    for path in sorted((ROOT / "sample-repo").rglob("*.yaml")):
        assert not yamlsafe._may_be_too_deep(path.read_text(encoding="utf-8")), path


def test_deep_nesting_is_refused_at_the_first_level_too_deep() -> None:
    depth = 1000
    problem = _problem("a: " + "[" * depth + "]" * depth + "\n")

    assert problem.rule == "C6"
    assert f"nesting deeper than {yamlsafe.MAX_DEPTH} levels" in problem.message
    # the mapping is level 0 and the n-th "[" (column 3 + n) opens level n
    assert (problem.line, problem.column) == (1, 3 + yamlsafe.MAX_DEPTH + 1)


#: 200 kB of brackets, far under the 5 MiB file limit.
DEEP = 100_000


def test_very_deep_nesting_is_refused_without_crashing_the_process() -> None:
    script = (
        "from reconciler.config.yamlsafe import parse_yaml\n"
        f"n = {DEEP}\n"
        "_, problems = parse_yaml('a: ' + '[' * n + ']' * n + '\\n', 'deep.yaml')\n"
        "print([p.format() for p in problems])\n"
    )
    root = Path(__file__).resolve().parents[2]

    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=300, cwd=root
    )

    assert done.returncode == 0, f"exit status {done.returncode}: {done.stderr[-300:]}"
    assert "C6 nesting deeper than" in done.stdout


def test_deep_nesting_with_the_pure_python_loader_is_a_diagnostic() -> None:
    depth = 5000

    _, problems = parse_yaml(
        "a: " + "[" * depth + "]" * depth + "\n", "f.yaml", loader_class=yaml.SafeLoader
    )

    assert [p.rule for p in problems] == ["C6"]
