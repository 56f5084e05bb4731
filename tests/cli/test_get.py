"""``reconciler get runtimes|modules|operations``: lists with kubectl's label selectors, state
selectors, ``--module``, ``--watch``; the runtimes of git joined with the store.

Commands run on a copy of the sample fleet with snapshot clusters; ``--watch`` waits through
:data:`reconciler.cli.get.pause`, which the tests replace (no sleeping).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from reconciler.cli import cli, get
from reconciler.core.selectors import SelectorError, parse_label_selector, parse_state_selector
from reconciler.operations.store import SqliteStore
from tests.support.sample_fleet import Fleet, check_document

EU = {"region": "eu", "tier": "prod"}


@pytest.mark.parametrize(
    ("selector", "expected"),
    [
        ("region=eu", True),
        ("region==eu", True),
        ("region!=eu", False),
        ("region=eu,tier=prod", True),
        ("region=eu,tier=ops", False),
        ("tier in (prod,staging)", True),
        ("tier notin (prod,staging)", False),
        ("region", True),
        ("!region", False),
        ("!owner", True),
        ("owner!=me", True),  # kubectl: a missing label is "not equal"
    ],
)
def test_label_selectors_read_as_kubectl(selector: str, expected: bool) -> None:
    assert parse_label_selector(selector).matches(EU) is expected


@pytest.mark.parametrize("selector", ["", "region=eu,", "a in b", "=eu", "region=e u"])
def test_a_bad_label_selector_says_what_it_cannot_read(selector: str) -> None:
    with pytest.raises(SelectorError, match="label selector"):
        parse_label_selector(selector)


@pytest.mark.parametrize(
    ("selector", "ready", "error", "removed"),
    [
        ("Ready", True, False, False),
        ("error,READY", True, True, False),
        ("!ready", False, True, True),
        ("ready=false", False, True, True),
        ("ready=true", True, False, False),
        ("removed", False, False, True),
    ],
)
def test_state_selectors(selector: str, ready: bool, error: bool, removed: bool) -> None:
    chosen = parse_state_selector(selector, get.MODULE_STATES)

    assert (chosen.matches("Ready"), chosen.matches("Error"), chosen.matches(None)) == (
        ready,
        error,
        removed,
    )


def test_an_unknown_state_names_the_known_ones() -> None:
    with pytest.raises(SelectorError, match=r"no state 'Redy' \(Deleting, Error, .*Ready"):
        parse_state_selector("Redy", get.RUNTIME_STATES)


@pytest.fixture
def fleet(tmp_path: Path) -> Fleet:
    made = Fleet(tmp_path)
    clusters = f"{made.clusters}/"
    for name in ("prod-eu-1", "staging-eu", "dev-sandbox"):  # the others are never synced
        made.run("sync", str(made.repo), "--runtime", name, "--snapshot", clusters, *made.state)
    return made


def _names(output: str) -> list[str]:
    return [line.split()[0] for line in output.splitlines()[1:]]


def test_get_runtimes_joins_git_and_the_store(fleet: Fleet) -> None:
    text = fleet.run("get", "runtimes", str(fleet.repo), *fleet.state)
    stored_only = fleet.run("get", "runtimes", *fleet.state)
    document = fleet.document("get", "runtimes", str(fleet.repo), *fleet.state)

    rows = {line.split()[0]: line.split() for line in text.splitlines()[1:]}
    assert rows["prod-eu-1"][1:4] == ["Ready", "Install", "4/4"]
    assert rows["prod-us-1"][1:4] == ["NotSynced", "-", "0/5"]
    assert _names(stored_only) == ["dev-sandbox", "prod-eu-1", "staging-eu"]
    check_document(document, "RuntimeList")
    assert [i["name"] for i in document["items"] if not i["inGit"]] == []
    assert next(i for i in document["items"] if i["name"] == "prod-ap-1")["suspended"] == "git"


def test_get_runtimes_filters_by_labels_state_and_module(fleet: Fleet) -> None:
    repo = str(fleet.repo)

    eu = fleet.run("get", "runtimes", repo, "-l", "region=eu", *fleet.state)
    eu_synced = fleet.run(
        "get", "runtimes", repo, "-l", "region=eu", "--state-selector", "ready", *fleet.state
    )
    not_ready = fleet.run("get", "runtimes", repo, "--state-selector", "ready=false", *fleet.state)
    with_keda = fleet.run("get", "runtimes", repo, "--module", "keda", *fleet.state)

    assert _names(eu) == ["control-plane", "prod-eu-1", "staging-eu"]
    assert _names(eu_synced) == ["prod-eu-1", "staging-eu"]
    assert _names(not_ready) == ["control-plane", "prod-ap-1", "prod-us-1"]
    assert _names(with_keda) == ["dev-sandbox", "prod-us-1", "staging-eu"]


def test_get_modules_filters_rows(fleet: Fleet) -> None:
    serverless = fleet.run("get", "modules", "--module", "serverless", *fleet.state)
    document = fleet.document(
        "get", "modules", str(fleet.repo), "-l", "tier=prod", "--module", "istio", *fleet.state
    )
    none = fleet.run("get", "modules", "--state-selector", "error", *fleet.state)

    rows = [line.split()[:4] for line in serverless.splitlines()[1:]]
    assert rows == [
        ["dev-sandbox", "serverless", "Ready", "1.2.0"],
        ["prod-eu-1", "serverless", "Ready", "1.1.0"],
        ["staging-eu", "serverless", "Ready", "1.2.0"],
    ]
    check_document(document, "ModuleList")
    assert [(i["runtime"], i["version"]) for i in document["items"]] == [("prod-eu-1", "1.0.0")]
    assert none == ""


def test_get_modules_wide_adds_the_channel_commit_and_operation(fleet: Fleet) -> None:
    plain = fleet.run("get", "modules", "--module", "istio", *fleet.state).splitlines()
    wide = fleet.run(
        "get", "modules", str(fleet.repo), "--module", "istio", "-o", "wide", *fleet.state
    ).splitlines()

    assert wide[0].split() == [*plain[0].split(), "CHANNEL", "COMMIT", "OPERATION"]
    channels = {line.split()[0]: line.split()[-3] for line in wide[1:]}
    assert channels["prod-eu-1"] == "regular"
    assert channels["dev-sandbox"] == "experimental"


def test_get_operations_filters_by_runtime_and_state(fleet: Fleet) -> None:
    both = fleet.run(
        "get", "operations", "--runtime", "prod-eu-1", "--runtime", "dev-sandbox", *fleet.state
    )
    failed = fleet.run("get", "operations", "--state-selector", "failed", *fleet.state)
    document = fleet.document("get", "operations", "--state-selector", "succeeded", *fleet.state)

    assert sorted(line.split()[1] for line in both.splitlines()[1:]) == [
        "dev-sandbox",
        "prod-eu-1",
    ]
    assert failed == ""
    check_document(document, "OperationList")
    assert len(document["items"]) == 3


def test_o_name_prints_kind_slash_name_as_kubectl(fleet: Fleet) -> None:
    runtimes = fleet.run("get", "runtimes", "-o", "name", *fleet.state)
    modules = fleet.run("get", "modules", "--module", "serverless", "-o", "name", *fleet.state)
    operations = fleet.run(
        "get", "operations", "--runtime", "prod-eu-1", "-o", "name", *fleet.state
    )
    listed = fleet.document("get", "operations", "--runtime", "prod-eu-1", *fleet.state)

    assert runtimes.splitlines() == [
        "runtime/dev-sandbox",
        "runtime/prod-eu-1",
        "runtime/staging-eu",
    ]
    assert modules.splitlines() == [
        "module/dev-sandbox/serverless",
        "module/prod-eu-1/serverless",
        "module/staging-eu/serverless",
    ]
    assert operations.splitlines() == [f"operation/{i['id']}" for i in listed["items"]]


def test_watch_prints_each_row_that_changes_until_ctrl_c(
    fleet: Fleet, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = SqliteStore(fleet.root / "state.db")
    looks: list[float] = []

    def pause(seconds: float) -> None:
        looks.append(seconds)
        if len(looks) == 2:  # between the second and third look, a runtime is suspended
            from reconciler.cli.clusters import now
            from reconciler.operations.model import Suspension

            store.suspend(Suspension("prod-eu-1", now(), "incident"))
        if len(looks) == 4:
            raise KeyboardInterrupt

    monkeypatch.setattr(get, "pause", pause)
    result = CliRunner().invoke(
        cli, ["get", "runtimes", "--watch", "--interval", "5s", *fleet.state]
    )

    lines = result.stdout.splitlines()
    assert result.exit_code == 130
    assert looks == [5.0] * 4
    assert lines[0].split()[0] == "NAME"
    assert _names("\n".join(lines[:4])) == ["dev-sandbox", "prod-eu-1", "staging-eu"]
    assert len(lines) == 5  # the table, then the one row that changed, once
    assert lines[4].split()[:5] == ["prod-eu-1", "Suspended", "Suspended", "4/4", "store"]
    # under its header, or pushed right by the longer cells before it (as kubectl's --watch)
    assert lines[4].index("store") - lines[0].index("SUSPENDED") in range(0, 5)


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["get", "runtimes", "-l", "region=eu"], "name the config repo"),
        (["get", "runtimes", "--state-selector", "nope"], "no state 'nope'"),
        (["get", "modules", "-l", "a in b", "."], "cannot read 'a in b'"),
        (["get", "runtimes", "--watch", "-o", "json"], "--watch prints rows"),
        (["get", "operations", "--interval", "0s", "--watch"], "--interval"),
        (["get", "nodes"], "No such command 'nodes'"),
    ],
)
def test_bad_get_command_lines_are_one_line_and_exit_2(args: list[str], says: str) -> None:
    result = CliRunner().invoke(cli, args)

    assert result.exit_code == 2, result.output
    assert says in result.output
    assert len(result.output.strip().splitlines()) == 1


def test_get_on_a_store_that_does_not_exist_finds_nothing(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'none.db'}"
    result = CliRunner().invoke(cli, ["get", "runtimes", "--state", url])
    document: dict[str, Any] = json.loads(
        CliRunner().invoke(cli, ["get", "modules", "--state", url, "-o", "json"]).stdout
    )

    assert result.exit_code == 0
    assert result.output == "nothing found\n"
    assert document["items"] == []
    assert not (tmp_path / "none.db").exists()
