"""`reconciler diff --base`: the fleet-wide plan of a pull request, on real git histories.

Each test builds a git repository in a temporary folder (a config repo in `fleet/`, channels in
`channels/` beside it, as in the project), commits a base, changes files as a pull request
would, and runs the command against the working tree (or a second commit).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result
from markdown_it import MarkdownIt

from reconciler.cli import cli
from reconciler.cli.report import MARKDOWN_LIMIT
from tests.support.fleet_history import (
    BASE_FILES,
    channel_yaml,
    git,
    module_yaml,
    runtime_yaml,
    write_tree,
)


@pytest.fixture
def history(tmp_path: Path) -> Path:
    """A git repository whose HEAD is the base fleet."""
    write_tree(tmp_path, dict(BASE_FILES))
    git(tmp_path, "init", "-q")
    git(tmp_path, "add", "-A")
    git(tmp_path, "commit", "-qm", "base")
    return tmp_path


def _diff(root: Path, *args: str) -> Result:
    return CliRunner().invoke(cli, ["diff", str(root / "fleet"), "--base", "HEAD", *args])


def _json(root: Path, *args: str) -> dict[str, Any]:
    result = _diff(root, "--format", "json", *args)
    assert result.exit_code in (0, 1, 3), result.output
    report: dict[str, Any] = json.loads(result.stdout)
    return report


def _changes(report: dict[str, Any]) -> dict[tuple[str, str], dict[str, Any]]:
    runtimes = report["runtimes"]
    return {(r["runtime"], m["module"]): m for r in runtimes for m in r["modules"]}


def _causes(change: dict[str, Any]) -> list[str]:
    causes = change["causes"]
    return [f"{c['path']}: {c['field']}" for c in causes]


def test_no_change(history: Path) -> None:
    result = _diff(history)

    assert result.exit_code == 0
    assert "no changes (3 runtimes)" in result.stdout


def test_channel_bump(history: Path) -> None:
    write_tree(
        history,
        {
            "channels/regular.yaml": channel_yaml(
                "regular", {"widget": "2.0.0", "gadget": "1.0.0", "mesh": "1.0.0"}
            )
        },
    )

    result = _diff(history)
    report = _json(history)

    assert result.exit_code == 1
    assert "widget 1.0.0 -> 2.0.0 upgrade on 2 runtimes: 2 now" in result.stdout
    changes = _changes(report)
    assert set(changes) == {("a", "widget"), ("b", "widget")}
    change = changes[("a", "widget")]
    assert (change["action"], change["outcome"]) == ("upgrade", "now")
    assert _causes(change) == [f"{history}/channels/regular.yaml: spec.modules.widget"]
    deleted = [c["subject"] for c in change["changes"] if c["action"] == "delete"]
    assert deleted == ["ConfigMap/widget-system/widget-extra"]  # pruned: 2.0.0 lacks it


def test_runtime_channel_switch(history: Path) -> None:
    write_tree(
        history,
        {"fleet/runtimes/a.yaml": runtime_yaml("a", "fast", "[{name: widget}, {name: gadget}]")},
    )

    changes = _changes(_json(history))

    assert set(changes) == {("a", "widget")}
    assert _causes(changes[("a", "widget")]) == [f"{history}/fleet/runtimes/a.yaml: spec.channel"]


def test_pin(history: Path) -> None:
    write_tree(
        history,
        {
            "fleet/runtimes/b.yaml": runtime_yaml(
                "b", "regular", "[{name: widget, version: 2.0.0}, {name: gadget, strategy: Ignore}]"
            )
        },
    )

    changes = _changes(_json(history))

    assert _causes(changes[("b", "widget")]) == [
        f"{history}/fleet/runtimes/b.yaml: spec.modules[0].version"
    ]


@pytest.mark.parametrize(
    ("runtime", "action", "code"), [("a", "remove-delete", 3), ("b", "remove-ignore", 1)]
)
def test_module_removal_by_strategy(history: Path, runtime: str, action: str, code: int) -> None:
    strategy = "" if runtime == "a" else ", strategy: Ignore"
    write_tree(
        history,
        {f"fleet/runtimes/{runtime}.yaml": runtime_yaml(runtime, "regular", "[{name: widget}]")},
    )
    del strategy

    result = _diff(history)
    change = _changes(_json(history))[(runtime, "gadget")]

    assert result.exit_code == code
    assert change["action"] == action
    assert _causes(change) == [
        f"{history}/fleet/runtimes/{runtime}.yaml: spec.modules (entry removed)"
    ]


def test_new_and_removed_runtimes(history: Path) -> None:
    write_tree(
        history,
        {
            "fleet/runtimes/d.yaml": runtime_yaml("d", "regular", "[{name: gadget}]"),
            "fleet/runtimes/c.yaml": None,
        },
    )

    result = _diff(history)
    report = _json(history)

    assert result.exit_code == 3  # a runtime is removed
    runtimes = {r["runtime"]: r for r in report["runtimes"]}
    assert runtimes["d"]["status"] == "added"
    assert runtimes["c"]["status"] == "removed"
    changes = _changes(report)
    assert changes[("d", "gadget")]["action"] == "install"
    assert _causes(changes[("d", "gadget")]) == [f"{history}/fleet/runtimes/d.yaml: (new runtime)"]
    assert changes[("c", "widget")]["action"] == "remove-delete"
    assert _causes(changes[("c", "widget")]) == [
        f"{history}/fleet/runtimes/c.yaml: (runtime removed)"
    ]
    assert report["counts"] == {
        "runtimesAdded": 1,
        "runtimesChanged": 2,
        "runtimesRemoved": 1,
        "runtimesUnchanged": 2,
    }


def test_dependency_added(history: Path) -> None:
    write_tree(
        history,
        {"fleet/modules/gadget/module.yaml": module_yaml("gadget", "  dependsOn: [mesh]\n")},
    )

    result = _diff(history)
    changes = _changes(_json(history))

    assert "mesh 1.0.0 install on 2 runtimes: 2 now" in result.stdout
    assert set(changes) == {("a", "mesh"), ("b", "mesh")}
    assert _causes(changes[("a", "mesh")]) == [
        f"{history}/fleet/modules/gadget/module.yaml: spec.dependsOn"
    ]


def test_lower_version_is_held_as_a_downgrade(history: Path) -> None:
    write_tree(
        history,
        {
            "channels/fast.yaml": channel_yaml(
                "fast", {"widget": "1.0.0", "gadget": "1.0.0", "mesh": "1.0.0"}
            )
        },
    )

    result = _diff(history)

    assert result.exit_code == 3
    assert "widget 2.0.0 -> 1.0.0 downgrade on 1 runtime: 1 held: downgrade" in result.stdout


def test_invalid_head_is_an_error_naming_the_file(history: Path) -> None:
    write_tree(history, {"fleet/runtimes/a.yaml": runtime_yaml("a", "reguler", "[{name: widget}]")})

    result = _diff(history)

    assert result.exit_code == 2
    assert (
        "fleet/runtimes/a.yaml:5:12: C2 channel 'reguler' does not exist; did you mean 'regular'?"
        in result.stderr
    )
    assert "the config repo at head (working tree) is invalid" in result.stderr


def test_unknown_revision_is_an_error(history: Path) -> None:
    result = CliRunner().invoke(cli, ["diff", str(history / "fleet"), "--base", "nope"])

    assert result.exit_code == 2
    assert "unknown revision 'nope'" in result.stderr


def test_a_missing_git_is_one_line_saying_so(
    history: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path / "no-git-here"))

    result = CliRunner().invoke(cli, ["diff", str(history / "fleet"), "--base", "HEAD"])

    assert result.exit_code == 2
    assert result.stderr == "error: the git command was not found: install git, or put it on PATH\n"


def test_two_commits_and_a_base_folder(history: Path, tmp_path: Path) -> None:
    write_tree(
        history,
        {
            "channels/regular.yaml": channel_yaml(
                "regular", {"widget": "2.0.0", "gadget": "1.0.0", "mesh": "1.0.0"}
            )
        },
    )
    git(history, "commit", "-qam", "bump")
    checkout = tmp_path / "base-checkout"
    git(history, "worktree", "add", "-q", str(checkout), "HEAD~1")

    by_revision = CliRunner().invoke(
        cli, ["diff", str(history / "fleet"), "--base", "HEAD~1", "--head", "HEAD"]
    )
    by_folder = CliRunner().invoke(
        cli, ["diff", str(history / "fleet"), "--base-path", str(checkout / "fleet")]
    )

    assert by_revision.exit_code == by_folder.exit_code == 1
    assert "widget 1.0.0 -> 2.0.0 upgrade on 2 runtimes: 2 now" in by_revision.stdout
    assert "widget 1.0.0 -> 2.0.0 upgrade on 2 runtimes: 2 now" in by_folder.stdout


def test_output_is_byte_identical_across_runs(history: Path) -> None:
    write_tree(
        history,
        {
            "channels/regular.yaml": channel_yaml(
                "regular", {"widget": "2.0.0", "gadget": "1.0.0", "mesh": "1.0.0"}
            )
        },
    )
    args = ("--now", "2026-11-20T10:00", "--details")

    outputs = {
        (fmt, _diff(history, "--format", fmt, *args).stdout)
        for fmt in ("text", "json", "markdown")
        for _ in range(2)
    }

    assert len(outputs) == 3


def test_markdown_renders_and_stays_under_the_limit(history: Path) -> None:
    runtimes = {
        f"fleet/runtimes/r{i:04d}.yaml": runtime_yaml(
            f"r{i:04d}", "regular", "[{name: widget}, {name: gadget}]"
        )
        for i in range(1500)
    }
    write_tree(history, runtimes)
    git(history, "add", "-A")
    git(history, "commit", "-qm", "many runtimes")
    write_tree(
        history,
        {
            "channels/regular.yaml": channel_yaml(
                "regular", {"widget": "2.0.0", "gadget": "1.0.0", "mesh": "1.0.0"}
            )
        },
    )

    markdown = _diff(history, "--format", "markdown").stdout
    html = MarkdownIt("commonmark", {"html": True}).enable("table").render(markdown)

    assert len(markdown) < MARKDOWN_LIMIT + 1000 < 65_000
    assert "<table>" in html
    assert "<td>widget</td>" in html
    assert "<details><summary>a (regular): changed, 1 module change(s)</summary>" in html
    assert "more changed runtime(s) not shown" in markdown
    assert "1502 runtimes change" in markdown


def test_live_view_from_snapshots(history: Path, tmp_path: Path) -> None:
    clusters = tmp_path / "clusters"
    runner = CliRunner()
    assert (
        runner.invoke(
            cli, ["sync", str(history / "fleet"), "--snapshot", f"{clusters}/", "--snapshot-create"]
        ).exit_code
        == 0
    )
    write_tree(history, {"fleet/runtimes/a.yaml": runtime_yaml("a", "regular", "[{name: widget}]")})
    gadget = "apiVersion: example.io/v1\nkind: Gadget\n"
    gadget += "metadata: {name: mine, namespace: gadget-system}\n"
    with (clusters / "a.yaml").open("a") as snapshot:
        snapshot.write("---\n" + gadget)

    result = _diff(history, "--snapshot", f"{clusters}/")

    assert result.exit_code == 3
    assert "held: deletion blocked" in result.stdout
    assert "Gadget/gadget-system/mine" in result.stdout


def test_an_in_sync_snapshot_shows_no_change_as_the_ci_recipe_runs_it(
    history: Path, tmp_path: Path
) -> None:
    """docs/ci-recipes.md: ``diff --base HEAD --snapshot clusters/`` right after a sync, with
    nothing changed in git: every runtime is unchanged (its objects are compared as sync
    applies them, with the runtime's label and enforced configuration); then a channel bump
    is the only change."""
    clusters = tmp_path / "clusters"
    synced = CliRunner().invoke(
        cli, ["sync", str(history / "fleet"), "--snapshot", f"{clusters}/", "--snapshot-create"]
    )
    assert synced.exit_code == 0, synced.output

    result = _diff(history, "--snapshot", f"{clusters}/")
    assert result.exit_code == 0, result.output
    assert "no changes (3 runtimes)" in result.stdout

    bump = {"widget": "2.0.0", "gadget": "1.0.0", "mesh": "1.0.0"}
    write_tree(history, {"channels/regular.yaml": channel_yaml("regular", bump)})
    report = _json(history, "--snapshot", f"{clusters}/")
    assert {(r, m) for r, m in _changes(report)} == {(runtime, "widget") for runtime in ("a", "b")}


def test_each_blob_is_parsed_once_and_each_situation_planned_once(tmp_path: Path) -> None:
    from datetime import UTC, datetime

    from reconciler.review.fleet import Review, Side
    from reconciler.source.loader import ReadOptions
    from tests.support.fleet_generator import generate_fleet

    generate_fleet(tmp_path, runtimes=300, modules=6, versions=2)
    git(tmp_path, "init", "-q")
    git(tmp_path, "add", "-A")
    git(tmp_path, "commit", "-qm", "fleet")
    channel = tmp_path / "channels" / "regular.yaml"
    channel.write_text(channel.read_text().replace("mod-03: 1.0.0", "mod-03: 1.1.0"))
    files = len([p for p in tmp_path.rglob("*.yaml") if ".git" not in p.parts])

    review = Review(ReadOptions())
    base = review.load(Side(tmp_path, "HEAD"), "base")
    head = review.load(Side(tmp_path), "head")
    # working-tree files get the id git would give them: unchanged ones are not parsed again
    assert len(review.cache) == files + 1
    both = Review(ReadOptions())
    both.load(Side(tmp_path, "HEAD"), "base")
    git(tmp_path, "commit", "-qam", "bump")
    both.load(Side(tmp_path, "HEAD"), "head")
    assert len(both.cache) == files + 1  # only the changed channel is parsed again

    from reconciler.core.fleetdiff import FleetDiffer

    differ = FleetDiffer(base[0], head[0], datetime(2026, 11, 20, 10, tzinfo=UTC))
    diff = differ.diff()
    upgraded = sum(1 for r in diff.runtimes for m in r.modules if m.module == "mod-03")
    assert upgraded > 20
    windows = {r.maintenance_window for r in head[0].runtimes.values()}
    assert differ.planned_situations <= len(windows)


def _policy_committed(history: Path, rollout: str) -> None:
    """Commit Settings with ``rollout`` (the YAML under ``spec.rollout``) and runtime ``a``
    labelled ``tier: dev``; then bump widget to 2.0.0 in the working tree."""
    settings = BASE_FILES["fleet/reconciler.yaml"].replace(
        "spec: {channelsFrom: {path: ../channels}}",
        f"spec:\n  channelsFrom: {{path: ../channels}}\n  rollout:\n{rollout}",
    )
    labelled = runtime_yaml("a", "regular", "[{name: widget}, {name: gadget}]").replace(
        "metadata: {name: a}", "metadata: {name: a, labels: {tier: dev}}"
    )
    write_tree(history, {"fleet/reconciler.yaml": settings, "fleet/runtimes/a.yaml": labelled})
    git(history, "add", "-A")
    git(history, "commit", "-qm", "policy")
    write_tree(
        history,
        {"channels/regular.yaml": channel_yaml("regular", {"widget": "2.0.0", "gadget": "1.0.0"})},
    )


def test_the_diff_shows_the_waves_a_rollout_policy_would_make(history: Path) -> None:
    _policy_committed(
        history,
        "    waves: [{name: canary, selector: tier=dev}, {name: everyone}]\n    healthyFor: 1h\n",
    )

    result = _diff(history)

    assert result.exit_code == 1, result.output
    assert result.output.endswith(
        "rollout waves (spec.rollout, each healthy for 1h):\n"
        "  1. canary (tier=dev): 1 runtime(s): a\n"
        "  2. everyone (the rest): 1 runtime(s): b\n"
    )


def test_the_diff_shows_the_waves_in_force_when_the_head_drops_its_policy(history: Path) -> None:
    _policy_committed(
        history, "    waves: [{name: first, selector: 'tier in (dev)'}, {name: everyone}]\n"
    )
    write_tree(history, {"fleet/reconciler.yaml": BASE_FILES["fleet/reconciler.yaml"]})

    result = _diff(history)

    assert result.exit_code == 1, result.output
    assert result.output.endswith(
        "rollout waves (spec.rollout in force at the base, each healthy for 10m):\n"
        "  1. first (tier in (dev)): 1 runtime(s): a\n"
        "  2. everyone (the rest): 1 runtime(s): b\n"
        "  (the head's own spec.rollout applies to the rollouts after this one)\n"
    )
