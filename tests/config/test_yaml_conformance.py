"""YAML read as Kubernetes reads it: every row of the tables in docs/yaml.md is a case here, so
the documented table and the reader cannot drift apart; ``validate`` warns where that reading
would surprise (rules Y1, Y2) without changing its exit status. Scalars outside the tables too:
timestamps stay strings, and a scalar Kubernetes cannot read is a located C6 problem, however
long."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from reconciler.cli import cli
from reconciler.config.yamlsafe import parse_yaml
from reconciler.core.diagnostics import Diagnostic
from tests.support.repos import RepoFactory, channel_file, dump, runtime_file

DOC = Path(__file__).resolve().parents[2] / "docs" / "yaml.md"
_ROW = re.compile(r"^\| `(?P<text>[^`]+)` \| (?P<read>`[^`]*`|refused \(C6\)) \|", re.M)


def _rows(heading: str) -> list[tuple[str, str]]:
    """The (first cell, second cell) of the table under ``heading`` in docs/yaml.md."""
    text = DOC.read_text(encoding="utf-8")
    section = text.split(f"## {heading}\n", 1)[1].split("\n## ", 1)[0]
    return [(m["text"], m["read"]) for m in _ROW.finditer(section)]


VALUES = _rows("Plain (unquoted) scalars")
KEYS = _rows("Mapping keys")


def test_the_tables_have_their_rows() -> None:
    assert len(VALUES) >= 30
    assert len(KEYS) >= 8


@pytest.mark.parametrize(("text", "read"), VALUES, ids=[t for t, _ in VALUES])
def test_a_plain_value_is_read_as_the_table_says(text: str, read: str) -> None:
    documents, problems = parse_yaml(f"value: {text}\n", "f.yaml")

    if read == "refused (C6)":
        assert [(p.rule, p.line, p.column) for p in problems] == [("C6", 1, 8)]
        return
    assert problems == []
    assert documents[0].data == {"value": _json(read)}
    expected = _json(read)
    assert type(documents[0].data["value"]) is type(expected)


@pytest.mark.parametrize(("text", "read"), KEYS, ids=[t for t, _ in KEYS])
def test_a_plain_key_is_read_as_the_table_says(text: str, read: str) -> None:
    documents, problems = parse_yaml(f"{text}: v\n", "f.yaml")

    if read == "refused (C6)":
        assert [(p.rule, p.line, p.column) for p in problems] == [("C6", 1, 1)]
        return
    assert problems == []
    assert documents[0].data == {_json(read): "v"}


def _json(cell: str) -> Any:
    return json.loads(cell.strip("`"))


def test_quoted_scalars_are_strings_whatever_they_look_like() -> None:
    documents, problems = parse_yaml("a: 'y'\nb: \"0777\"\nc: '1e3'\n'~': x\n", "f.yaml")

    assert problems == []
    assert documents[0].data == {"a": "y", "b": "0777", "c": "1e3", "~": "x"}


def _data(text: str) -> Any:
    """The data of the only document of ``text``, which must parse cleanly."""
    documents, problems = parse_yaml(text, "f.yaml")
    assert problems == []
    assert len(documents) == 1
    return documents[0].data


def _problem(text: str) -> Diagnostic:
    """The only problem of ``text``."""
    _, problems = parse_yaml(text, "f.yaml")
    assert len(problems) == 1, problems
    return problems[0]


# -- scalars Kubernetes cannot read, and long ones ----------------------------------------------


def test_timestamps_stay_strings_as_written() -> None:
    text = (
        "date: 2024-05-01\n"
        "utc: 2024-05-01T10:00:00Z\n"
        "spaced: 2001-12-14 21:59:43.10 -5\n"
        "created: !!timestamp 2024-05-01\n"
    )

    assert _data(text) == {
        "date": "2024-05-01",
        "utc": "2024-05-01T10:00:00Z",
        "spaced": "2001-12-14 21:59:43.10 -5",
        "created": "2024-05-01",
    }


def test_other_scalars_keep_their_json_types() -> None:
    text = 'b: true\ni: 42\nf: 1.5\nnothing: ~\nv: 1.2.0\nq: "1.0"\ne: ""\n'

    data = _data(text)

    assert data == {
        "b": True,
        "i": 42,
        "f": 1.5,
        "nothing": None,
        "v": "1.2.0",
        "q": "1.0",
        "e": "",
    }
    assert type(data["i"]) is int
    assert type(data["b"]) is bool


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("!!float ._", "not a valid number (2 characters"),
        ("!!int ''", "not a valid integer (0 characters"),
        ("!!int abc", "not a valid integer"),
        ("!!int 0x_", "not a valid integer"),
        ("!!float x", "not a valid number"),
        ("!!bool maybe", "not a valid boolean"),
        ("!!int " + "7" * 6_000, "not a valid integer (6,000 characters"),
        (".inf", "'.inf' is a number JSON cannot carry"),
        ("-.Inf", "'-.Inf' is a number JSON cannot carry"),
        (".NaN", "'.NaN' is a number JSON cannot carry"),
    ],
)
def test_a_scalar_kubernetes_cannot_read_is_a_c6_problem_at_its_place(
    value: str, expected: str
) -> None:
    problem = _problem(f"spec:\n  replicas: {value}\n")

    assert (problem.rule, problem.line, problem.column) == ("C6", 2, 13)
    assert problem.message.startswith(expected)
    assert "quote it if it is meant as a string" in problem.message
    if len(value) > 20:
        assert value.split()[-1] not in problem.message  # a long value is never repeated


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("1_", 1),
        ("1__000", 1000),
        ("0_", 0),
        ("0x_F", 15),
        ("0x_", "0x_"),
        ("+0b_", "+0b_"),
        ("0o_", "0o_"),
        ("190:20:30", "190:20:30"),
        ("1" * 5_000, "1" * 5_000),
        ("-" + "9" * 4_301, "-" + "9" * 4_301),
        ("-0x" + "F" * 3_000, "-0x" + "F" * 3_000),
        ("0b" + "1" * 14_000, "0b" + "1" * 14_000),
        ("1" * 100_000 + ".5", "1" * 100_000 + ".5"),
        ("1e99999", "1e99999"),
        ("1e-99999", 0),
        (".iNf", ".iNf"),
        ("._", "._"),
        ("1_000.5_", 1000.5),
    ],
)
def test_scalars_read_as_kubernetes_reads_them_however_long(value: str, expected: object) -> None:
    """Out-of-range numbers stay strings, as Go's parsers refuse them; none costs more than
    reading its characters (Python's int() of a long decimal is quadratic, so it never sees one)."""
    documents, problems = parse_yaml(f"a: {value}\n", "f.yaml")

    assert problems == []
    assert documents[0].data == {"a": expected}


# -- validate warns where Kubernetes' reading may surprise --------------------------------------

_MANIFEST = """\
apiVersion: apps/v1
kind: Deployment
metadata:
  name: demo-operator
  labels:
    app.kubernetes.io/version: "1.0.0"
spec:
  selector: {matchLabels: {app: demo}}
  template:
    metadata:
      labels: {app: demo, debug: y}
    spec:
      containers:
        - name: demo
          image: demo:1.0.0
          args: [--mode, 0755, "--quoted", 'n']
"""


def _repo(make_repo: RepoFactory) -> Path:
    module = {
        "apiVersion": "reconciler.dev/v1alpha1",
        "kind": "Module",
        "metadata": {"name": "demo"},
        "spec": {"namespace": "demo", "operator": {"kind": "Deployment", "name": "demo-operator"}},
    }
    return make_repo(
        {
            "modules/demo/module.yaml": dump(module),
            "modules/demo/1.0.0/manifest.yaml": _MANIFEST,
            **channel_file("regular", {"demo": "1.0.0"}),
            **runtime_file("one", "regular", [{"name": "demo"}]),
        }
    )


def test_validate_warns_with_the_place_and_keeps_its_exit_status(make_repo: RepoFactory) -> None:
    root = _repo(make_repo)

    result = CliRunner().invoke(cli, ["validate", str(root)])

    assert result.exit_code == 0, result.output
    manifest = f"{root}/modules/demo/1.0.0/manifest.yaml"
    assert result.stdout.splitlines()[:2] == [
        f"{manifest}:11:34: warning Y1 'y' is read as the boolean true by Kubernetes; "
        "quote it if it is a string",
        f"{manifest}:16:26: warning Y2 '0755' is read as the number 493 by Kubernetes (a "
        "leading 0 reads as octal where it can); quote it if it is a string, or write 0o17 "
        "for octal 17",
    ]
    assert "valid: 1 runtimes" in result.stdout


def test_validate_json_lists_the_warnings_apart_from_the_errors(make_repo: RepoFactory) -> None:
    root = _repo(make_repo)

    result = CliRunner().invoke(cli, ["validate", str(root), "--format", "json"])

    report = json.loads(result.stdout)
    assert result.exit_code == 0
    assert report["errors"] == []
    assert [(w["rule"], w["line"]) for w in report["warnings"]] == [("Y1", 11), ("Y2", 16)]


def test_a_document_with_errors_still_reports_its_warnings(make_repo: RepoFactory) -> None:
    root = _repo(make_repo)
    runtime = root / "runtimes" / "one.yaml"
    runtime.write_text(runtime.read_text() + "  colour: off\n")

    result = CliRunner().invoke(cli, ["validate", str(root), "--format", "json"])

    report = json.loads(result.stdout)
    assert result.exit_code == 1
    assert [e["rule"] for e in report["errors"]] == ["C1"]
    assert ("Y1", f"{root}/runtimes/one.yaml") in {
        (w["rule"], w["path"]) for w in report["warnings"]
    }
