"""Status page benchmark: ``GET /``, ``GET /runtimes/NAME`` and ``GET /rollouts`` (as a browser
asks for it) for a fleet of N runtimes.

Generates (or reuses) a config repo of N runtimes (bench/generate_fleet.py's fleet: labels,
3-8 modules each), records a status for every runtime in a real SQLite store (1% of them with
an operation under way, 1% in Error, 1% Deleting), puts the repo in force in a daemon (never
polled) and asks its HTTP application for the pages, in process (no socket: what is measured
is the page's own work). Reports the median and best of R requests for: the whole request
(store read, view model, template), and the view model and template alone. The store also
holds 20 rollouts, each over every runtime (a 10% wave and the rest; 1% of each in Error).

    python bench/page_bench.py --runtimes 5000 --repeat 25
"""

from __future__ import annotations

import argparse
import io
import statistics
import sys
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from reconciler.cluster.memory import InMemoryCluster  # noqa: E402
from reconciler.core.head import Head  # noqa: E402
from reconciler.core.model import ClusterAccess  # noqa: E402
from reconciler.core.rollouts import Member, MemberState, Rollout, RolloutState, Wave  # noqa: E402
from reconciler.core.status import ModuleState, ModuleStatus, Reason  # noqa: E402
from reconciler.daemon.http import Endpoints  # noqa: E402
from reconciler.daemon.page import load_fleet, load_source, render_page  # noqa: E402
from reconciler.daemon.page_model import FleetQuery, fleet_view  # noqa: E402
from reconciler.daemon.service import Daemon  # noqa: E402
from reconciler.operations.engine import Engine  # noqa: E402
from reconciler.operations.model import OperationType, RuntimeRecord  # noqa: E402
from reconciler.operations.store import SqliteStore  # noqa: E402
from reconciler.source.loader import load_repo  # noqa: E402
from tests.support.fleet_generator import generate_fleet  # noqa: E402
from tests.support.sources import UnusedSource  # noqa: E402

NOW = datetime(2026, 11, 27, 12, 0, tzinfo=UTC)
COMMIT = Head("0123456789abcdef0123456789abcdef01234567")


def _state(index: int) -> tuple[ModuleState, Reason]:
    if index % 100 == 1:
        return ModuleState.ERROR, Reason.FAILED
    if index % 100 == 2:
        return ModuleState.DELETING, Reason.WAITING_FOR_RESOURCES
    return ModuleState.READY, Reason.READY


def _fill(store: SqliteStore, repo_runtimes: dict[str, list[tuple[str, str]]]) -> None:
    """A record per runtime (its modules Ready, 1% Error, 1% Deleting), 1% with an operation
    under way."""
    engine = Engine(store, clock=lambda: NOW, plugins=[])
    for index, (name, modules) in enumerate(sorted(repo_runtimes.items())):
        state, reason = _state(index)
        statuses = tuple(
            ModuleStatus(module, state if i == 0 else ModuleState.READY, reason, "", version)
            for i, (module, version) in enumerate(modules)
        )
        updated = NOW - timedelta(minutes=index % 90)
        record = RuntimeRecord(name, state, reason, f"{len(statuses)} modules", COMMIT, updated)
        store.put_runtime(_with(record, statuses))
        if index % 100 == 3:
            engine.create(name, OperationType.UPDATE, commit=COMMIT)


def _with(record: RuntimeRecord, modules: tuple[ModuleStatus, ...]) -> RuntimeRecord:
    return RuntimeRecord(
        record.runtime, record.state, record.reason, record.message, record.commit,
        record.updated, modules,
    )  # fmt: skip


def _no_cluster(access: ClusterAccess, name: str) -> InMemoryCluster:
    raise AssertionError("the page never reaches a cluster")


def _rollouts(store: SqliteStore, names: list[str]) -> None:
    """20 rollouts of every runtime: a first wave of 10% (Ready but 1% in Error), the rest
    pending; the newest progressing, the others superseded."""
    cut = len(names) // 10
    waves = (Wave("first", "10%", tuple(names[:cut])), Wave("rest", "the rest", tuple(names[cut:])))
    for index in range(20):
        members = tuple(
            Member(name, 0 if i < cut else 1, _member_state(i, cut), COMMIT.text)
            for i, name in enumerate(names)
        )
        commit = f"{index:02x}" + "a" * 38
        state = RolloutState.PROGRESSING if index == 19 else RolloutState.SUPERSEDED
        made = Rollout(
            id=commit[:12], commit=commit, created=NOW - timedelta(hours=20 - index), state=state,
            waves=waves, members=members, healthy_for=timedelta(minutes=10), max_errors=1000,
            updated=NOW,
        )  # fmt: skip
        assert store.put_rollout(made) is not None


def _member_state(index: int, cut: int) -> MemberState:
    if index >= cut:
        return MemberState.PENDING
    return MemberState.ERROR if index % 100 == 0 else MemberState.READY


def _times(run: Callable[[], object], repeat: int) -> tuple[float, float]:
    """Median and best of ``repeat`` runs, in milliseconds."""
    run()  # warm: templates compiled, caches filled
    seconds = []
    for _ in range(repeat):
        began = time.perf_counter()
        run()
        seconds.append(time.perf_counter() - began)
    return statistics.median(seconds) * 1000, min(seconds) * 1000


def _get(app: Endpoints, path: str, query: str = "") -> Callable[[], bytes]:
    environ: dict[str, object] = {"REQUEST_METHOD": "GET", "PATH_INFO": path}
    environ |= {"HTTP_ACCEPT": "text/html,application/xhtml+xml,*/*;q=0.8"}  # a browser
    environ |= {"QUERY_STRING": query, "wsgi.input": io.BytesIO()}

    def get() -> bytes:
        response = app.respond(environ)
        assert response.status == 200, response.body[:200]
        return response.body

    return get


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runtimes", type=int, default=5000)
    parser.add_argument("--repeat", type=int, default=15)
    parser.add_argument("--workdir", type=Path, default=ROOT / "bench" / "out")
    args = parser.parse_args(argv)
    fleet = args.workdir / f"fleet-r{args.runtimes}-m10-v3-s1-c0"
    generate_fleet(fleet, args.runtimes)
    repo = load_repo(str(fleet)).repo
    assert repo is not None
    store_path = args.workdir / f"page-bench-{args.runtimes}.db"
    store_path.unlink(missing_ok=True)
    store = SqliteStore(store_path)
    versions = {name: sorted(m.versions)[0] for name, m in repo.modules.items()}
    runtimes = {
        name: [(ref.name, versions[ref.name]) for ref in runtime.modules]
        for name, runtime in repo.runtimes.items()
    }
    _fill(store, runtimes)
    _rollouts(store, sorted(runtimes))
    daemon = Daemon(UnusedSource(), store, _no_cluster, lambda: NOW)
    daemon.state.follow(COMMIT, repo)
    app = Endpoints(daemon, None, False, 1 << 20)
    first = sorted(runtimes)[0]
    loaded = load_fleet(daemon)
    source = load_source(daemon)

    def view_and_template() -> bytes:
        view = fleet_view(loaded, FleetQuery(), source, NOW)
        return render_page("fleet.html", view=view, here="/")

    rows = [
        ("GET / (100 rows of all)", _get(app, "/")),
        ("GET /?label=tier%3Dprod&state=Ready", _get(app, "/", "label=tier%3Dprod&state=Ready")),
        ("GET /?per_page=500", _get(app, "/", "per_page=500")),
        (f"GET /runtimes/{first}", _get(app, f"/runtimes/{first}")),
        ("GET /rollouts (5 newest of 20)", _get(app, "/rollouts")),
        ("GET /rollouts?id= (one rollout)", _get(app, "/rollouts", "id=13aaaaaaaaaa")),
        ("load_fleet (store, repo, owners)", lambda: load_fleet(daemon)),
        ("fleet_view + template", view_and_template),
    ]
    print(f"{args.runtimes} runtimes, {args.repeat} requests each (ms: median, best)")
    for label, run in rows:
        median, best = _times(run, args.repeat)
        print(f"  {label:<40} {median:8.1f} {best:8.1f}")
    size = len(_get(app, "/")())
    print(f"  GET / body: {size / 1024:.0f} KiB")
    size = len(_get(app, "/rollouts")())
    print(f"  GET /rollouts body: {size / 1024:.0f} KiB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
