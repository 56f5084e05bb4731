"""A chart's hooks are part of the operation and resumable (O2): the phases a pass finished are
kept in the operation's hook ledger, so a pass that runs again (a retry, a restarted daemon that
reads the ledger back from the store) never creates a hook of its run twice, waits for one still
running, and never runs a finished phase again, even when ``hook-succeeded`` deleted its Jobs;
until a pre-install hook completes nothing of the release is written. A removal runs the delete
hooks the inventory kept, Deleting while they run (docs/charts.md, Hooks)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from reconciler.cluster.memory import InMemoryCluster
from reconciler.core.model import ConfigRepo
from reconciler.core.objects import ObjectRef
from reconciler.core.plan_values import Context, desired_modules
from reconciler.core.render import Renderer
from reconciler.core.resolve import resolve_runtime
from reconciler.core.status import ModuleStatus
from reconciler.lifecycle.executor import Lifecycle
from reconciler.lifecycle.hooks import HookLedger
from reconciler.render import default_renderer
from reconciler.source.loader import load_repo
from tests.support.charts import CHART_TEMPLATES, chart_module_files
from tests.support.repos import RepoFactory, channel_file, runtime_file

NOW = datetime(2026, 11, 18, 12, 0, tzinfo=UTC)
NS = "web-system"
PRE = ObjectRef("batch/v1", "Job", NS, "web-pre")
POST = ObjectRef("batch/v1", "Job", NS, "web-post")
OPERATOR = ObjectRef("apps/v1", "Deployment", NS, "web-operator")
SETTINGS = ObjectRef("v1", "ConfigMap", NS, "web-settings")

_JOB = (
    "apiVersion: batch/v1\nkind: Job\nmetadata:\n  name: web-{name}\n  annotations:\n"
    '    "helm.sh/hook": {hook}\n    "helm.sh/hook-delete-policy": {policy}\n'
    "spec:\n  template:\n    spec:\n      restartPolicy: Never\n"
    "      containers: [{{name: j, image: busybox}}]\n"
)
HOOKS = {
    "templates/pre.yaml": _JOB.format(name="pre", hook="pre-install", policy="hook-failed"),
    "templates/post.yaml": _JOB.format(name="post", hook="post-install", policy="hook-succeeded"),
}
COMPLETE = {"conditions": [{"type": "Complete", "status": "True"}]}
FAILED = {
    "conditions": [
        {
            "type": "Failed",
            "status": "True",
            "reason": "BackoffLimitExceeded",
            "message": "Job has reached the specified backoff limit",
        }
    ]
}


def _config(make_repo: RepoFactory) -> ConfigRepo:
    files = {
        **chart_module_files("web", templates={**CHART_TEMPLATES, **HOOKS}),
        **channel_file("regular", {"web": "1.0.0"}),
        **runtime_file("a", "regular", [{"name": "web"}]),
    }
    config = load_repo(make_repo(files), renderer=default_renderer()).repo
    assert config is not None
    return config


def _pass(cluster: InMemoryCluster, config: ConfigRepo, ledger: HookLedger) -> ModuleStatus:
    """One pass of the operation's apply (or remove) step, as a stage retried or resumed runs
    it."""
    runtime = config.runtimes["a"]
    desired = desired_modules(config, resolve_runtime(config, runtime), Renderer(config))
    lifecycle = Lifecycle(cluster, system_namespace="reconciler-system", hooks=ledger)
    (status,) = lifecycle.sync(Context.of(config, "a", NOW), desired).modules
    return status


def _restarted(ledger: HookLedger) -> HookLedger:
    """The ledger as a restarted daemon reads it back (the step's kept data, JSON)."""
    return HookLedger.of(ledger.data(), ledger.run)


def _uid(cluster: InMemoryCluster, ref: ObjectRef) -> Any:
    body = cluster.get(ref)
    assert body is not None, ref
    return body["metadata"]["uid"]


def test_a_hook_is_resumed_never_run_twice_and_its_phase_never_again(
    make_repo: RepoFactory,
) -> None:
    config, cluster = _config(make_repo), InMemoryCluster()
    saved: list[dict[str, Any]] = []
    ledger = HookLedger("op-1")
    ledger.persist = lambda: saved.append(ledger.data())

    waiting = _pass(cluster, config, ledger)
    assert (waiting.state, waiting.reason) == ("Processing", "WaitingForHook"), waiting
    assert "hook Job/web-system/web-pre (pre-install)" in waiting.message
    assert cluster.get(OPERATOR) is None  # nothing of the release yet
    assert cluster.get(SETTINGS) is None
    assert saved[0]["hooks"]["web"] == {"kind": "install", "done": []}
    first = _uid(cluster, PRE)

    ledger = _restarted(ledger)  # the daemon restarts while the hook runs
    assert _pass(cluster, config, ledger).reason == "WaitingForHook"
    assert _uid(cluster, PRE) == first  # waited for again, not created twice

    cluster.set_status(PRE, COMPLETE)
    after = _pass(cluster, config, ledger)
    assert after.reason == "WaitingForHook"
    assert "web-post (post-install)" in after.message
    assert cluster.get(OPERATOR) is not None  # the release's objects before post-install
    assert ledger.done("web", "pre-install")

    cluster.set_status(POST, COMPLETE)
    ledger = _restarted(ledger)
    done = _pass(cluster, config, ledger)
    assert done.reason != "WaitingForHook", done
    assert cluster.get(POST) is None  # hook-succeeded: deleted once its phase succeeded
    assert _uid(cluster, PRE) == first  # kept: its policy is hook-failed only

    ledger = _restarted(ledger)
    _pass(cluster, config, ledger)
    assert cluster.get(POST) is None  # a finished phase never runs again
    assert ledger.data()["hooks"]["web"]["done"] == ["pre-install", "post-install"]


def test_a_failed_pre_install_hook_fails_the_module_naming_job_and_condition(
    make_repo: RepoFactory,
) -> None:
    config, cluster = _config(make_repo), InMemoryCluster()
    ledger = HookLedger("op-1")
    _pass(cluster, config, ledger)
    cluster.set_status(PRE, FAILED)

    failed = _pass(cluster, config, ledger)

    assert (failed.state, failed.reason) == ("Error", "HookFailed"), failed
    assert failed.message == (
        "hook Job/web-system/web-pre (pre-install) failed: Failed=True (BackoffLimitExceeded): "
        "Job has reached the specified backoff limit"
    )
    assert failed.error is not None
    assert failed.error.permanent
    assert cluster.get(PRE) is None  # hook-failed: deleted
    assert cluster.get(OPERATOR) is None
    assert cluster.get(SETTINGS) is None


DELETE_HOOKS = {
    "templates/drain.yaml": _JOB.format(name="drain", hook="pre-delete", policy="hook-succeeded"),
    "templates/cleanup.yaml": _JOB.format(
        name="cleanup", hook="post-delete", policy="before-hook-creation"
    ),
}
DRAIN = ObjectRef("batch/v1", "Job", NS, "web-drain")
CLEANUP = ObjectRef("batch/v1", "Job", NS, "web-cleanup")
INVENTORY = ObjectRef("v1", "ConfigMap", "reconciler-system", "inventory-web")


def test_a_removal_runs_the_delete_hooks_its_inventory_kept_and_waits_deleting(
    make_repo: RepoFactory,
) -> None:
    files = {
        **chart_module_files("web", templates={**CHART_TEMPLATES, **DELETE_HOOKS}),
        **channel_file("regular", {"web": "1.0.0"}),
    }
    listed = load_repo(
        make_repo({**files, **runtime_file("a", "regular", [{"name": "web"}])}),
        renderer=default_renderer(),
    ).repo
    assert listed is not None
    cluster = InMemoryCluster()
    installed = _pass(cluster, listed, HookLedger("op-1"))
    assert installed.state == "Ready", installed  # no install hooks: nothing waited for
    assert cluster.get(DRAIN) is None  # delete hooks run only at removal
    removed = load_repo(
        make_repo({**files, **runtime_file("a", "regular", [])}), renderer=default_renderer()
    ).repo
    assert removed is not None  # git no longer renders the hooks: the inventory kept them

    ledger = HookLedger("op-2")
    draining = _pass(cluster, removed, ledger)
    assert (draining.state, draining.reason) == ("Deleting", "WaitingForHook"), draining
    assert cluster.get(OPERATOR) is not None  # nothing deleted before pre-delete is done
    cluster.set_status(DRAIN, COMPLETE)
    ledger = _restarted(ledger)
    cleaning = _pass(cluster, removed, ledger)
    assert (cleaning.state, cleaning.reason) == ("Deleting", "WaitingForHook"), cleaning
    assert cluster.get(OPERATOR) is None
    assert cluster.get(DRAIN) is None  # hook-succeeded
    assert cluster.get(INVENTORY) is not None  # kept until post-delete is done
    cluster.set_status(CLEANUP, COMPLETE)
    gone = _pass(cluster, removed, _restarted(ledger))  # pre-delete is not run again
    assert gone.state is None, gone
    assert cluster.get(INVENTORY) is None
    assert cluster.get(CLEANUP) is not None  # before-hook-creation: left, as Helm leaves it
