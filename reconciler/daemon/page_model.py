"""What the status page shows, as frozen values built from plain data (pure: no I/O, no clock,
no template engine; import-linter keeps it so).

- :class:`FleetQuery`: the filters of ``/`` from its query string (``state``, ``label``, a
  kubectl label selector, ``module``, ``q``, a part of the name, ``page``, ``per_page``), so the
  page works without JavaScript; :meth:`FleetQuery.params` gives the links' query strings.
- :func:`fleet_view`: ``/``: every runtime by state with counts, the runtimes that pass the
  filters, worst state first, one page of them.
- :class:`FleetRuntime`: one runtime as the pages gather it (git and the store); its page is
  built by :mod:`reconciler.daemon.page_runtime`.
- :class:`SourceView`: the commit in force and a refused, held or waiting commit, with each
  error's file and line and how to let it through.

Callers: :mod:`reconciler.daemon.page` (which loads the data and renders the templates), tests,
``bench/page_bench.py``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime

from reconciler.core.head import Head, head_text
from reconciler.core.model import Runtime
from reconciler.core.rollouts import MemberState, Rollout, RolloutState
from reconciler.core.selectors import SelectorError, parse_label_selector
from reconciler.core.status import RUNTIME_STATES
from reconciler.operations.model import RuntimeStatus

#: Every state a runtime shows on the page, worst first (the order of the counts and rows).
STATES = RUNTIME_STATES
_RANK = {state: rank for rank, state in enumerate(STATES)}
#: Rows per page of ``/`` unless ``per_page`` asks otherwise (at most :data:`MAX_PER_PAGE`).
PER_PAGE = 100
MAX_PER_PAGE = 500


def _number(text: str, default: int, highest: int) -> int:
    """``text`` as a whole number within 1..``highest`` (``default`` when it is none)."""
    if not text.isascii() or not text.isdigit():
        return default
    return min(max(int(text), 1), highest)


@dataclass(frozen=True, slots=True)
class FleetQuery:
    """The filters and page of ``/`` (empty: no filter)."""

    state: str = ""
    label: str = ""
    module: str = ""
    search: str = ""
    page: int = 1
    per_page: int = PER_PAGE

    @classmethod
    def of(cls, params: Mapping[str, str]) -> FleetQuery:
        """The query of ``/?state=Error&label=tier%3Dprod&module=istio&q=eu&page=2``, given as
        its decoded parameters; bounded, a value that is no number is the default."""
        return cls(
            state=params.get("state", "").strip()[:40],
            label=params.get("label", "").strip()[:500],
            module=params.get("module", "").strip()[:100],
            search=params.get("q", "").strip()[:100],
            page=_number(params.get("page", ""), 1, 1_000_000),
            per_page=_number(params.get("per_page", ""), PER_PAGE, MAX_PER_PAGE),
        )

    def params(self, **changes: str | int) -> dict[str, str]:
        """The query's parameters (those set), with ``changes``: what a link carries."""
        changed = replace(self, **changes)  # type: ignore[arg-type]
        params = {
            "state": changed.state,
            "label": changed.label,
            "module": changed.module,
            "q": changed.search,
            "page": str(changed.page) if changed.page != 1 else "",
            "per_page": str(changed.per_page) if changed.per_page != PER_PAGE else "",
        }
        return {key: value for key, value in params.items() if value}

    @property
    def filtered(self) -> bool:
        """Whether any filter is set."""
        return bool(self.state or self.label or self.module or self.search)


@dataclass(frozen=True, slots=True)
class FleetRuntime:
    """One runtime as the page gathers it: from the commit in force, the store, or both."""

    name: str
    labels: Mapping[str, str] = field(default_factory=dict)
    in_git: bool = False
    #: ``spec.suspend`` in the commit in force.
    suspended_in_git: bool = False
    channel: str = ""
    #: The file that declares it in the config repo ("" when it left git).
    source: str = ""
    status: RuntimeStatus | None = None
    #: The replica that owns it ("" when none is live).
    owner: str = ""
    #: Whether the commit in force wants of it what the commit of its record wanted (the
    #: commits since changed nothing of it: :mod:`reconciler.core.unchanged`).
    in_sync: bool = False
    #: The rollout that holds it back, and why (``None``: none does).
    hold: RolloutHold | None = None

    @classmethod
    def of(
        cls,
        name: str,
        spec: Runtime | None,
        status: RuntimeStatus | None,
        owner: str,
        *,
        in_sync: bool = False,
        rollout: Rollout | None = None,
    ) -> FleetRuntime:
        """Runtime ``name`` as the commit in force declares it (``spec``; ``None``: it left
        git), the store recorded it (``status``; ``None``: never synced) and the newest
        ``rollout`` holds it back or not."""
        hold = rollout_hold(rollout, name)
        if spec is None:
            return cls(name, status=status, owner=owner, in_sync=in_sync, hold=hold)
        return cls(
            name, spec.labels, True, spec.suspend, spec.channel, spec.source, status, owner,
            in_sync, hold,
        )  # fmt: skip

    def commit_shown(self, in_force: str) -> tuple[str, str]:
        """The commit its Commit column shows, and a word on it: the commit in force when it
        is in sync there (the commits since its last operation changed nothing of it), else
        the commit of its record (held back by a rollout, or not reconciled yet)."""
        if self.status is None:
            return "-", ""
        synced = head_text(self.status.current.commit)
        if self.hold is not None:
            return short_commit(synced), f"held back by rollout {self.hold.rollout}"
        if self.in_sync and synced != in_force:
            return short_commit(in_force), (
                f"in sync: the commits since {short_commit(synced)}, where it was last "
                "reconciled, change nothing of it"
            )
        return short_commit(synced), ""

    @property
    def state(self) -> str:
        """Its state as ``reconciler get runtimes`` shows it: ``NotSynced`` before its first
        operation (``Suspended`` then, when git suspends it)."""
        return RuntimeStatus.state_of(self.status, suspended_in_git=self.suspended_in_git)

    @property
    def modules(self) -> tuple[str, ...]:
        """The modules its record names (none before its first operation)."""
        if self.status is None:
            return ()
        return tuple(m.module for m in self.status.current.modules if m.state is not None)


@dataclass(frozen=True, slots=True)
class RolloutHold:
    """A runtime a rollout holds back: it keeps its previous commit (``base``) until its wave
    starts. ``wave`` is its wave's name, ``position`` ``2 of 3``; ``why`` says what the wave
    waits for (the wave under way, a pause, a halt, a cancel, a suspension)."""

    rollout: str
    commit: str
    base: str
    wave: str
    position: str
    why: str

    @property
    def mark(self) -> str:
        """``held: wave prod (3 of 3)``, the fleet table's mark."""
        return f"held: wave {self.wave} ({self.position})"

    @property
    def text(self) -> str:
        """The whole sentence, for the runtime's page and the fleet table's message."""
        return (
            f"held back by rollout {self.rollout} of commit {self.commit} in wave {self.wave} "
            f"({self.position}), keeping commit {self.base}: {self.why}"
        )


def rollout_hold(rollout: Rollout | None, runtime: str) -> RolloutHold | None:
    """How the newest ``rollout`` holds ``runtime`` back (``None``: it does not: no rollout
    gates, the commit does not change the runtime, or its wave has started)."""
    if rollout is None or not rollout.state.gates:
        return None
    member = rollout.member(runtime)
    if member is None or member.state.released:
        return None
    waves = rollout.waves
    wave = waves[member.wave].name if member.wave < len(waves) else str(member.wave + 1)
    position = f"{member.wave + 1} of {len(waves)}"
    return RolloutHold(
        rollout.id, rollout.shown, short_commit(member.base), wave, position,
        _why_held(rollout, member.state, member.note),
    )  # fmt: skip


def _why_held(rollout: Rollout, state: MemberState, note: str) -> str:
    """What a held runtime's wave waits for."""
    said = f": {rollout.message}" if rollout.message else ""
    if state is MemberState.SKIPPED:
        return f"skipped, {note}" if note else "skipped: it is suspended"
    if rollout.state is RolloutState.PAUSED:
        return f"the rollout is paused{said}"
    if rollout.state is RolloutState.HALTED:
        return f"the rollout halted ({rollout.reason}){said}"
    if rollout.state is RolloutState.CANCELED:
        return f"the rollout was canceled{said}"
    under_way = rollout.waves[rollout.wave].name if rollout.wave < len(rollout.waves) else "-"
    count = len(rollout.waves)
    return f"its wave starts once wave {under_way} ({rollout.wave + 1} of {count}) stays healthy"


@dataclass(frozen=True, slots=True)
class CommitProblem:
    """A commit that is not in force: refused, held by the deletion brake, or waiting."""

    verdict: str
    commit: str
    message: str
    #: What to do to let it (or a fixed one) through.
    how: str
    #: Each error: ``(path, line, column, rule, message)``, for a refused commit.
    errors: tuple[tuple[str, int, int, str, str], ...] = ()
    #: What a held commit would delete.
    removals: tuple[str, ...] = ()
    #: Each commit without a good signature from a trusted key: ``(commit, status, signer,
    #: key, reason)``.
    signatures: tuple[tuple[str, str, str, str, str], ...] = ()


#: How to get past a refused commit.
HOW_REFUSED = (
    "Fix each file at the line shown and push a new commit (run `reconciler validate` on it "
    "first); the commit in force stays until then."
)


#: How to get past a commit refused for its signature.
HOW_UNSIGNED = (
    "Push a new commit signed by a trusted key (git commit -S). The refusal stands for this "
    "commit: a signer's key given to the daemon (--trusted-ssh-signers, --trusted-openpgp-keys, "
    "--trusted-keys-dir) counts from the next commit on; with --verify-every-commit, rewrite "
    "the branch without the unsigned commit. The commit in force stays until then."
)


def refused_problem(
    commit: str,
    message: str,
    errors: Iterable[Mapping[str, object]],
    signatures: Iterable[Mapping[str, object]] = (),
) -> CommitProblem:
    """A refused commit with its diagnostics (``reconciler validate -o json``'s items) or the
    commits to blame for a missing or bad signature (``/status``'s ``signatures``)."""
    rows = tuple(
        (
            str(e.get("path", "")),
            _int(e.get("line")),
            _int(e.get("column")),
            str(e.get("rule", "")),
            str(e.get("message", "")),
        )
        for e in errors
    )
    unsigned = tuple(_signature_row(s) for s in signatures)
    how = HOW_UNSIGNED if unsigned else HOW_REFUSED
    return CommitProblem("refused", commit, message, how, rows, signatures=unsigned)


def _signature_row(signature: Mapping[str, object]) -> tuple[str, str, str, str, str]:
    def text(key: str) -> str:
        return str(signature.get(key) or "")

    return (text("commit"), text("status"), text("signer"), text("key"), text("reason"))


def held_problem(commit: str, message: str, removals: Iterable[str]) -> CommitProblem:
    """A commit the deletion brake holds; its message says how to allow it."""
    how = (
        f"Restart the daemon with --allow-deletions {commit[:12]} (that commit only), or revert "
        "the deletions in a new commit."
    )
    return CommitProblem("held", commit, message, how, removals=tuple(removals))


def _int(value: object) -> int:
    return value if isinstance(value, int) else 0


@dataclass(frozen=True, slots=True)
class SourceView:
    """The daemon's source: the commit in force and what stands in a newer one's way."""

    url: str = ""
    commit: str = ""
    last_poll: str = ""
    error: str = ""
    problems: tuple[CommitProblem, ...] = ()

    @property
    def short(self) -> str:
        """The commit in force, abbreviated (its config repo commit)."""
        return short_commit(self.commit)


def short_commit(text: str) -> str:
    """``1a2b3c4d`` (``1a2b3c4d+5e6f7a8b`` with channels apart); ``-`` for none."""
    head = Head.parse(text)
    if head is None:
        return "-"
    if head.channels:
        return f"{head.config[:8]}+{head.channels[:8]}"
    return head.config[:8]


def time_text(moment: datetime | None) -> str:
    """``2026-11-27 10:00:00 UTC``; ``-`` for none."""
    return moment.strftime("%Y-%m-%d %H:%M:%S UTC") if moment is not None else "-"


def age_text(now: datetime, then: datetime | None) -> str:
    """How long ago, as kubectl's AGE: ``45s``, ``3m``, ``2h``, ``5d``; ``-`` for none."""
    if then is None:
        return "-"
    seconds = int((now - then).total_seconds())
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size:
            return f"{seconds // size}{unit}"
    return f"{max(seconds, 0)}s"


# -- the fleet: / ---------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class StateCount:
    """How many runtimes are in a state, and whether the page filters on it."""

    state: str
    count: int
    selected: bool


@dataclass(frozen=True, slots=True)
class FleetRow:
    """One row of the fleet table."""

    name: str
    state: str
    reason: str
    message: str
    modules: tuple[str, ...]
    labels: tuple[str, ...]
    commit: str
    age: str
    owner: str
    #: A word on the commit shown (in sync at the commit in force, held back by a rollout).
    commit_note: str = ""
    #: The rollout that holds it back (``None``: none does).
    hold: RolloutHold | None = None


@dataclass(frozen=True, slots=True)
class Pages:
    """Where a page of rows sits among them all (rows ``first``..``last``, counted from 1)."""

    page: int
    pages: int
    first: int
    last: int

    @property
    def previous(self) -> int | None:
        return self.page - 1 if self.page > 1 else None

    @property
    def next(self) -> int | None:
        return self.page + 1 if self.page < self.pages else None


@dataclass(frozen=True, slots=True)
class FleetView:
    """``/``: the counts of the whole fleet, then one page of the runtimes the filters keep."""

    total: int
    counts: tuple[StateCount, ...]
    matched: int
    rows: tuple[FleetRow, ...]
    pages: Pages
    query: FleetQuery
    #: Why the label selector cannot be read ("" when it can).
    error: str
    states: tuple[str, ...]
    modules: tuple[str, ...]
    source: SourceView
    generated: str


def fleet_view(
    runtimes: Sequence[FleetRuntime], query: FleetQuery, source: SourceView, now: datetime
) -> FleetView:
    """The fleet page of ``runtimes`` for ``query`` (see :class:`FleetView`)."""
    states = {runtime.name: runtime.state for runtime in runtimes}
    tally: dict[str, int] = {}
    for state in states.values():
        tally[state] = tally.get(state, 0) + 1
    counts = tuple(
        StateCount(state, tally[state], state == query.state) for state in STATES if state in tally
    )
    kept, error = _filtered(runtimes, query)
    kept = sorted(kept, key=lambda r: (_RANK.get(states[r.name], len(STATES)), r.name))
    pages = _pages(len(kept), query)
    shown = kept[pages.first - 1 : pages.last] if kept else []
    modules = sorted({m for runtime in runtimes for m in runtime.modules})
    return FleetView(
        total=len(runtimes),
        counts=counts,
        matched=len(kept),
        rows=tuple(_fleet_row(runtime, now, source.commit) for runtime in shown),
        pages=pages,
        query=query,
        error=error,
        states=STATES,
        modules=tuple(modules),
        source=source,
        generated=time_text(now),
    )


def _filtered(
    runtimes: Sequence[FleetRuntime], query: FleetQuery
) -> tuple[list[FleetRuntime], str]:
    """The runtimes every filter keeps, and why the label selector is refused ("": it is not;
    a refused selector keeps nothing)."""
    kept = list(runtimes)
    if query.state:
        wanted = query.state.lower()
        kept = [r for r in kept if r.state.lower() == wanted]
    if query.module:
        kept = [r for r in kept if query.module in r.modules]
    if query.search:
        part = query.search.lower()
        kept = [r for r in kept if part in r.name]
    if query.label:
        try:
            selector = parse_label_selector(query.label)
        except SelectorError as error:
            return [], str(error)
        kept = [r for r in kept if selector.matches(r.labels)]
    return kept, ""


def _pages(matched: int, query: FleetQuery) -> Pages:
    pages = max((matched + query.per_page - 1) // query.per_page, 1)
    page = min(query.page, pages)
    first = (page - 1) * query.per_page + 1
    return Pages(page, pages, min(first, matched), min(page * query.per_page, matched))


def _fleet_row(runtime: FleetRuntime, now: datetime, in_force: str) -> FleetRow:
    labels = tuple(f"{key}={value}" for key, value in sorted(runtime.labels.items()))
    status = runtime.status
    if status is None:
        message = "in the commit in force; no operation has run yet"
        return FleetRow(
            runtime.name, runtime.state, "", message, (), labels, "-", "-", runtime.owner
        )
    commit, note = runtime.commit_shown(in_force)
    return FleetRow(
        runtime.name,
        runtime.state,
        status.reason,
        status.message,
        runtime.modules,
        labels,
        commit,
        age_text(now, status.current.updated),
        runtime.owner,
        note,
        runtime.hold,
    )
