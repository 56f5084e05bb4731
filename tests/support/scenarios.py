"""A fleet-safety scenario for the fault and crash tests: phases, a driver, and the invariants.

One runtime ``rt`` goes through six phases, driven as ``reconciler sync`` drives it (a new
Runner and Engine per round, one run of the runtime's operation per round, runtimes that left
git deprovisioned) with a fake clock moved :data:`ROUND_SECONDS` per round:

1. ``install``: widget 1.0.0 (a CRD, an operator, a ConfigMap, a default configuration), gadget
   (depends on widget, a default configuration), thing (strategy Ignore), gizmo (a default
   configuration). The user then plants objects of their own (a Namespace, a ConfigMap in
   widget's namespace, a Widget and a Gadget), edits widget's default configuration and deletes
   gizmo's (L3: neither reverted nor re-created).
2. ``upgrade``: widget 2.0.0 drops its ConfigMap and adds a Service.
3. ``remove-blocked``: gadget (CreateAndDelete) and thing (Ignore) leave git; gadget waits for
   the user's Gadget. The user then deletes it.
4. ``removed``: gadget is deleted.
5. ``deprovision-blocked``: ``rt`` leaves git (another runtime stays); the user's Widget blocks,
   the deprovision ends failed naming it, the runtime stays Deleting. The user deletes it.
6. ``deprovisioned``: a new deprovision removes everything of ours.

Each phase has a goal (a predicate on the store and the cluster). :func:`drive` runs rounds
with faults on until the goal holds or a round budget is spent, then without faults until it
holds. After each phase :func:`phase_problems` checks: no orphans (objects with our labels no
inventory lists), no module left to delete without a real blocker (a user's object that still
exists), every user object still there and unchanged; and every operation that ended
"succeeded" is checked, when it ends, for leftovers. The cluster at each phase end is compared
with the fault-free run's (:func:`normalised`). Used by tests/operations/test_faults.py,
tests/processes/test_crashes.py and the benchmarks in bench/.
"""

from __future__ import annotations

import copy
import json
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from reconciler.cluster.api import Cluster
from reconciler.cluster.memory import InMemoryCluster
from reconciler.core.inventory import LABEL_INVENTORY, Inventory, inventory_from_configmap
from reconciler.core.model import (
    LABEL_MANAGED_BY,
    LABEL_MODULE,
    LABEL_RUNTIME,
    MANAGED_BY_VALUE,
    Channel,
    ClusterAccess,
    ConfigRepo,
    Module,
    ModuleRef,
    ModuleVersion,
    Runtime,
    Settings,
    Strategy,
)
from reconciler.core.objects import Body, ObjectRef
from reconciler.errors import ReconcilerError
from reconciler.lifecycle.executor import ModuleState
from reconciler.operations.engine import Engine
from reconciler.operations.model import Operation, OperationState, OperationType, StepState
from reconciler.operations.runner import Runner
from reconciler.operations.store import SqliteStore, StateStore
from tests.support.faults import FaultyCluster
from tests.support.lifecycle_helpers import GADGET, NAMESPACE, WIDGET, crd, deployment, simple

RUNTIME = "rt"
ROUND_SECONDS = 60.0
START = datetime(2026, 11, 18, 12, 0, tzinfo=UTC)
SERVER_FIELDS = (
    "resourceVersion",
    "uid",
    "generation",
    "creationTimestamp",
    "managedFields",
    "deletionTimestamp",
)
USER_MANAGER = "kubectl"


class Clock:
    """A clock the driver moves by hand."""

    def __init__(self, now: datetime = START) -> None:
        self.now = now

    def __call__(self) -> datetime:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += timedelta(seconds=seconds)


# -- the modules and the repo at each phase ------------------------------------------------------

THING = Module(
    "thing",
    "thing-system",
    "Deployment",
    "thing-operator",
    {
        "1.0.0": ModuleVersion(
            "1.0.0",
            (
                simple("ConfigMap", "thing-config", data={"a": "1"}),
                deployment("thing-operator", "1.0.0"),
            ),
        )
    },
)
GIZMO = Module(
    "gizmo",
    "gizmo-system",
    "Deployment",
    "gizmo-operator",
    {
        "1.0.0": ModuleVersion(
            "1.0.0",
            (crd("Gizmo"), deployment("gizmo-operator", "1.0.0")),
            simple("Gizmo", "default", "example.io/v1", spec={"level": 1}),
        )
    },
)
MODULES = {m.name: m for m in (WIDGET, GADGET, THING, GIZMO)}


def scenario_repo(
    refs: Sequence[ModuleRef] | None,
    versions: Mapping[str, str],
    modules: Mapping[str, Module] = MODULES,
) -> ConfigRepo:
    """A repo whose channel ``regular`` serves ``versions``; ``rt`` lists ``refs`` (``None``:
    ``rt`` is gone from git). Runtime ``keep`` always stays, never synced, so that git never
    loses every runtime at once."""
    runtimes = {"keep": Runtime("keep", "regular", ClusterAccess(context="keep"))}
    if refs is not None:
        runtimes[RUNTIME] = Runtime(RUNTIME, "regular", ClusterAccess(context="rt"), tuple(refs))
    return ConfigRepo(
        Settings(), runtimes, dict(modules), {"regular": Channel("regular", versions)}
    )


V1 = {"widget": "1.0.0", "gadget": "1.0.0", "thing": "1.0.0", "gizmo": "1.0.0"}
V2 = {**V1, "widget": "2.0.0"}
ALL_REFS = (
    ModuleRef("widget"),
    ModuleRef("gadget"),
    ModuleRef("thing", strategy=Strategy.IGNORE),
    ModuleRef("gizmo"),
)
KEPT_REFS = (ModuleRef("widget"), ModuleRef("gizmo"))


# -- what the user does ---------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class UserAction:
    """One change a user makes: create (``body``), delete (``ref``) or merge-patch one of our
    objects (``ref`` and ``patch``; not a user object, so not in the ledger)."""

    verb: str
    body: Mapping[str, Any] | None = None
    ref: ObjectRef | None = None
    patch: Mapping[str, Any] | None = None

    def apply(self, cluster: Cluster) -> None:
        """Carry it out on ``cluster`` (never through faults)."""
        if self.verb == "create":
            assert self.body is not None
            cluster.apply(self.body, field_manager=USER_MANAGER)
        elif self.verb == "delete":
            assert self.ref is not None
            cluster.delete(self.ref)
        else:
            assert self.ref is not None
            assert self.patch is not None
            cluster.patch(self.ref, self.patch)


def _user_cr(kind: str, name: str) -> dict[str, Any]:
    return {
        "apiVersion": "example.io/v1",
        "kind": kind,
        "metadata": {"name": name, "namespace": "apps"},
        "spec": {"owner": "team-a"},
    }


USER_WIDGET = _user_cr("Widget", "mine")
USER_GADGET = _user_cr("Gadget", "mine")
PLANT = (
    UserAction("create", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "apps"}}),
    UserAction(
        "create",
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": "user-data", "namespace": NAMESPACE},
            "data": {"keep": "me"},
        },
    ),
    UserAction("create", USER_WIDGET),
    UserAction("create", USER_GADGET),
    UserAction(
        "patch",
        ref=ObjectRef("example.io/v1", "Widget", NAMESPACE, "default"),
        patch={"spec": {"size": 7}},
    ),
    UserAction("delete", ref=ObjectRef("example.io/v1", "Gizmo", "gizmo-system", "default")),
)


# -- phases and their goals -----------------------------------------------------------------------


@dataclass
class World:
    """One run of the scenario: the cluster as it really is, the same behind faults, the
    store, the clock, and what the checks found."""

    cluster: InMemoryCluster
    faulty: FaultyCluster
    store: StateStore
    clock: Clock
    problems: list[str] = field(default_factory=list)
    checked: set[str] = field(default_factory=set)
    errors: int = 0
    rounds: int = 0
    runners: dict[int, Runner] = field(default_factory=dict)
    phase: str = ""


Goal = Callable[[World], bool]


def _latest(world: World) -> Operation | None:
    found = world.store.operations(runtime=RUNTIME, limit=1)
    return found[0] if found else None


def settled(world: World) -> bool:
    """The runtime's latest operation succeeded and nothing is pending."""
    latest = _latest(world)
    return (
        latest is not None
        and latest.state is OperationState.SUCCEEDED
        and world.store.unfinished(RUNTIME) is None
    )


def gadget_blocked(world: World) -> bool:
    """An update waits in Remove_Modules, naming the user's Gadget."""
    current = world.store.unfinished(RUNTIME)
    if current is None:
        return False
    return any(
        step.name == "Remove_Modules"
        and step.state is StepState.RETRYING
        and "Gadget/apps/mine" in step.message
        for stage in current.stages
        for step in stage.steps
    )


def deprovision_failed_on_widget(world: World) -> bool:
    """The latest deprovision ended failed naming the user's Widget; the runtime is Deleting."""
    latest = _latest(world)
    records = {r.runtime: r for r in world.store.runtimes()}
    return (
        latest is not None
        and latest.type is OperationType.DEPROVISION
        and latest.state is OperationState.FAILED
        and "Widget/apps/mine" in latest.message
        and RUNTIME in records
        and records[RUNTIME].state == str(ModuleState.DELETING)
    )


def deprovisioned(world: World) -> bool:
    """The runtime is forgotten and its last operation, a deprovision, succeeded."""
    latest = _latest(world)
    return (
        settled(world)
        and latest is not None
        and latest.type is OperationType.DEPROVISION
        and all(r.runtime != RUNTIME for r in world.store.runtimes())
    )


@dataclass(frozen=True, slots=True)
class Phase:
    """A state of git, the goal the runtime must reach, and what the user does after it."""

    name: str
    repo: ConfigRepo
    goal: Goal
    user: tuple[UserAction, ...] = ()


def _delete(body: Mapping[str, Any]) -> UserAction:
    return UserAction("delete", ref=ObjectRef.of(body))


PHASES: tuple[Phase, ...] = (
    Phase("install", scenario_repo(ALL_REFS, V1), settled, PLANT),
    Phase("upgrade", scenario_repo(ALL_REFS, V2), settled),
    Phase("remove-blocked", scenario_repo(KEPT_REFS, V2), gadget_blocked, (_delete(USER_GADGET),)),
    Phase("removed", scenario_repo(KEPT_REFS, V2), settled),
    Phase(
        "deprovision-blocked",
        scenario_repo(None, V2),
        deprovision_failed_on_widget,
        (_delete(USER_WIDGET),),
    ),
    Phase("deprovisioned", scenario_repo(None, V2), deprovisioned),
)


def ledger_after(phases: Sequence[Phase], count: int) -> dict[ObjectRef, Body]:
    """The user's objects (reference -> what the user wrote) after the first ``count`` phases
    and their user actions."""
    ledger: dict[ObjectRef, Body] = {}
    for phase in phases[:count]:
        for action in phase.user:
            if action.verb == "create" and action.body is not None:
                ledger[ObjectRef.of(action.body)] = copy.deepcopy(dict(action.body))
            elif action.verb == "delete" and action.ref is not None:
                ledger.pop(action.ref, None)
    return ledger


# -- the driver -----------------------------------------------------------------------------------


def new_world(cluster: InMemoryCluster, store: StateStore, clock: Clock, seed: int) -> World:
    """A world on ``cluster`` with faults drawn from ``seed`` (off until :func:`drive`)."""
    return World(cluster, FaultyCluster(cluster, seed=seed), store, clock)


def run_round(world: World, repo: ConfigRepo) -> None:
    """What one ``reconciler sync`` does: run each runtime's operation once (the runtime in git,
    and every runtime the store knows that git dropped); then time passes."""
    runner = world.runners.get(id(repo))
    if runner is None:  # one per repo, as a daemon keeps its renderer for a commit
        engine = Engine(world.store, clock=world.clock, plugins=[])
        runner = Runner(world.store, engine, repo, lambda access, name: world.faulty, world.clock)
        world.runners = {id(repo): runner}
    targets = [RUNTIME] if RUNTIME in repo.runtimes else []
    targets += runner.removed_runtimes()
    for name in targets:
        try:
            operation = runner.run(runner.operation_for(name)).operation
        except ReconcilerError:  # the CLI reports it; the next sync tries again
            world.errors += 1
            continue
        if operation.state is OperationState.SUCCEEDED and operation.id not in world.checked:
            world.checked.add(operation.id)
            for text in left_behind(world.cluster.objects(), repo, operation):
                world.problems.append(f"{world.phase}: {text}")
    world.clock.advance(ROUND_SECONDS)
    world.rounds += 1


def drive(world: World, phase: Phase, rate: float, faulty_rounds: int, calm_rounds: int) -> str:
    """Rounds with faults at ``rate`` until the goal holds (at most ``faulty_rounds``), then
    rounds without faults until it holds (at most ``calm_rounds``). Returns "faulty" or "calm"
    (when the goal was reached), or "" (never)."""
    world.phase = phase.name
    world.faulty.rate = rate
    for _ in range(faulty_rounds):
        run_round(world, phase.repo)
        if phase.goal(world):
            world.faulty.rate = 0.0
            return "faulty"
    world.faulty.rate = 0.0
    for _ in range(calm_rounds):
        run_round(world, phase.repo)
        if phase.goal(world):
            return "calm"
    return ""


# -- the invariants -------------------------------------------------------------------------------


def _labels(body: Mapping[str, Any]) -> Mapping[str, str]:
    labels: Mapping[str, str] = body.get("metadata", {}).get("labels") or {}
    return labels


def _ours(body: Mapping[str, Any]) -> bool:
    return _labels(body).get(LABEL_MANAGED_BY) == MANAGED_BY_VALUE


Objects = Sequence[Body]


def inventories(objects: Objects) -> list[Inventory]:
    """Every inventory among ``objects``."""
    return [
        inventory_from_configmap(body)
        for body in objects
        if body.get("kind") == "ConfigMap" and _labels(body).get(LABEL_INVENTORY) == "true"
    ]


def orphans(objects: Objects) -> list[str]:
    """Objects with our labels that no inventory of their runtime lists."""
    listed: set[tuple[str, ObjectRef]] = set()
    for inventory in inventories(objects):
        listed |= {(inventory.runtime, ref) for ref in inventory.objects}
        if inventory.default_configuration is not None:
            listed.add((inventory.runtime, inventory.default_configuration))
    found = []
    for body in objects:
        labels = _labels(body)
        if not _ours(body) or labels.get(LABEL_INVENTORY) == "true":
            continue
        if (labels.get(LABEL_RUNTIME, ""), ObjectRef.of(body)) not in listed:
            found.append(f"orphan {ObjectRef.of(body).subject} (module {labels.get(LABEL_MODULE)})")
    return found


def _wanted_modules(repo: ConfigRepo) -> set[str]:
    runtime = repo.runtimes.get(RUNTIME)
    return {ref.name for ref in runtime.modules} if runtime else set()


def stuck(objects: Objects, repo: ConfigRepo, ledger: Mapping[ObjectRef, Body]) -> list[str]:
    """Modules that left git whose inventory is still there while no user object of their
    kinds exists (nothing real blocks their deletion)."""
    found = []
    live = {ObjectRef.of(b) for b in objects}
    for inventory in inventories(objects):
        if inventory.runtime != RUNTIME or inventory.module in _wanted_modules(repo):
            continue
        blockers = [
            ref
            for ref in ledger
            if ref in live and (ref.group, ref.kind) in inventory.managed_kinds
        ]
        if not blockers:
            found.append(
                f"module {inventory.module} stuck: left to delete while nothing of a user blocks it"
            )
    return found


def user_view(body: Mapping[str, Any]) -> dict[str, Any]:
    """What a user wrote into an object: its identity, labels, spec and data."""
    metadata = body.get("metadata", {})
    return {
        "ref": ObjectRef.of(body).subject,
        "labels": dict(metadata.get("labels") or {}),
        "spec": body.get("spec"),
        "data": body.get("data"),
    }


def users_lost(objects: Objects, ledger: Mapping[ObjectRef, Body]) -> list[str]:
    """User objects that are gone or changed."""
    live = {ObjectRef.of(body): body for body in objects}
    found = []
    for ref, written in sorted(ledger.items()):
        if ref not in live:
            found.append(f"user object {ref.subject} deleted")
        elif user_view(live[ref]) != user_view(written):
            found.append(f"user object {ref.subject} changed")
    return found


def left_behind(objects: Objects, repo: ConfigRepo, operation: Operation) -> list[str]:
    """What a succeeded ``operation`` must not have left: for a deprovision anything of its
    runtime with our labels; for the others inventories or objects of modules that left git,
    or orphans."""
    found = []
    wanted = set() if operation.type is OperationType.DEPROVISION else _wanted_modules(repo)
    for body in objects:
        labels = _labels(body)
        mine = _ours(body) and labels.get(LABEL_RUNTIME) == operation.runtime
        if mine and labels.get(LABEL_MODULE) not in wanted:
            found.append(ObjectRef.of(body).subject)
    if operation.type is not OperationType.DEPROVISION:
        found += orphans(objects)
    return [f"{operation.type} {operation.id} succeeded but left {what}" for what in found]


def phase_problems(
    objects: Objects, phase: Phase, ledger: Mapping[ObjectRef, Body], converged: bool
) -> list[str]:
    """Everything wrong with ``objects`` at the end of ``phase``."""
    found = [] if converged else [f"did not reach its goal ({phase.goal.__name__})"]
    found += orphans(objects)
    found += stuck(objects, phase.repo, ledger)
    found += users_lost(objects, ledger)
    return [f"{phase.name}: {text}" for text in found]


def normalised(objects: Objects, store: StateStore | None = None) -> dict[str, Any]:
    """The objects without what the server makes up (resource versions, uids, generations,
    times, field owners), keyed by object; with the runtime's recorded state when a store is
    given (its state; the reason names the last action, which retries may change)."""
    state: dict[str, Any] = {}
    for body in objects:
        clean = copy.deepcopy(body)
        for name in SERVER_FIELDS:
            clean["metadata"].pop(name, None)
        clean.get("status", {}).pop("observedGeneration", None)
        ref = ObjectRef.of(body)
        state[f"{ref.api_version} {ref.subject}"] = clean
    if store is not None:
        records = {r.runtime: r.state for r in store.runtimes()}
        state["runtime record"] = records.get(RUNTIME)
    return state


def differences(mine: Mapping[str, Any], reference: Mapping[str, Any]) -> list[str]:
    """What differs between two normalised states, one line per object."""
    found = []
    for key in sorted(set(mine) | set(reference)):
        if key not in reference:
            found.append(f"extra {key}")
        elif key not in mine:
            found.append(f"missing {key}")
        elif mine[key] != reference[key]:
            left = json.dumps(mine[key], sort_keys=True)[:300]
            right = json.dumps(reference[key], sort_keys=True)[:300]
            found.append(f"differs {key}: {left} != fault-free {right}")
    return found


# -- one whole run --------------------------------------------------------------------------------


@dataclass
class Outcome:
    """How one run of the scenario ended."""

    seed: int
    converged: int = 0
    under_faults: int = 0
    rounds: int = 0
    problems: list[str] = field(default_factory=list)
    calls: int = 0
    faults: Counter[str] = field(default_factory=Counter)

    def count(self, word: str) -> int:
        """Problems whose text contains ``word``."""
        return sum(word in p for p in self.problems)


Reference = list[dict[str, Any]]


def run_phases(
    world: World,
    phases: Sequence[Phase],
    *,
    first: int = 0,
    rate: float = 0.0,
    faulty_rounds: int = 0,
    calm_rounds: int = 25,
    reference: Reference | None = None,
    outcome: Outcome | None = None,
) -> tuple[Outcome, Reference]:
    """Drive ``phases[first:]``, checking each phase end (and comparing it with ``reference``,
    the states a fault-free run reached); returns the outcome and the states reached."""
    outcome = outcome or Outcome(0)
    states: Reference = []
    for index in range(first, len(phases)):
        phase = phases[index]
        reached = drive(world, phase, rate, faulty_rounds, calm_rounds)
        converged = bool(reached)
        outcome.converged += converged
        outcome.under_faults += reached == "faulty"
        ledger = ledger_after(phases, index)
        objects = world.cluster.objects()
        found = phase_problems(objects, phase, ledger, converged)
        state = normalised(objects, world.store)
        states.append(state)
        if reference is not None:
            found += [f"{phase.name}: {d}" for d in differences(state, reference[index])]
        outcome.problems += found
        for action in phase.user:
            action.apply(world.cluster)
    outcome.problems += world.problems
    outcome.calls += world.faulty.total
    outcome.rounds += world.rounds
    outcome.faults += world.faulty.faults
    return outcome, states


def with_modules(phases: Sequence[Phase], modules: Mapping[str, Module]) -> tuple[Phase, ...]:
    """``phases`` with some modules replaced (variants of the scenario)."""
    merged = {**MODULES, **modules}
    return tuple(replace(p, repo=replace(p.repo, modules=merged)) for p in phases)


def memory_store() -> SqliteStore:
    """A SQLite store in memory (the fault runs do not test the store, and fsyncs are slow)."""
    return SqliteStore(Path(":memory:"))


def run_seeds(
    seeds: Iterable[int],
    phases: Sequence[Phase],
    reference: Reference,
    rate: float,
    faulty_rounds: int,
    calm_rounds: int,
) -> list[Outcome]:
    """Each seed's run of ``phases`` with faults at ``rate``, compared with ``reference``."""
    outcomes = []
    for seed in seeds:
        world = new_world(InMemoryCluster(), memory_store(), Clock(), seed)
        outcome, _ = run_phases(
            world,
            phases,
            rate=rate,
            faulty_rounds=faulty_rounds,
            calm_rounds=calm_rounds,
            reference=reference,
            outcome=Outcome(seed),
        )
        outcomes.append(outcome)
    return outcomes


def fault_summary(outcomes: Sequence[Outcome], phases: int, rate: float) -> str:
    """Counts over all seeds, and the first problems of the seeds that had any."""
    faults: Counter[str] = Counter()
    for outcome in outcomes:
        faults += outcome.faults
    bad = [o for o in outcomes if o.problems]
    lines = [
        f"seeds {len(outcomes)}, fault rate {rate:.0%}: "
        f"API calls {sum(o.calls for o in outcomes)}, faults {dict(sorted(faults.items()))}",
        f"phases converged {sum(o.converged for o in outcomes)} of {len(outcomes) * phases} "
        f"({sum(o.under_faults for o in outcomes)} while faults were on)",
        f"orphans {sum(o.count('orphan') for o in outcomes)}, "
        f"stuck {sum(o.count('stuck') for o in outcomes)}, "
        f"user objects lost {sum(o.count('user object') for o in outcomes)}, "
        f"succeeded with leftovers {sum(o.count('succeeded but left') for o in outcomes)}, "
        f"seeds differing from the fault-free run {len(bad)}",
    ]
    lines += [f"seed {o.seed}: {p}" for o in bad[:10] for p in o.problems[:5]]
    return "\n".join(lines)
