"""The commit gate on its own: a poll's verdicts over a fake ledger, reader and brake (the
gate's seams), no git, no store, no daemon; and the source state it keeps, changed only
through its named transitions."""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest

from reconciler.core.brake import Allowance, Deletions, Verdict, judge, limits_for
from reconciler.core.diagnostics import Diagnostic
from reconciler.core.head import Head
from reconciler.core.model import ConfigRepo, ModuleRef
from reconciler.core.notifications import Notification, NotificationKind
from reconciler.daemon.commits import CommitGate, GateParts
from reconciler.daemon.logs import Repeats
from reconciler.daemon.metrics import Metrics
from reconciler.daemon.reading import ReadCommit
from reconciler.daemon.source_state import SourceState
from reconciler.daemon.verdicts import Refusal, encode
from reconciler.errors import SourceError, TransientError
from reconciler.operations.model import CommitRecord, CommitVerdict
from reconciler.operations.running import Judged, Running
from reconciler.operations.store.contract import may_replace
from tests.support.lifecycle_helpers import repo
from tests.support.runs import Clock

FIRST, SECOND = Head("1" * 40), Head("2" * 40)
WIDGET = repo(ModuleRef("widget"))
BOTH = repo(ModuleRef("widget"), ModuleRef("gadget"))


class Ledger:
    """The verdicts on commits in memory, by the store contract's rule of which verdict may
    replace which (:func:`may_replace`) and its compare-and-set on the commit in force."""

    def __init__(self) -> None:
        self.records: dict[str, CommitRecord] = {}
        self.accepted: list[CommitRecord] = []

    def decide_commit(self, record: CommitRecord) -> CommitRecord:
        standing = self.records.get(record.commit.text)
        in_force = self.accepted[-1].commit if self.accepted else None
        if standing is not None and not may_replace(standing, record, in_force):
            return standing
        self.records[record.commit.text] = record
        return record

    def accept_commit(self, record: CommitRecord, expected: Head | None) -> CommitRecord | None:
        current = self.last_accepted()
        standing = self.records.get(record.commit.text)
        moved = (current.commit if current else None) == expected
        if not moved or (standing is not None and not may_replace(standing, record)):
            return current
        self.records[record.commit.text] = record
        self.accepted.append(record)
        return record

    def commit(self, commit: Head) -> CommitRecord | None:
        return self.records.get(commit.text)

    def last_accepted(self) -> CommitRecord | None:
        return self.accepted[-1] if self.accepted else None


@dataclass
class Reader:
    """A source whose head the test moves and whose commits read as the test says: a repo,
    diagnostics, or an error raised."""

    config: str = FIRST.config
    commits: dict[str, ConfigRepo | tuple[Diagnostic, ...] | Exception] = field(
        default_factory=dict
    )
    unreachable: SourceError | None = None
    reads: list[str] = field(default_factory=list)

    def check(self) -> str:
        if self.unreachable is not None:
            raise self.unreachable
        return self.config

    def head(self, config: str) -> Head:
        return Head(config)

    def read(self, head: Head, in_force: CommitRecord | None) -> ReadCommit:
        self.reads.append(head.text)
        found = self.commits[head.text]
        if isinstance(found, Exception):
            raise found
        if isinstance(found, tuple):
            return ReadCommit(head, diagnostics=found)
        return ReadCommit(head, found)

    def load(self, head: Head) -> ConfigRepo:
        found = self.commits[head.text]
        assert isinstance(found, ConfigRepo)
        return found


class Brake:
    """A brake that counts the deletions the test sets, at the limits it is handed."""

    def __init__(self) -> None:
        self.deletions = Deletions()
        self.judged: list[Judged] = []

    def __call__(self, judged: Judged) -> tuple[Verdict, Running]:
        self.judged.append(judged)
        limits = limits_for(judged.repo.settings, judged.in_force)
        return judge(self.deletions, limits, judged.allowance), Running({})


class Members:
    name = "replica-a"

    def alive(self, owner: str) -> bool:
        return True


@dataclass
class Gate:
    """A gate with its fakes, and what it told and took."""

    gate: CommitGate
    ledger: Ledger
    reader: Reader
    brake: Brake
    clock: Clock
    metrics: Metrics
    told: list[Notification]
    taken: list[Head]

    @property
    def state(self) -> SourceState:
        return self.gate.state


@pytest.fixture
def made() -> Gate:
    ledger, reader, brake, clock, metrics = Ledger(), Reader(), Brake(), Clock(), Metrics()
    told: list[Notification] = []
    taken: list[Head] = []

    class Told:
        def notify(self, notification: Notification) -> None:
            told.append(notification)

    parts = GateParts(
        ledger=ledger,
        reader=reader,
        brake=brake,
        clock=clock,
        metrics=metrics,
        notifier=Told(),
        members=Members(),
        repeats=Repeats(),
        allow_deletions="",
        taken=lambda head, _: taken.append(head),
    )
    reader.commits[FIRST.text] = WIDGET
    gate = CommitGate(SourceState(), parts)
    return Gate(gate, ledger, reader, brake, clock, metrics, told, taken)


def _verdict(made: Gate, head: Head) -> CommitVerdict | None:
    record = made.ledger.commit(head)
    return record.verdict if record is not None else None


def test_a_valid_commit_is_accepted_and_put_in_force(made: Gate) -> None:
    assert made.gate.poll()

    assert made.state.commit == FIRST
    assert made.state.repo is WIDGET
    assert _verdict(made, FIRST) is CommitVerdict.ACCEPTED
    assert made.taken == [FIRST]
    assert made.brake.judged[0].current is None  # a new store: nothing in force yet
    assert not made.gate.poll()  # the same head again: nothing read, nothing taken
    assert made.reader.reads == [FIRST.text]
    assert made.taken == [FIRST]


def test_an_invalid_commit_is_refused_and_the_last_good_one_stays(made: Gate) -> None:
    made.gate.poll()
    wrong = Diagnostic("runtimes/rt.yaml", 3, 1, "C2", "unknown module 'nope'")
    made.reader.commits[SECOND.text], made.reader.config = (wrong,), SECOND.config

    assert not made.gate.poll()

    assert made.state.commit == FIRST
    assert made.state.refused is not None
    assert made.state.refused.commit == SECOND.text
    assert "1 error(s); still on" in made.state.refused.message
    assert _verdict(made, SECOND) is CommitVerdict.REFUSED
    assert [n.kind for n in made.told] == [NotificationKind.COMMIT_REFUSED]
    made.gate.poll()  # refused once for all: not read again, nobody told again
    assert made.reader.reads == [FIRST.text, SECOND.text]
    assert len(made.told) == 1


def test_a_commit_over_the_brake_is_held_at_the_limits_in_force(made: Gate) -> None:
    made.gate.poll()
    made.reader.commits[SECOND.text], made.reader.config = BOTH, SECOND.config
    made.brake.deletions = Deletions(modules=tuple(f"rt/m{i}" for i in range(6)))

    assert not made.gate.poll()

    judged = made.brake.judged[-1]
    assert judged.current is WIDGET
    assert judged.repo is BOTH
    assert judged.in_force is not None
    assert judged.allowance == Allowance()
    assert made.state.held is not None
    assert made.state.held.removals == 6
    assert made.state.commit == FIRST
    assert _verdict(made, SECOND) is CommitVerdict.HELD
    assert b"reconciler_commit_held 1.0" in made.metrics.exposition()
    assert [n.kind for n in made.told] == [NotificationKind.COMMIT_HELD]


def test_a_commit_that_cannot_be_read_yet_waits_then_is_accepted(made: Gate) -> None:
    made.gate.poll()
    cut = TransientError("fetch cut", retry_after=30.0)
    made.reader.commits[SECOND.text], made.reader.config = cut, SECOND.config

    assert not made.gate.poll()

    waiting = made.state.waiting
    assert waiting is not None
    assert waiting.commit == SECOND.text
    assert waiting.failures == 1
    assert made.state.error == "fetch cut"
    assert made.state.seen is None
    assert _verdict(made, SECOND) is CommitVerdict.PENDING
    made.gate.poll()  # not due yet: not read again
    assert made.reader.reads.count(SECOND.text) == 1
    made.reader.commits[SECOND.text] = BOTH
    made.clock.advance(31)
    assert made.gate.poll()
    assert made.state.commit == SECOND
    assert made.state.waiting is None
    assert made.state.pending_since is None
    assert made.told == []


def test_an_unreachable_source_keeps_the_commit_in_force(made: Gate) -> None:
    made.gate.poll()
    made.reader.unreachable = SourceError("git: could not resolve host")

    assert not made.gate.poll()

    assert made.state.error == "git: could not resolve host"
    assert made.state.commit == FIRST
    assert made.state.last_poll == made.clock.now
    made.reader.unreachable = None
    made.gate.poll()
    assert made.state.error == ""


def test_the_verdict_another_replica_wrote_first_stands_here(made: Gate) -> None:
    """Another replica refused the commit while this one was reading it: this one takes that
    verdict up and tells nobody (the replica that decided did)."""
    made.gate.poll()
    made.reader.commits[SECOND.text], made.reader.config = BOTH, SECOND.config
    made.brake.deletions = Deletions(modules=tuple(f"rt/m{i}" for i in range(6)))
    decide = made.ledger.decide_commit

    def another_first(record: CommitRecord) -> CommitRecord:
        if record.verdict is CommitVerdict.HELD:  # the other replica refused it meanwhile
            refused = encode(Refusal(SECOND.text, (), "refused there"))
            decide(CommitRecord(SECOND, CommitVerdict.REFUSED, made.clock(), "", refused))
        return decide(record)

    made.ledger.decide_commit = another_first  # type: ignore[method-assign]

    assert not made.gate.poll()

    assert made.state.refused is not None
    assert made.state.refused.message == "refused there"
    assert made.state.held is None
    assert made.told == []


def test_the_source_state_changes_only_through_its_transitions() -> None:
    state = SourceState()
    state.follow(FIRST, WIDGET)

    with pytest.raises(AttributeError):
        state.commit = SECOND  # type: ignore[misc]
    assert state.commit == FIRST
    assert state.repo is WIDGET
