"""YAML read as Kubernetes reads it: every row of the tables in docs/yaml.md is a case here, so
the documented table and the reader cannot drift apart; ``validate`` warns where that reading
would surprise (rules Y1, Y2) without changing its exit status."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from reconciler.cli import cli
from reconciler.config.yamlsafe import parse_yaml
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


def test_two_keys_that_read_the_same_are_a_duplicate() -> None:
    _, problems = parse_yaml("y: 1\ntrue: 2\n", "f.yaml")

    assert [(p.rule, p.line, p.message) for p in problems] == [
        ("C6", 2, "duplicate key 'true' (first defined on line 1)")
    ]


def test_a_diagnostic_finds_a_key_by_its_json_name() -> None:
    documents, _ = parse_yaml("spec:\n  y: 1\n", "f.yaml")

    position = documents[0].position(("spec", "true"), key=True)

    assert (position.line, position.column) == (2, 3)


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
