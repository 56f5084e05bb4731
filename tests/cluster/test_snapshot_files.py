"""Snapshot files: written as a ``v1`` ``List`` in JSON, as ``kubectl get
-o json`` prints it, read back whether JSON or YAML; writes kept in memory until the engine
flushes them after a step, so a sync saves each file once per step instead of once per write,
and the file is never behind what the state store says was done.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import date
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner

from reconciler.cli import cli
from reconciler.cluster.memory import InMemoryCluster
from reconciler.cluster.snapshot import (
    ABSENT,
    SnapshotFileCluster,
    load_snapshot,
    read_generation,
    save_snapshot,
)
from reconciler.core.model import ConfigRepo
from reconciler.errors import ConflictError, FencedError, SourceError
from reconciler.operations.engine import Engine
from reconciler.operations.model import FenceToken, Operation, OperationState, StepState
from reconciler.operations.runner import Runner
from reconciler.operations.store import SqliteStore
from reconciler.source.loader import load_repo
from tests.support.repos import RepoFactory, channel_file, module_files, runtime_file
from tests.support.sample_fleet import Fleet
from tests.support.scenarios import Clock

NAMESPACE = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "ns"}}


def _config_map(name: str, data: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": "ns"},
        "data": data,
    }


def _names(cluster: InMemoryCluster) -> list[tuple[str, str]]:
    return [(o["metadata"]["name"], o["metadata"]["resourceVersion"]) for o in cluster.objects()]


def test_a_saved_snapshot_is_a_v1_list_in_json_that_yaml_readers_read_too(
    tmp_path: Path,
) -> None:
    cluster = InMemoryCluster()
    cluster.apply(NAMESPACE, field_manager="m")
    cluster.apply(_config_map("c", {"greeting": "grüße", "line": "a\u2028b"}), field_manager="m")
    path = tmp_path / "rt.yaml"

    save_snapshot(cluster, path)

    text = path.read_text(encoding="utf-8")
    document = json.loads(text)
    assert (document["apiVersion"], document["kind"]) == ("v1", "List")
    assert document["items"] == cluster.snapshot()
    assert yaml.safe_load(text) == document  # JSON is YAML: kubectl and PyYAML read it as is
    assert text.isascii()  # escaped: YAML 1.1 readers would break U+2028 as a line end
    assert load_snapshot(path).objects() == cluster.objects()


def test_an_empty_cluster_saves_an_empty_list(tmp_path: Path) -> None:
    path = tmp_path / "empty.yaml"
    save_snapshot(InMemoryCluster(), path)
    assert json.loads(path.read_text(encoding="utf-8"))["items"] == []
    assert load_snapshot(path).objects() == []


def test_a_recorded_yaml_value_json_has_no_type_for_is_saved_as_its_text(
    tmp_path: Path,
) -> None:
    recorded = tmp_path / "recorded.yaml"
    recorded.write_text(
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c, namespace: ns}\n"
        "data: {since: 2024-01-02}\n---\n"
        "apiVersion: v1\nkind: Namespace\nmetadata: {name: ns}\n",
        encoding="utf-8",
    )
    cluster = load_snapshot(recorded)
    assert cluster.objects()[0]["data"]["since"] == date(2024, 1, 2)  # as YAML typed it

    saved = tmp_path / "saved.yaml"
    save_snapshot(cluster, saved)

    assert load_snapshot(saved).objects()[0]["data"]["since"] == "2024-01-02"


@pytest.mark.parametrize(
    ("text", "why"),
    [
        ('{"apiVersion": "v1", "kind": "List", "items": [', "cannot read the snapshot"),
        ('{"items": ' + "[" * 100_000 + "]" * 100_000 + "}", "cannot read the snapshot"),
        ('{"apiVersion": "v1", "kind": "List", "items": [1, null]}', "not a snapshot"),
        ('{"apiVersion": "v1", "kind": "List", "items": [{"kind": "Nope"}]}', "Nope"),
        # an object of the wrong shape (was an AttributeError: "internal error")
        ("apiVersion: v1\nkind: ConfigMap\nmetadata: 7\n", "ConfigMap's metadata is a number"),
        ("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: [1]}\n", "no string metadata.name"),
        ("kind: ConfigMap\nmetadata: {name: a, labels: 3}\n", "has no string apiVersion"),
        ("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a, labels: 3}\n", "labels is"),
        ("- 1\n", "a document of the snapshot is a list"),
        # the place in the file, not PyYAML's "<unicode string>"
        ("{{{\n", "did not find expected node content (line 2, column 1)"),
    ],
)
def test_a_broken_json_snapshot_is_one_line_naming_the_file(
    tmp_path: Path, text: str, why: str
) -> None:
    path = tmp_path / "broken.yaml"
    path.write_text(text, encoding="utf-8")

    with pytest.raises(SourceError) as raised:
        load_snapshot(path)

    message = str(raised.value)
    assert message.startswith(f"{path}: ")
    assert why in message
    assert "\n" not in message
    assert "<unicode string>" not in message
    assert "Error(" not in message  # no Python repr


def test_writes_reach_the_file_at_a_flush_and_a_flush_without_writes_saves_nothing(
    tmp_path: Path,
) -> None:
    path = tmp_path / "rt.yaml"
    cluster = SnapshotFileCluster(path)
    cluster.apply(NAMESPACE, field_manager="m")
    cluster.apply(_config_map("c", {"a": "1"}), field_manager="m")
    assert not path.exists()

    cluster.flush()
    saved = path.stat()
    assert _names(load_snapshot(path)) == _names(cluster)

    cluster.apply(_config_map("c", {"a": "1"}), field_manager="m")  # the same: no write
    cluster.flush()
    assert path.stat().st_ino == saved.st_ino  # not replaced


class _Watching:
    """A state store that, at every save of an operation with no step running, checks that the
    snapshot file holds what the cluster in memory holds (the file is never behind what the
    store says was done), and counts the file's saves."""

    def __init__(self, store: SqliteStore, cluster: SnapshotFileCluster) -> None:
        self.store = store
        self.cluster = cluster
        self.checked = 0
        self.behind: list[str] = []

    def save(self, operation: Operation, fence: FenceToken | None = None) -> None:
        running = [
            t.name for s in operation.stages for t in s.steps if t.state is StepState.RUNNING
        ]
        if not running and self.cluster.writes:
            self.checked += 1
            on_file = _names(load_snapshot(self.cluster.path))
            if on_file != _names(self.cluster):
                self.behind.append(operation.message or str(operation.state))
        self.store.save(operation, fence)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.store, name)


def _repo(make_repo: RepoFactory) -> ConfigRepo:
    files: dict[str, str] = {}
    names = [f"m{index}" for index in range(4)]
    for name in names:
        objects = [
            {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": f"{name}-system"}},
            {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": f"{name}-a"}},
            {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": f"{name}-b"}},
        ]
        files.update(module_files(name, namespace=f"{name}-system", objects=objects))
    files.update(channel_file("regular", {name: "1.0.0" for name in names}))
    files.update(runtime_file("rt", "regular", [{"name": n} for n in names]))
    validation = load_repo(make_repo(files))
    assert validation.repo is not None, [d.format() for d in validation.diagnostics]
    return validation.repo


def test_a_sync_saves_the_file_once_per_step_and_never_behind_the_store(
    make_repo: RepoFactory, tmp_path: Path
) -> None:
    repo = _repo(make_repo)
    path = tmp_path / "rt.yaml"
    cluster = SnapshotFileCluster(path)
    saves: list[int] = []
    flush = cluster.flush

    def counted_flush(guard: Callable[[], None] | None = None) -> None:
        before = path.stat().st_mtime_ns if path.exists() else 0
        flush(guard)
        if path.exists() and path.stat().st_mtime_ns != before:
            saves.append(cluster.writes)

    cluster.flush = counted_flush  # type: ignore[method-assign]
    clock = Clock()
    store = _Watching(SqliteStore(tmp_path / "state.db"), cluster)
    engine = Engine(store, clock=clock, plugins=[])
    runner = Runner(store, engine, repo, lambda a, n: cluster, clock)

    outcome = runner.run(runner.operation_for("rt"))

    assert outcome.operation.state is OperationState.SUCCEEDED, outcome.operation.message
    assert store.behind == []
    assert store.checked > 0
    assert cluster.writes >= 4 * 3  # every object of four modules, and their inventories
    assert 0 < len(saves) <= 3  # per step that wrote (apply, status), not per write
    assert _names(load_snapshot(path)) == _names(cluster)


# -- a stale copy is never saved over a newer file -----------------------------------


def _namespace(name: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}


def _namespaces(cluster: InMemoryCluster) -> list[str]:
    """The Namespaces (not what Kubernetes creates in each)."""
    return [str(o["metadata"]["name"]) for o in cluster.objects() if o["kind"] == "Namespace"]


def test_a_copy_read_before_another_save_is_not_saved_over_it(tmp_path: Path) -> None:
    """Replica A read the file and was paused; replica B read it, wrote and saved; A resumed:
    its save is refused and B's file stays."""
    path = tmp_path / "rt.yaml"
    stale, newer = SnapshotFileCluster(path), SnapshotFileCluster(path)
    newer.apply(_namespace("theirs"), field_manager="t")
    newer.flush()
    stale.apply(_namespace("mine"), field_manager="t")

    with pytest.raises(ConflictError, match="another process saved the snapshot"):
        stale.flush()

    assert _namespaces(load_snapshot(path)) == ["theirs"]
    newer.apply(_namespace("theirs-2"), field_manager="t")
    newer.flush()  # the writer of the last generation goes on
    assert _namespaces(load_snapshot(path)) == ["theirs", "theirs-2"]


def test_each_save_moves_the_generation_on(tmp_path: Path) -> None:
    path = tmp_path / "rt.yaml"
    path.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": []}))  # kubectl's
    cluster = SnapshotFileCluster(path)
    assert (cluster.generation, read_generation(path)) == (0, 0)

    for expected in (1, 2):
        cluster.apply(_namespace(f"n{expected}"), field_manager="t")
        cluster.flush()
        assert (cluster.generation, read_generation(path)) == (expected, expected)
    assert read_generation(tmp_path / "none.yaml") == ABSENT
    assert SnapshotFileCluster(path).generation == 2


def test_a_guard_that_refuses_under_the_lock_leaves_the_file(tmp_path: Path) -> None:
    path = tmp_path / "rt.yaml"
    cluster = SnapshotFileCluster(path)
    cluster.apply(_namespace("x"), field_manager="t")

    def fenced() -> None:
        raise FencedError("not written: paused past the lease")

    with pytest.raises(FencedError):
        cluster.flush(guard=fenced)
    assert not path.exists()
    cluster.flush()
    assert _namespaces(load_snapshot(path)) == ["x"]


def test_a_snapshot_that_cannot_be_written_fails_the_operation_in_one_line(
    tmp_path: Path,
) -> None:
    """A folder that cannot take the file (read-only, full; here the file's temporary name is
    taken by a folder): the step fails naming the file and what to do, the operation is
    recorded failed (not left in progress), and no internal error."""
    fleet = Fleet(tmp_path)
    clusters = fleet.clusters
    (clusters / "dev-sandbox.yaml.tmp").mkdir()
    args = ["--runtime", "dev-sandbox", "--snapshot", f"{clusters}/", "--snapshot-create"]

    result = CliRunner().invoke(cli, ["sync", str(fleet.repo), *args, *fleet.state])

    assert result.exit_code != 0
    assert "internal error" not in result.output
    assert f"{clusters / 'dev-sandbox.yaml'}: the snapshot cannot be saved" in result.output
    assert "give --snapshot another one" in result.output
    listed = fleet.document("operations", "list", *fleet.state)
    assert [o["state"] for o in listed["items"]] == ["failed"]
