"""Event-driven reconciliation on the real API server: the daemon (in this process, its watches
on threads, its debounce 1 s) reacts to the cluster, not to its timers. The daemon here has no
scheduler: no retry and no resync ever runs, so whatever happens after the first run happens
because a watch woke the runtime (the wait for it is bounded, never a sleep). Covered: an
operator that becomes Available makes its module Ready; a dependent module starts once its
dependency is Ready; a deleted managed Deployment is re-created (and reported as drift); the
last blocking custom resource deleted lets a blocked removal finish; with watching off,
nothing happens until a timer's run, as before; closing the daemon ends every watch's thread
(its stream hung up, not left to its timeout). A test whose last wake started a run that waits
for an operator makes it available and waits for Ready, so that the run ends before the daemon
closes (which lets running reconciles finish). A disconnect, a 410 and a hangup are the watch
contract's (tests/contract/test_watch_contract.py)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.e2e_harness import TestModule, until
from tests.support.e2e_world import World
from tests.support.kube_workloads import finished_job_status, managed_job
from tests.support.stopping import NotedStop
from tests.support.watched_daemon import BOUNDED, Watched, watched_daemon


@pytest.fixture
def watching(world: World, tmp_path: Path) -> Iterator[Watched]:
    yield from watched_daemon(world, tmp_path, watch=True)


@pytest.fixture
def one_worker(world: World, tmp_path: Path) -> Iterator[Watched]:
    yield from watched_daemon(world, tmp_path, watch=True, workers=1)


@pytest.fixture
def polling(world: World, tmp_path: Path) -> Iterator[Watched]:
    yield from watched_daemon(world, tmp_path, watch=False)


def _one_module(watched: Watched, **options: Any) -> tuple[str, TestModule]:
    fleet = watched.world.fleet
    module = fleet.module("op", **options)
    fleet.channel[module.name] = "1.0.0"
    runtime = fleet.runtime("rt", [{"name": module.name}])
    watched.commit("one module")
    return runtime, module


def test_an_operator_that_becomes_available_makes_its_module_ready(watching: Watched) -> None:
    runtime, module = _one_module(watching)
    watching.first_run()
    assert watching.state(runtime, module.name) == "Processing"  # no kubelet: not available

    watching.world.kube.make_available(module.namespace, module.operator)

    until(lambda: watching.state(runtime, module.name) == "Ready", "Ready after a wake", BOUNDED)
    assert watching.daemon.watches.wakes >= 1
    assert _paused(watching) == 0  # the run gave its worker back: it never waited for it


def test_a_dependent_module_starts_once_its_dependency_is_ready(watching: Watched) -> None:
    fleet, kube = watching.world.fleet, watching.world.kube
    base = fleet.module("base")
    app = fleet.module("app", depends_on=(f"base-{fleet.suffix}",))
    fleet.channel.update({base.name: "1.0.0", app.name: "1.0.0"})
    runtime = fleet.runtime("rt", [{"name": app.name}])
    watching.commit("a module and its dependency")
    watching.first_run()
    assert kube.deployment(app.namespace, app.operator) is None  # waits for its dependency

    kube.make_available(base.namespace, base.operator)

    until(
        lambda: kube.deployment(app.namespace, app.operator) is not None,
        "the dependent module applied after a wake",
        BOUNDED,
    )
    kube.make_available(app.namespace, app.operator)  # the run under way waits for it
    until(lambda: watching.state(runtime, app.name) == "Ready", "the dependent Ready", BOUNDED)


def test_a_deleted_managed_deployment_is_recreated_and_reported(watching: Watched) -> None:
    runtime, module = _one_module(watching)
    kube = watching.world.kube
    watching.first_run()
    kube.make_available(module.namespace, module.operator)
    until(lambda: watching.state(runtime, module.name) == "Ready", "Ready", BOUNDED)

    kube.apps.delete_namespaced_deployment(module.operator, module.namespace)

    until(
        lambda: kube.deployment(module.namespace, module.operator) is not None,
        "the Deployment re-created after a wake",
        BOUNDED,
    )
    drift = next(r for r in watching.daemon.status()["runtimes"] if r["runtime"] == runtime)
    assert f"Deployment/{module.namespace}/{module.operator} deleted" in drift["drift"]
    kube.make_available(module.namespace, module.operator)  # the run under way waits for it
    until(lambda: watching.state(runtime, module.name) == "Ready", "Ready again", BOUNDED)


def test_the_last_blocking_resource_deleted_lets_a_removal_finish(watching: Watched) -> None:
    runtime, module = _one_module(watching)
    kube, fleet = watching.world.kube, watching.world.fleet
    watching.first_run()
    kube.make_available(module.namespace, module.operator)
    until(lambda: watching.state(runtime, module.name) == "Ready", "Ready", BOUNDED)
    kube.create_resource(module.crd, module.namespace, module.crd.instance("users"))
    fleet.runtimes[runtime]["modules"] = []
    watching.commit("remove the module")
    watching.daemon.poll()
    watching.daemon.wait_idle()
    until(watching._listed, "the blocking kind listed", BOUNDED)
    waiting = watching.daemon.store.unfinished(runtime)
    assert waiting is not None, watching.daemon.store.operations(runtime=runtime, limit=3)
    assert "users" in waiting.message  # the removal is blocked by the user's resource
    assert (module.crd.kind, "every") in {k[2:4] for k in watching.daemon.watches.open}

    kube.delete_resource(module.crd, module.namespace, "users")

    until(
        lambda: kube.deployment(module.namespace, module.operator) is None,
        "the removal finished after a wake",
        BOUNDED,
    )


def test_with_watching_off_only_a_timer_run_sees_the_operator(polling: Watched) -> None:
    runtime, module = _one_module(polling)
    polling.first_run()
    polling.world.kube.make_available(module.namespace, module.operator)

    assert polling.daemon.watches.open == {}
    polling.daemon.wait_idle()
    assert polling.state(runtime, module.name) == "Processing"  # nothing woke it
    polling.daemon.reconcile_all(wait=True)  # the retry timer's run
    assert polling.state(runtime, module.name) == "Ready"


def _paused(watched: Watched) -> int:
    """How many times a run paused within a pass (on the daemon's stopping event)."""
    stop = watched.daemon.stopping
    assert isinstance(stop, NotedStop)
    return stop.waits


def test_one_worker_is_not_held_while_a_runtime_waits_for_its_operator(
    one_worker: Watched,
) -> None:
    fleet, kube = one_worker.world.fleet, one_worker.world.kube
    slow, fast = fleet.module("slow"), fleet.module("fast")
    fleet.channel.update({slow.name: "1.0.0", fast.name: "1.0.0"})
    waiting = fleet.runtime("waits", [{"name": slow.name}])
    other = fleet.runtime("other", [{"name": fast.name}])
    one_worker.commit("two runtimes")
    one_worker.first_run()

    until(lambda: kube.deployment(fast.namespace, fast.operator) is not None, "applied", BOUNDED)
    kube.make_available(fast.namespace, fast.operator)  # never the slow one's, meanwhile

    until(lambda: one_worker.state(other, fast.name) == "Ready", "the other Ready", BOUNDED)
    assert one_worker.module(waiting, slow.name)["reason"] == "WaitingForOperator"
    assert _paused(one_worker) == 0  # no run held the one worker while waiting
    kube.make_available(slow.namespace, slow.operator)
    until(lambda: one_worker.state(waiting, slow.name) == "Ready", "woken, Ready", BOUNDED)


def test_a_run_never_pauses_for_crds_and_the_rest_follows_them(watching: Watched) -> None:
    runtime, module = _one_module(watching, default=True)
    kube = watching.world.kube
    watching.first_run()  # its CRDs applied; not Established yet: the run ends "not yet"

    until(  # no timer runs in this daemon: the same run, or one a wake ran, applied it
        lambda: kube.resource(module.crd, module.namespace, "default") is not None,
        "the default configuration applied after its CRD",
        BOUNDED,
    )
    assert kube.deployment(module.namespace, module.operator) is not None
    assert _paused(watching) == 0
    kube.make_available(module.namespace, module.operator)
    until(lambda: watching.state(runtime, module.name) == "Ready", "Ready", BOUNDED)


def test_a_deprovision_is_woken_by_the_last_blocking_resource_deleted(
    watching: Watched,
) -> None:
    runtime, module = _one_module(watching)
    kube, fleet = watching.world.kube, watching.world.fleet
    fleet.runtime("stays", [])  # not every runtime leaves at once (the deletion brake)
    watching.commit("a runtime that stays")
    watching.first_run()
    kube.make_available(module.namespace, module.operator)
    until(lambda: watching.state(runtime, module.name) == "Ready", "Ready", BOUNDED)
    kube.create_resource(module.crd, module.namespace, module.crd.instance("users"))
    del fleet.runtimes[runtime]
    watching.commit("the runtime leaves git")
    watching.daemon.poll()
    watching.daemon.wait_idle()

    def blocked() -> bool:
        waiting = watching.daemon.store.unfinished(runtime)
        return waiting is not None and "users" in waiting.message

    until(blocked, "the deprovision waits for the user's resource", BOUNDED)
    until(watching._listed, "the blocking kind listed", BOUNDED)
    assert (module.crd.kind, "every") in {k[2:4] for k in watching.daemon.watches.open}

    kube.delete_resource(module.crd, module.namespace, "users")

    until(  # no timer runs here: the wakes (the resource, then the CRD gone) finish it
        lambda: watching.daemon.store.runtime(runtime) is None,
        "the deprovision finished after a wake",
        BOUNDED,
    )
    assert kube.deployment(module.namespace, module.operator) is None
    assert kube.crd(module.crd.name) is None
    watching.daemon.wait_idle()
    assert (module.crd.kind, "every") not in {k[2:4] for k in watching.daemon.watches.open}


def test_a_named_job_that_completes_wakes_its_runtime_and_makes_the_module_ready(
    watching: Watched,
) -> None:
    checks = {"1.0.0": [{"kind": "Job", "name": "migrate"}]}
    runtime, module = _one_module(watching, shipped=(managed_job("migrate"),), health_checks=checks)
    kube = watching.world.kube
    watching.first_run()
    kube.make_available(module.namespace, module.operator)
    waiting = "WaitingForHealthChecks"
    until(lambda: watching.module(runtime, module.name).get("reason") == waiting, waiting, BOUNDED)
    watching.daemon.wait_idle()  # that run ended: only a wake runs the runtime again

    status = {"status": finished_job_status(failed=False)}
    kube.batch.patch_namespaced_job_status("migrate", module.namespace, status)

    until(lambda: watching.state(runtime, module.name) == "Ready", "Ready after a wake", BOUNDED)
