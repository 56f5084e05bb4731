"""Fleet safety through the CLI: a folder that is not a config repo changes nothing, the deletion
brake holds every path that deletes, deletions are shown before they happen, and rehearsals on
snapshot clusters never mix with real runs.

The sample fleet (six runtimes, ``maxDeletionsPerSync: 3``) is synced once onto snapshot clusters
(a module fixture); each test works on its own copy of that synced fleet.
"""

from __future__ import annotations

import json
import shutil
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from reconciler.cli import cli
from reconciler.cli.progress import ANNOUNCED_FROM
from reconciler.cluster.api import ClusterIdentity
from reconciler.cluster.memory import InMemoryCluster
from reconciler.cluster.snapshot import load_snapshot
from reconciler.operations.engine import Engine
from reconciler.operations.model import OperationState, OperationType, StepState
from reconciler.operations.runner import Runner
from reconciler.operations.store import SqliteStore
from reconciler.render import default_renderer
from reconciler.source.loader import load_repo
from tests.support.fleet_generator import generate_fleet

PROJECT = Path(__file__).resolve().parents[2]
MANAGED = ("app.kubernetes.io/managed-by", "reconciler")


@dataclass
class Synced:
    """A copy of the sample fleet, synced onto snapshot clusters with its own state store."""

    root: Path

    @property
    def repo(self) -> Path:
        return self.root / "repo"

    @property
    def clusters(self) -> Path:
        return self.root / "clusters"

    @property
    def state(self) -> str:
        return f"sqlite:///{self.root / 'state.db'}"

    def run(self, *args: str) -> Result:
        return CliRunner().invoke(cli, list(args), catch_exceptions=False)

    def sync(self, *args: str) -> Result:
        return self.run(
            "sync", str(self.repo), "--snapshot", f"{self.clusters}/", "--state", self.state, *args
        )

    def known(self) -> list[str]:
        return [r.runtime for r in SqliteStore(self.root / "state.db").runtimes()]

    def snapshots(self) -> dict[str, bytes]:
        return {p.name: p.read_bytes() for p in sorted(self.clusters.glob("*.yaml"))}

    def remove(self, names: Sequence[str]) -> None:
        for name in names:
            (self.repo / "runtimes" / f"{name}.yaml").unlink()


@pytest.fixture(scope="module")
def synced_once(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The sample fleet synced once onto snapshot clusters, shared by the module's tests (about
    4 s: six runtimes provisioned through the command line); each test copies it."""
    root = tmp_path_factory.mktemp("fleet")
    shutil.copytree(PROJECT / "sample-repo", root / "repo")
    shutil.copytree(PROJECT / "channels", root / "channels")
    fleet = Synced(root)
    done = fleet.sync("--snapshot-create")
    assert done.exit_code == 0, done.output
    assert len(fleet.known()) == 6
    return root


@pytest.fixture
def fleet(synced_once: Path, tmp_path: Path) -> Synced:
    shutil.copytree(synced_once, tmp_path / "fleet")
    return Synced(tmp_path / "fleet")


REMOVED = ("prod-ap-1", "prod-eu-1", "prod-us-1", "staging-eu")

# -- a config repo must look like one ------------------------------------------------------------


def _not_a_repo(kind: str, root: Path) -> Path:
    folder = root / kind
    folder.mkdir()
    if kind == "not-config":
        (folder / "README.md").write_text("# my project\n")
        (folder / "src").mkdir()
    if kind == "no-runtimes":
        shutil.copy(PROJECT / "sample-repo" / "reconciler.yaml", folder / "reconciler.yaml")
        shutil.copytree(PROJECT / "sample-repo" / "modules", folder / "modules")
    return folder


@pytest.mark.parametrize("kind", ["empty", "not-config", "no-runtimes"])
def test_a_folder_that_is_not_a_config_repo_changes_nothing(fleet: Synced, kind: str) -> None:
    folder = _not_a_repo(kind, fleet.root)
    before = fleet.snapshots()
    snapshot = ["--snapshot", f"{fleet.clusters}/", "--state", fleet.state]
    commands = [
        ["validate", str(folder)],
        ["render", str(folder), "--runtime", "prod-eu-1"],
        ["diff", str(folder), *snapshot],
        ["sync", str(folder), "--dry-run", *snapshot],
        ["sync", str(folder), *snapshot],
    ]
    for command in commands:
        result = fleet.run(*command)
        assert result.exit_code == 2, (command, result.output)
        lines = result.output.strip().splitlines()
        assert len(lines) == 1, (command, result.output)
        assert lines[0].startswith(f"error: {folder}: not a config repo: no runtimes/ folder")
    assert fleet.snapshots() == before
    assert len(fleet.known()) == 6


# -- the deletion brake on the CLI ---------------------------------------------------------------


def test_the_brake_holds_four_removals_over_a_limit_of_three(fleet: Synced) -> None:
    before = fleet.snapshots()
    fleet.remove(REMOVED)

    held = fleet.sync()

    assert held.exit_code == 3, held.output
    assert "deletion brake: held: 4 deletion(s), limit 3" in held.output
    assert "--allow-deletions 4" in held.output
    assert fleet.snapshots() == before
    assert len(fleet.known()) == 6
    assert fleet.sync("--allow-deletions", "3").exit_code == 3
    assert fleet.snapshots() == before

    allowed = fleet.sync("--allow-deletions", "4")

    assert allowed.exit_code == 0, allowed.output
    assert sorted(fleet.known()) == ["control-plane", "dev-sandbox"]
    for name in REMOVED:
        assert not _managed(fleet.clusters / f"{name}.yaml")
    assert _managed(fleet.clusters / "dev-sandbox.yaml")


def _managed(snapshot: Path) -> list[str]:
    """The objects of ``snapshot`` that the reconciler manages."""
    key, value = MANAGED
    objects = load_snapshot(snapshot).objects()
    return [
        o["metadata"]["name"] for o in objects if o["metadata"].get("labels", {}).get(key) == value
    ]


def test_the_brake_passes_the_runtimes_named(fleet: Synced) -> None:
    fleet.remove(REMOVED)

    assert (
        fleet.sync("--allow-deletions", "prod-ap-1", "--allow-deletions", "prod-eu-1").exit_code
        == 3
    )
    allowed = fleet.sync(*[a for name in REMOVED for a in ("--allow-deletions", name)])

    assert allowed.exit_code == 0, allowed.output
    assert sorted(fleet.known()) == ["control-plane", "dev-sandbox"]


def test_removing_every_runtime_is_held_even_when_the_setting_allows_deletions(
    fleet: Synced,
) -> None:
    settings = fleet.repo / "reconciler.yaml"
    settings.write_text(settings.read_text().replace("maxDeletionsPerSync: 3", "allow: true"))
    fleet.remove([*REMOVED, "control-plane", "dev-sandbox"])
    before = fleet.snapshots()

    held = fleet.sync()

    assert held.exit_code == 3, held.output
    assert "removes every runtime (6 deletions)" in held.output
    assert fleet.snapshots() == before


def test_module_removals_count_for_the_brake(fleet: Synced) -> None:
    for name in ("prod-eu-1", "prod-us-1"):
        runtime = fleet.repo / "runtimes" / f"{name}.yaml"
        text = runtime.read_text()
        runtime.write_text(text[: text.index("  modules:")] + "  modules: []\n")

    held = fleet.sync("--dry-run")

    assert held.exit_code == 3, held.output
    assert "module prod-eu-1/serverless" in held.output
    assert "module prod-us-1/serverless" in held.output


@pytest.mark.parametrize(
    "loosened", ["maxDeletionsPerSync: 10", "allow: true"], ids=["raised limit", "allow: true"]
)
def test_a_repo_that_loosens_the_brake_is_judged_by_the_limits_in_force(
    fleet: Synced, loosened: str
) -> None:
    """The limit is the stricter of the repo's and the one the last sync of the whole fleet went
    ahead under (3), so a change cannot lift its own brake."""
    settings = fleet.repo / "reconciler.yaml"
    settings.write_text(settings.read_text().replace("maxDeletionsPerSync: 3", loosened))
    fleet.remove(REMOVED)
    before = fleet.snapshots()

    held = fleet.sync()

    assert held.exit_code == 3, held.output
    assert "deletion brake: held: 4 deletion(s), limit 3" in held.output
    assert "applies once it is accepted" in held.output
    assert fleet.snapshots() == before
    assert len(fleet.known()) == 6


def test_a_raised_limit_applies_from_the_sync_after_it(fleet: Synced) -> None:
    """The way to raise it: a sync of the whole fleet with the raised limit alone, then the
    removals."""
    settings = fleet.repo / "reconciler.yaml"
    settings.write_text(
        settings.read_text().replace("maxDeletionsPerSync: 3", "maxDeletionsPerSync: 4")
    )
    assert fleet.sync().exit_code == 0
    fleet.remove(REMOVED)

    done = fleet.sync()

    assert done.exit_code == 0, done.output
    assert sorted(fleet.known()) == ["control-plane", "dev-sandbox"]


class _Opened:
    """The files opened while :attr:`on` (an audit hook: what the process really opened)."""

    on = False
    paths: list[str] = []  # noqa: RUF012 (one list, the hook's)

    @classmethod
    def hook(cls, event: str, args: tuple[object, ...]) -> None:
        if cls.on and event == "open" and isinstance(args[0], str | Path):
            cls.paths.append(str(args[0]))


sys.addaudithook(_Opened.hook)  # hooks stay for the process: this one records only when on


def _snapshots_read(fleet: Synced, *args: str) -> tuple[Result, set[str]]:
    """``sync ARGS`` and the names of the snapshot files it opened."""
    _Opened.paths.clear()
    _Opened.on = True
    try:
        result = fleet.sync(*args)
    finally:
        _Opened.on = False
    folder = str(fleet.clusters)
    return result, {Path(p).name for p in _Opened.paths if p.startswith(folder)}


def test_a_sync_of_one_runtime_reads_only_its_snapshot(fleet: Synced) -> None:
    """The brake's count for ``sync --runtime X`` reads X's cluster alone (what that run can
    delete), never the rest of the fleet's; a sync of the whole fleet reads every one."""
    done, read = _snapshots_read(fleet, "--runtime", "prod-eu-1")

    assert done.exit_code == 0, done.output
    assert {n for n in read if n.endswith(".yaml")} == {"prod-eu-1.yaml"}
    everything, read = _snapshots_read(fleet)
    assert everything.exit_code == 0, everything.output
    assert {n for n in read if n.endswith(".yaml")} == set(fleet.snapshots())


def test_the_brake_counts_what_the_runtime_synced_can_delete(fleet: Synced) -> None:
    """With a store that knows nothing, ``sync --runtime X`` is held by what X's inventory
    says it would delete, and a sync of another runtime is not held by X's."""
    settings = fleet.repo / "reconciler.yaml"
    settings.write_text(
        settings.read_text().replace("maxDeletionsPerSync: 3", "maxDeletionsPerSync: 0")
    )
    _without_modules(fleet, ["prod-eu-1"])
    before = fleet.snapshots()
    new_store = ("--state", f"sqlite:///{fleet.root / 'new-state.db'}")
    synced = ("sync", str(fleet.repo), "--snapshot", f"{fleet.clusters}/", *new_store)

    held = fleet.run(*synced, "--runtime", "prod-eu-1")

    assert held.exit_code == 3, held.output
    assert "module prod-eu-1/serverless" in held.output
    assert fleet.snapshots() == before
    other = fleet.run(*synced, "--runtime", "dev-sandbox")
    assert other.exit_code == 0, other.output


def test_a_large_sync_says_first_that_it_reads_the_repo_and_the_fleet(tmp_path: Path) -> None:
    """Before a large repo is read and validated, and before the brake reads its clusters
    (each seconds at thousands), the run says so on standard error: its first line comes at
    once; a run of one runtime reads no other cluster, and says so of the repo alone."""
    generate_fleet(tmp_path / "repo", ANNOUNCED_FROM, modules=2, versions=1)
    clusters = f"{tmp_path / 'clusters'}/"
    args = ["sync", str(tmp_path / "repo"), "--snapshot", clusters, "--snapshot-create"]

    planned = CliRunner().invoke(cli, [*args, "--dry-run"], catch_exceptions=False)

    assert planned.exit_code == 0, planned.output
    repo_line = f"reading and validating the {ANNOUNCED_FROM} runtimes of {tmp_path / 'repo'}"
    brake_line = f"deletion brake: reading the inventories of {ANNOUNCED_FROM} runtimes"
    assert planned.stderr.splitlines()[:2] == [repo_line, brake_line]
    one = CliRunner().invoke(cli, [*args, "--dry-run", "--runtime", "rt-00001"])
    assert one.exit_code == 0, one.output
    assert one.stderr.splitlines()[0] == repo_line
    assert "deletion brake: reading" not in one.stderr


def test_a_small_sync_says_nothing_before_its_results(tmp_path: Path) -> None:
    generate_fleet(tmp_path / "repo", ANNOUNCED_FROM - 1, modules=2, versions=1)
    clusters = f"{tmp_path / 'clusters'}/"
    args = ["sync", str(tmp_path / "repo"), "--snapshot", clusters, "--snapshot-create"]

    planned = CliRunner().invoke(cli, [*args, "--dry-run"], catch_exceptions=False)

    assert planned.exit_code == 0, planned.output
    assert "reading" not in planned.stderr


def _without_modules(fleet: Synced, names: Sequence[str]) -> None:
    for name in names:
        runtime = fleet.repo / "runtimes" / f"{name}.yaml"
        text = runtime.read_text()
        runtime.write_text(text[: text.index("  modules:")] + "  modules: []\n")


def test_a_new_state_store_counts_what_the_clusters_inventories_hold(fleet: Synced) -> None:
    """A store that knows nothing (lost, truncated, a move to another database) does not make the
    brake count nothing: the inventories in the clusters list every module a sync would remove."""
    _without_modules(fleet, ["prod-eu-1", "prod-us-1"])
    before = fleet.snapshots()
    new_store = f"sqlite:///{fleet.root / 'new-state.db'}"

    held = fleet.run(
        "sync", str(fleet.repo), "--snapshot", f"{fleet.clusters}/", "--state", new_store
    )

    assert held.exit_code == 3, held.output
    assert "deletion brake: held:" in held.output
    assert "module prod-eu-1/serverless" in held.output
    assert "module prod-us-1/serverless" in held.output
    assert fleet.snapshots() == before


def test_with_no_limits_recorded_a_repo_cannot_raise_the_default(fleet: Synced) -> None:
    """A store with no sync of the whole fleet recorded judges by the stricter of the repo's
    limits and the defaults (5, no allow)."""
    settings = fleet.repo / "reconciler.yaml"
    settings.write_text(settings.read_text().replace("maxDeletionsPerSync: 3", "allow: true"))
    _without_modules(fleet, ["prod-eu-1", "prod-us-1"])
    new_store = f"sqlite:///{fleet.root / 'new-state.db'}"

    held = fleet.run(
        "sync",
        str(fleet.repo),
        "--dry-run",
        "--snapshot",
        f"{fleet.clusters}/",
        "--state",
        new_store,
    )

    assert held.exit_code == 3, held.output
    assert ", limit 5: " in held.output


# -- deletions are shown before they happen ------------------------------------------------------


def test_diff_and_dry_run_list_deprovisions_with_the_brake_verdict(fleet: Synced) -> None:
    before = fleet.snapshots()
    fleet.remove(REMOVED[:2])
    snapshot = ["--snapshot", f"{fleet.clusters}/", "--state", fleet.state]

    shown = fleet.run("diff", str(fleet.repo), *snapshot)
    rehearsed = fleet.run("sync", str(fleet.repo), "--dry-run", *snapshot)
    document = json.loads(fleet.run("diff", str(fleet.repo), *snapshot, "--format", "json").output)

    assert shown.exit_code == 1, shown.output
    for output in (shown.output, rehearsed.output):
        assert "runtime prod-ap-1: deprovision (left git): " in output
        assert "runtime prod-eu-1: deprovision (left git): " in output
        assert "deletion brake: within the limit: 2 deletion(s), limit 3" in output
    assert rehearsed.exit_code == 0
    deprovisions = [r["runtime"] for r in document["runtimes"] if r["deprovision"]]
    assert deprovisions == ["prod-ap-1", "prod-eu-1"]
    assert document["deletionBrake"]["runtimes"] == ["prod-ap-1", "prod-eu-1"]
    assert not document["deletionBrake"]["held"]
    assert fleet.snapshots() == before

    fleet.remove(REMOVED[2:])
    assert fleet.run("diff", str(fleet.repo), *snapshot).exit_code == 3
    assert fleet.run("sync", str(fleet.repo), "--dry-run", *snapshot).exit_code == 3
    assert fleet.snapshots() == before


# -- rehearsal and reality never mix -------------------------------------------------------------


def test_a_rehearsal_keeps_a_store_of_its_own(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("RECONCILER_STATE")
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "xdg"))
    clusters = tmp_path / "clusters"

    result = CliRunner().invoke(
        cli,
        [
            "sync",
            str(PROJECT / "sample-repo"),
            "--runtime",
            "dev-sandbox",
            "--snapshot",
            f"{clusters}/",
            "--snapshot-create",
        ],
        catch_exceptions=False,
    )

    assert result.exit_code == 0, result.output
    own = SqliteStore(clusters / "reconciler-state.db")
    assert [r.runtime for r in own.runtimes()] == ["dev-sandbox"]
    assert (
        own.runtimes()[0].access.describe()
        == f"snapshot {(clusters / 'dev-sandbox.yaml').resolve()}"
    )
    assert not (tmp_path / "xdg" / "reconciler" / "state.db").exists()


class _Located(InMemoryCluster):
    """An in-memory cluster that says where it lives, as real and snapshot clusters do."""

    def __init__(self, identity: str) -> None:
        super().__init__(identity=ClusterIdentity.parse(identity))


@pytest.mark.parametrize(
    ("synced", "later"),
    [
        ("server https://10.0.0.1:6443", "snapshot /tmp/x.yaml"),
        ("snapshot /tmp/x.yaml", "server https://10.0.0.1:6443"),
        ("server https://10.0.0.1:6443", "server https://10.9.9.9:6443"),
    ],
)
def test_a_runtime_is_never_deprovisioned_through_another_access(
    tmp_path: Path, synced: str, later: str
) -> None:
    sample = load_repo(PROJECT / "sample-repo", renderer=default_renderer()).repo
    assert sample is not None
    store = SqliteStore(tmp_path / "state.db")
    real, rehearsal = _Located(synced), _Located(later)

    def runner(cluster: InMemoryCluster, repo: object, allow: bool = False) -> Runner:
        engine = Engine(store, clock=lambda: datetime.now(UTC), plugins=[])
        return Runner(
            store,
            engine,
            repo,  # type: ignore[arg-type]
            lambda access, name: cluster,
            lambda: datetime.now(UTC),
            allow_access_change=allow,
        )

    first = runner(real, sample)
    assert first.run(first.operation_for("dev-sandbox")).operation.state is OperationState.SUCCEEDED
    objects = len(real.snapshot())
    gone = type(sample)(sample.settings, {}, sample.modules, sample.channels)

    refused = runner(rehearsal, gone)
    operation = refused.run(refused.operation_for("dev-sandbox")).operation

    assert operation.state is OperationState.FAILED
    assert f"was synced through {synced}, this run reaches {later}" in operation.message
    assert len(real.snapshot()) == objects
    assert store.runtime("dev-sandbox") is not None

    allowed = runner(rehearsal, gone, allow=True)
    done = allowed.run(allowed.operation_for("dev-sandbox")).operation
    assert done.state is not OperationState.FAILED, done.message


def test_an_interrupted_provision_of_a_runtime_that_left_git_is_deprovisioned(
    tmp_path: Path,
) -> None:
    sample = load_repo(PROJECT / "sample-repo", renderer=default_renderer()).repo
    assert sample is not None
    store = SqliteStore(tmp_path / "state.db")
    cluster = InMemoryCluster()
    engine = Engine(store, clock=lambda: datetime.now(UTC), plugins=[])
    runner = Runner(store, engine, sample, lambda a, n: cluster, lambda: datetime.now(UTC))
    provision = runner.operation_for("dev-sandbox")  # created, then the process "died"
    assert store.runtime("dev-sandbox") is not None  # known from its first operation
    gone = type(sample)(sample.settings, {}, sample.modules, sample.channels)

    later = Runner(store, engine, gone, lambda a, n: cluster, lambda: datetime.now(UTC))
    assert later.removed_runtimes() == ["dev-sandbox"]
    deprovision = later.operation_for("dev-sandbox")

    assert deprovision.type.value == "deprovision"
    superseded = store.get(provision.id)
    assert superseded is not None
    assert superseded.state is OperationState.FAILED
    assert "superseded: runtime dev-sandbox left git" in superseded.message
    assert deprovision.data.access == sample.runtimes["dev-sandbox"].cluster


def test_re_triggered_deprovisions_pass_the_brake(tmp_path: Path) -> None:
    store = SqliteStore(tmp_path / "state.db")
    engine = Engine(store, clock=lambda: datetime.now(UTC), plugins=[])
    for index in range(6):
        operation = engine.create(f"rt-{index}", OperationType.DEPROVISION)
        operation.state = OperationState.SUCCEEDED
        operation.stages[2].steps[-1].state = StepState.SKIPPED
        store.save(operation)
    state = f"sqlite:///{tmp_path / 'state.db'}"

    held = CliRunner().invoke(cli, ["operations", "retrigger", "--state", state])

    assert held.exit_code == 3, held.output
    assert "6 deletion(s), limit 5" in held.output
    assert len(store.operations()) == 6
    allowed = CliRunner().invoke(
        cli, ["operations", "retrigger", "--state", state, "--allow-deletions", "6"]
    )
    assert allowed.exit_code == 0, allowed.output
    assert len(store.operations()) == 12


def test_the_folder_above_a_config_repo_names_it(tmp_path: Path) -> None:
    """``reconciler validate .`` in a git repository whose config repo is a folder of it (as
    docs/troubleshooting.md runs it): the error names that folder."""
    shutil.copytree(PROJECT / "sample-repo", tmp_path / "fleet")
    result = CliRunner().invoke(cli, ["validate", str(tmp_path)])
    assert result.exit_code == 2
    assert f"{tmp_path}/fleet is one" in result.output
    assert f"(e.g. reconciler validate {tmp_path}/fleet)" in result.output
