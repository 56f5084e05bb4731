"""Fault injection: 30 seeds at an 8% fault rate converge to the fault-free result (the benchmark
runs 1,000 seeds at three rates: ``python bench/fault_bench.py``).

Every seed drives the six phases of :mod:`tests.support.scenarios` (install, upgrade, removal of a
CreateAndDelete module blocked by a user's object and of an Ignore module, deprovision blocked,
then finished) through a :class:`tests.support.faults.FaultyCluster` over an in-memory cluster:
429s, 5xx, timeouts and lost responses on 8% of the API calls, up to 30 rounds per phase, then
without faults until the phase's goal holds. At every phase end: 0 orphans, 0 modules left to delete
without a real blocker, 0 user objects deleted or changed, the same objects as the fault-free
run (server-made fields aside); and no operation that ended "succeeded" left anything behind.

The state store is SQLite in memory (the crash tests use files): the store is not what the
faults hit, and many seeds x ~60 operations of fsyncs would take minutes. Thirty seeds keep the
test near 3 s; the bug they guard against (our default configuration counted as a user's
object after a lost response) hit 50 of 200 seeds, so 30 seeds miss it with a chance of 2 in
10,000.

Besides the convergence over seeds, named cases cover user data (L7, L8: a Namespace in
a manifest, a CRD an upgrade drops) and a runtime whose provision never finished.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

import pytest

from reconciler.cluster.memory import InMemoryCluster
from reconciler.core.model import Channel, ModuleVersion
from tests.support.lifecycle_helpers import deployment
from tests.support.scenarios import (
    GIZMO,
    PHASES,
    Clock,
    Phase,
    Reference,
    UserAction,
    fault_summary,
    memory_store,
    new_world,
    run_phases,
    run_seeds,
    scenario_repo,
    settled,
    with_modules,
)

SEEDS = 30
RATE = 0.08
FAULTY_ROUNDS = 30
CALM_ROUNDS = 25


@pytest.fixture(scope="module")
def reference() -> Reference:
    world = new_world(InMemoryCluster(), memory_store(), Clock(), 0)
    outcome, states = run_phases(world, PHASES)
    assert outcome.problems == []
    assert outcome.converged == len(PHASES)
    return states


def test_every_seed_converges_to_the_fault_free_result(reference: Reference) -> None:
    """About 3 s on an idle machine, twice that on a loaded one (30 seeds x six phases, each over
    the fault-injecting cluster); more seeds and rates are the benchmark (module docstring)."""
    outcomes = run_seeds(range(SEEDS), PHASES, reference, RATE, FAULTY_ROUNDS, CALM_ROUNDS)

    report = fault_summary(outcomes, len(PHASES), RATE)
    print(report)
    assert all(not o.problems for o in outcomes), report
    assert sum(o.faults.total() for o in outcomes) > SEEDS * 15  # the faults did happen
    assert all(o.converged == len(PHASES) for o in outcomes)


# -- cases of user data and an unfinished provision -----------------------------------------------


def _user_objects_kept(phases: Sequence[Phase], seeds: Sequence[int]) -> list[str]:
    """Drive ``phases`` fault-free, then with faults for each seed; user objects lost."""
    lost = []
    for seed in [-1, *seeds]:
        world = new_world(InMemoryCluster(), memory_store(), Clock(), max(seed, 0))
        rate = RATE if seed >= 0 else 0.0
        outcome, _ = run_phases(
            world, phases, rate=rate, faulty_rounds=FAULTY_ROUNDS, calm_rounds=CALM_ROUNDS
        )
        lost += [f"seed {seed}: {p}" for p in outcome.problems if "user object" in p]
    return lost


def _plant(phases: Sequence[Phase], *actions: UserAction) -> tuple[Phase, ...]:
    first = replace(phases[0], user=phases[0].user + actions)
    return (first, *phases[1:])


def test_a_namespace_in_a_manifest_keeps_the_users_objects() -> None:
    objects = (
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "gizmo-system"}},
        *GIZMO.versions["1.0.0"].objects,
    )
    version = replace(GIZMO.versions["1.0.0"], objects=objects)
    gizmo = replace(GIZMO, versions={"1.0.0": version})
    phases = _plant(
        with_modules(PHASES, {"gizmo": gizmo}),
        UserAction(
            "create",
            {
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "metadata": {"name": "team-notes", "namespace": "gizmo-system"},
                "data": {"keep": "me"},
            },
        ),
    )

    assert _user_objects_kept(phases, range(5)) == []


def test_an_upgrade_dropping_a_crd_keeps_the_users_custom_resources() -> None:
    dropped = ModuleVersion("2.0.0", (deployment("gizmo-operator", "2.0.0"),))
    gizmo = replace(GIZMO, versions={**GIZMO.versions, "2.0.0": dropped})
    install, upgrade = with_modules(PHASES[:2], {"gizmo": gizmo})
    upgrade = replace(upgrade, repo=replace(upgrade.repo, channels=_bumped(upgrade, "gizmo")))
    mine = {
        "apiVersion": "example.io/v1",
        "kind": "Gizmo",
        "metadata": {"name": "mine", "namespace": "apps"},
        "spec": {"level": 9},
    }
    phases = _plant((install, upgrade), UserAction("create", mine))

    assert _user_objects_kept(phases, range(5)) == []


def _bumped(phase: Phase, module: str) -> dict[str, Channel]:
    channel = phase.repo.channels["regular"]
    return {"regular": replace(channel, modules={**channel.modules, module: "2.0.0"})}


def test_a_runtime_whose_provision_never_finished_is_deprovisioned() -> None:
    waiting = InMemoryCluster(auto_ready=False)  # the operators never become available
    install = replace(PHASES[0], goal=settled, user=())
    world = new_world(waiting, memory_store(), Clock(), 0)
    run_phases(world, (install,), calm_rounds=2)  # the provision waits, unfinished
    assert world.store.unfinished("rt") is not None
    gone = Phase("deprovisioned", scenario_repo(None, {}), PHASES[-1].goal)

    outcome, _ = run_phases(world, (gone,), calm_rounds=10)

    assert outcome.problems == []
    ours = "app.kubernetes.io/managed-by"  # Ignore modules keep their own labels, not ours
    assert [o for o in waiting.objects() if ours in (o["metadata"].get("labels") or {})] == []
