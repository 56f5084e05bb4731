"""The sample fleet (repo and channels) copied for a test, with snapshot clusters and a state
store beside it; and a printed document checked against the schema of its kind."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import jsonschema
import yaml
from click.testing import CliRunner

from reconciler.cli import cli

ROOT = Path(__file__).resolve().parents[2]


SCHEMA = json.loads((ROOT / "schemas" / "output" / "output.schema.json").read_text())


def check_document(document: dict[str, Any], kind: str) -> None:
    """``document`` is a ``kind`` of our version and valid against that kind's schema."""
    assert (document["apiVersion"], document["kind"]) == ("reconciler.dev/v1", kind)
    schema = {"$defs": SCHEMA["$defs"], "$ref": f"#/$defs/{kind}"}
    jsonschema.Draft202012Validator(schema).validate(document)


class Fleet:
    """The sample fleet (repo and channels) copied to ``root``, with snapshot clusters and a
    state store beside it."""

    def __init__(self, root: Path) -> None:
        self.root = root
        shutil.copytree(ROOT / "sample-repo", root / "sample-repo")
        shutil.copytree(ROOT / "channels", root / "channels")
        self.repo = root / "sample-repo"
        self.clusters = root / "clusters"
        self.clusters.mkdir()  # empty recorded clusters: a --snapshot not there is refused
        self.state = ["--state", f"sqlite:///{root / 'state.db'}"]

    def run(self, *args: str, code: int = 0) -> str:
        result = CliRunner().invoke(cli, list(args))
        assert result.exit_code == code, result.output
        return result.stdout

    def document(self, *args: str, code: int = 0, output: str = "json") -> dict[str, Any]:
        text = self.run(*args, "-o", output, code=code)
        parsed: dict[str, Any] = json.loads(text) if output == "json" else yaml.safe_load(text)
        return parsed

    def synced(self) -> Fleet:
        self.run("sync", str(self.repo), "--snapshot", f"{self.clusters}/", *self.state)
        return self
