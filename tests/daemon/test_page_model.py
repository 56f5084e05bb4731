"""The status page's view model, from plain values (no store, no HTTP, no template): counts by
state, each filter, pages, the operation tree, a blocked deletion, and the commits that are not
in force with how to let them through."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from reconciler.core.head import Head
from reconciler.core.rollouts import HaltReason, Member, MemberState, Rollout, RolloutState, Wave
from reconciler.core.status import ModuleState, ModuleStatus, PassResult, Reason, worst_state
from reconciler.core.unchanged import UnchangedSince
from reconciler.daemon.page_model import (
    MAX_PER_PAGE,
    FleetQuery,
    FleetRuntime,
    SourceView,
    fleet_view,
    held_problem,
    refused_problem,
    rollout_hold,
)
from reconciler.daemon.page_runtime import runtime_view
from reconciler.operations.model import (
    Operation,
    OperationData,
    OperationState,
    OperationType,
    RuntimeRecord,
    RuntimeStatus,
    StageRecord,
    StepRecord,
    StepState,
    Suspension,
)

NOW = datetime(2026, 11, 27, 12, 0, tzinfo=UTC)
COMMIT = Head("a" * 40)


def _status(name: str, *modules: ModuleStatus, operation: Operation | None = None) -> RuntimeStatus:
    """``name`` whose last finished operation left ``modules``, seen through ``operation``."""
    state = worst_state(m.state for m in modules)
    reason = next((m.reason for m in modules if m.state is state), Reason.READY)
    updated = NOW - timedelta(minutes=3)
    record = RuntimeRecord(name, state, reason, "msg", COMMIT, updated, modules)
    return RuntimeStatus.of(record, operation)


def _module(
    name: str, state: ModuleState = ModuleState.READY, reason: Reason = Reason.READY
) -> ModuleStatus:
    return ModuleStatus(name, state, reason, f"{name} is {state}", "1.0.0")


def _operation(
    runtime: str,
    state: OperationState = OperationState.SUCCEEDED,
    stages: list[StageRecord] | None = None,
    data: OperationData | None = None,
) -> Operation:
    return Operation(
        id="op-" + runtime,
        runtime=runtime,
        type=OperationType.UPDATE,
        state=state,
        created=NOW - timedelta(minutes=5),
        deadline=NOW + timedelta(hours=3),
        stages=stages or [],
        commit=COMMIT,
        message="",
        data=data or OperationData(),
    )


def _fleet() -> list[FleetRuntime]:
    """Seven runtimes: 3 Ready (eu, us, ap), 1 Error, 1 Warning, 1 suspended, 1 never synced."""
    istio, serverless = _module("istio"), _module("serverless")
    error = _module("istio", ModuleState.ERROR, Reason.FAILED)
    warning = _module("keda", ModuleState.WARNING, Reason.DOWNGRADE_NOT_SUPPORTED)

    def synced(name: str, labels: dict[str, str], *modules: ModuleStatus) -> FleetRuntime:
        return FleetRuntime(name, labels, True, status=_status(name, *modules))

    return [
        synced("prod-eu-1", {"tier": "prod", "region": "eu"}, istio, serverless),
        synced("prod-us-1", {"tier": "prod", "region": "us"}, istio),
        synced("prod-ap-1", {"tier": "prod", "region": "ap"}, istio),
        synced("staging-eu", {"tier": "staging"}, error),
        synced("dev-a", {"tier": "dev"}, warning),
        FleetRuntime("dev-b", {"tier": "dev"}, True, suspended_in_git=True),
        FleetRuntime("new-one", {}, True),
    ]


def _view(**params: str) -> list[str]:
    view = fleet_view(_fleet(), FleetQuery.of(params), SourceView(), NOW)
    return [row.name for row in view.rows]


def test_counts_cover_the_whole_fleet_worst_state_first_whatever_the_filter() -> None:
    view = fleet_view(_fleet(), FleetQuery.of({"state": "Ready"}), SourceView(), NOW)

    counts = [(c.state, c.count, c.selected) for c in view.counts]
    assert counts == [
        ("Error", 1, False),
        ("Warning", 1, False),
        ("Ready", 3, True),
        ("Suspended", 1, False),
        ("NotSynced", 1, False),
    ]
    assert (view.total, view.matched) == (7, 3)


def test_rows_are_worst_state_first_then_by_name() -> None:
    assert _view() == [
        "staging-eu", "dev-a", "prod-ap-1", "prod-eu-1", "prod-us-1", "dev-b", "new-one"
    ]  # fmt: skip


def test_each_filter_and_all_of_them_together() -> None:
    assert _view(state="error") == ["staging-eu"]  # case does not matter
    assert _view(module="serverless") == ["prod-eu-1"]
    assert _view(q="EU") == ["staging-eu", "prod-eu-1"]
    assert _view(label="tier=prod,region in (eu,us)") == ["prod-eu-1", "prod-us-1"]
    assert _view(label="tier=prod", q="us", module="istio", state="Ready") == ["prod-us-1"]
    assert _view(state="NotSynced") == ["new-one"]
    assert _view(state="Suspended") == ["dev-b"]


def test_a_bad_label_selector_keeps_nothing_and_says_why() -> None:
    view = fleet_view(_fleet(), FleetQuery.of({"label": "tier=(prod"}), SourceView(), NOW)

    assert view.rows == ()
    assert "tier=(prod" in view.error


def test_pages_of_a_large_fleet_and_links_that_keep_the_filters() -> None:
    fleet = [FleetRuntime(f"rt-{i:05}", {"tier": "prod"}, True) for i in range(5000)]
    query = FleetQuery.of({"page": "3", "label": "tier=prod", "per_page": "200"})

    view = fleet_view(fleet, query, SourceView(), NOW)

    assert (view.pages.page, view.pages.pages, view.pages.first, view.pages.last) == (
        3,
        25,
        401,
        600,
    )
    assert [view.rows[0].name, view.rows[-1].name] == ["rt-00400", "rt-00599"]
    assert (view.pages.previous, view.pages.next) == (2, 4)
    assert query.params(page=4) == {"label": "tier=prod", "page": "4", "per_page": "200"}
    assert FleetQuery.of({}).params() == {}


def test_a_page_past_the_last_is_the_last_and_nonsense_numbers_are_the_defaults() -> None:
    fleet = [FleetRuntime(f"rt-{i}", {}, True) for i in range(250)]

    view = fleet_view(fleet, FleetQuery.of({"page": "99"}), SourceView(), NOW)

    assert (view.pages.page, view.pages.first, view.pages.last, view.pages.next) == (
        3,
        201,
        250,
        None,
    )
    assert FleetQuery.of({"page": "-1", "per_page": "x"}) == FleetQuery()
    assert FleetQuery.of({"per_page": "100000"}).per_page == MAX_PER_PAGE
    empty = fleet_view([], FleetQuery(), SourceView(), NOW)
    assert (empty.pages.pages, empty.rows, empty.counts) == (1, (), ())


def test_a_runtime_page_has_the_operation_tree_and_what_blocks_a_deletion() -> None:
    blocked = ModuleStatus(
        "serverless", ModuleState.DELETING, Reason.WAITING_FOR_RESOURCES,
        "waits for 1 Function: Function/apps/mine", "1.1.0",
    )  # fmt: skip
    stages = [
        StageRecord("plan", [StepRecord("Plan_Changes", StepState.DONE, 1)], True, NOW),
        StageRecord(
            "remove",
            [
                StepRecord(
                    "Remove_Modules", StepState.RETRYING, 4, started=NOW,
                    retry_at=NOW + timedelta(seconds=30), message="waits for 1 Function",
                ),
                StepRecord("Delete_Inventory"),
            ],
        ),
    ]  # fmt: skip
    present = PassResult((_module("istio"),))
    data = OperationData(applied=present, removals=PassResult((blocked,)))
    operation = _operation("prod-eu-1", OperationState.IN_PROGRESS, stages, data)
    operation.owner = "replica-a"
    before = (_module("istio"), _module("serverless"))
    status = _status("prod-eu-1", *before, operation=operation)
    runtime = FleetRuntime(
        "prod-eu-1", {"tier": "prod"}, True, channel="regular", status=status, owner="replica-a"
    )

    view = runtime_view(runtime, [operation], SourceView(), NOW)

    assert [(m.module, m.version, m.state, m.reason, m.owner) for m in view.modules] == [
        ("istio", "1.0.0", "Ready", "Ready", "replica-a"),
        ("serverless", "1.1.0", "Deleting", "WaitingForResources", "replica-a"),
    ]
    assert [(b.module, b.message) for b in view.blocked] == [
        ("serverless", "waits for 1 Function: Function/apps/mine")
    ]
    (shown,) = view.operations
    assert [(s.name, s.done) for s in shown.stages] == [("plan", True), ("remove", False)]
    step = shown.stages[1].steps[0]
    assert (step.mark, step.state, step.attempts, step.retry_at) == (
        "~",
        "retrying",
        4,
        "2026-11-27 12:00:30 UTC",
    )
    assert shown.waiting == (
        "remove/Remove_Modules (next attempt 2026-11-27 12:00:30 UTC): waits for 1 Function"
    )
    assert view.last_finished == ("Ready", "Ready", "msg")
    assert (view.state, view.channel, view.labels) == ("Deleting", "regular", ("tier=prod",))


def test_a_runtime_never_synced_and_one_suspended_say_so() -> None:
    fresh = runtime_view(FleetRuntime("new-one", {}, True), [], SourceView(), NOW)
    record = RuntimeRecord("dev-b", ModuleState.READY, Reason.READY, "", COMMIT, NOW)
    suspended = RuntimeStatus.of(record, None, Suspension("dev-b", NOW, "migrating nodes"))
    paused = runtime_view(FleetRuntime("dev-b", {}, True, status=suspended), [], SourceView(), NOW)

    assert (fresh.state, fresh.message, fresh.modules, fresh.operations) == (
        "NotSynced",
        "no operation has run yet",
        (),
        (),
    )
    assert (paused.state, paused.message) == (
        "Suspended",
        "suspended since 2026-11-27 12:00 UTC: migrating nodes",
    )


def test_a_refused_commit_names_file_and_line_and_a_held_one_how_to_allow_it() -> None:
    error = {"path": "runtimes/prod-eu-1.yaml", "line": 7, "column": 3, "rule": "C1"}
    errors = [error | {"message": "unknown field 'chanel'"}]
    refused = refused_problem("b" * 40, "commit bbbb refused: 1 error(s)", errors)
    held = held_problem("c" * 40, "held: 4 deletions over the limit 3", ["prod-eu-1"])

    assert refused.errors == (("runtimes/prod-eu-1.yaml", 7, 3, "C1", "unknown field 'chanel'"),)
    assert "push a new commit" in refused.how
    assert held.how.startswith("Restart the daemon with --allow-deletions cccccccccccc")
    assert held.removals == ("prod-eu-1",)
    assert SourceView(commit="d" * 40 + "+" + "e" * 40).short == "dddddddd+eeeeeeee"


def test_a_commit_refused_for_its_signature_names_each_commit_and_how_to_sign_it() -> None:
    unsigned = {"commit": "f" * 40, "status": "Unsigned", "signer": "", "key": ""}
    untrusted = {"commit": "e" * 40, "status": "UntrustedKey", "key": "SHA256:abc"}
    refused = refused_problem(
        "f" * 40,
        "commit ffff refused: it is not signed",
        [],
        [unsigned | {"reason": "it is not signed"}, untrusted | {"reason": "untrusted"}],
    )

    assert refused.signatures == (
        ("f" * 40, "Unsigned", "", "", "it is not signed"),
        ("e" * 40, "UntrustedKey", "", "SHA256:abc", "untrusted"),
    )
    assert refused.how.startswith("Push a new commit signed by a trusted key")
    assert "--trusted-ssh-signers" in refused.how


# -- the commit a runtime is at, and the rollout that holds it back ------------------------------

IN_FORCE = Head("c" * 40)


def _waves(state: RolloutState, message: str = "", reason: HaltReason | None = None) -> Rollout:
    """Commit c... rolled out in waves dev (dev-a, under way) and prod (prod-eu-1, pending)."""
    return Rollout(
        id="c" * 12, commit=IN_FORCE.text, created=NOW, state=state,
        waves=(Wave("dev", "tier=dev", ("dev-a",)), Wave("prod", "tier=prod", ("prod-eu-1",))),
        members=(
            Member("dev-a", 0, MemberState.PROGRESSING, COMMIT.text),
            Member("prod-eu-1", 1, MemberState.PENDING, COMMIT.text),
        ),
        healthy_for=timedelta(minutes=10), max_errors=1, reason=reason, message=message,
    )  # fmt: skip


def _at(name: str, rollout: Rollout | None = None, *, in_sync: bool = False) -> FleetRuntime:
    """``name``, Ready, last reconciled at COMMIT."""
    return FleetRuntime.of(
        name, None, _status(name, _module("istio")), "", in_sync=in_sync, rollout=rollout
    )


def test_a_runtime_a_rollout_holds_back_shows_its_wave_and_why_on_both_pages() -> None:
    source = SourceView(commit=IN_FORCE.text)
    held = _at("prod-eu-1", _waves(RolloutState.PROGRESSING))
    released = _at("dev-a", _waves(RolloutState.PROGRESSING))

    rows = {r.name: r for r in fleet_view([held, released], FleetQuery(), source, NOW).rows}
    page = runtime_view(held, [], source, NOW)

    assert rows["dev-a"].hold is None
    hold = rows["prod-eu-1"].hold
    assert hold is not None
    assert hold == page.hold
    assert hold.mark == "held: wave prod (2 of 2)"
    assert hold.text == (
        f"held back by rollout {'c' * 12} of commit {'c' * 12} in wave prod (2 of 2), keeping "
        f"commit {'a' * 8}: its wave starts once wave dev (1 of 2) stays healthy"
    )
    assert (rows["prod-eu-1"].commit, page.commit) == ("a" * 8, "a" * 8)  # the commit it keeps
    assert rows["prod-eu-1"].commit_note == f"held back by rollout {'c' * 12}"


def test_why_a_runtime_is_held_follows_the_rollout_s_state() -> None:
    def why(rollout: Rollout) -> str:
        hold = rollout_hold(rollout, "prod-eu-1")
        assert hold is not None
        return hold.why

    assert why(_waves(RolloutState.PAUSED, "waiting for the change window")) == (
        "the rollout is paused: waiting for the change window"
    )
    halted = _waves(RolloutState.HALTED, "1 runtime(s) in Error: dev-a", HaltReason.ERRORS)
    assert why(halted) == "the rollout halted (FailureThreshold): 1 runtime(s) in Error: dev-a"
    assert why(_waves(RolloutState.CANCELED)) == "the rollout was canceled"
    for done in (RolloutState.COMPLETED, RolloutState.SUPERSEDED):
        assert rollout_hold(_waves(done), "prod-eu-1") is None  # it gates no more
    assert rollout_hold(_waves(RolloutState.PAUSED), "not-in-it") is None


def test_a_runtime_the_newer_commits_did_not_change_is_in_sync_at_the_commit_in_force() -> None:
    middle = Head("b" * 40)
    unchanged = (
        UnchangedSince()
        .advance(COMMIT.text, middle.text, ["prod-eu-1", "dev-a"], {"dev-a"})
        .advance(middle.text, IN_FORCE.text, ["prod-eu-1", "dev-a"], set())
    )
    source = SourceView(commit=IN_FORCE.text)

    def shown(name: str) -> tuple[str, str]:
        runtime = _at(name, in_sync=unchanged.in_sync(name, COMMIT.text, IN_FORCE.text))
        row = fleet_view([runtime], FleetQuery(), source, NOW).rows[0]
        page = runtime_view(runtime, [], source, NOW)
        assert (page.commit, page.commit_note) == (row.commit, row.commit_note)
        return row.commit, row.commit_note

    assert shown("prod-eu-1") == (
        "c" * 8,
        f"in sync: the commits since {'a' * 8}, where it was last reconciled, change nothing of it",
    )
    assert shown("dev-a") == ("a" * 8, "")  # b... changed it: not reconciled there yet
    assert unchanged.in_sync("dev-a", middle.text, IN_FORCE.text)
    assert not UnchangedSince().in_sync("prod-eu-1", COMMIT.text, IN_FORCE.text)  # unknown
