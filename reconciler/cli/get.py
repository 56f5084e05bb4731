"""``reconciler get runtimes|modules|operations``: lists with filters, as ``kubectl get`` and
``flux get`` print them.

What the state store recorded, joined with the config repo when one is named (``[REPO]``): its
labels for ``-l``, its runtimes that were never synced (``NotSynced``), ``spec.suspend``.
``--state-selector`` filters by state, ``--module`` by module, ``--watch`` prints again each row
that changes (every ``--interval``) until Ctrl-C.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from reconciler.cli import exits
from reconciler.cli.options import Duration, runtimes_option, state_option
from reconciler.cli.output import (
    Column,
    echo_document,
    is_document,
    no_headers_option,
    output_option,
    table_lines,
)
from reconciler.core.selectors import (
    LabelSelector,
    SelectorError,
    StateSelector,
    parse_label_selector,
    parse_state_selector,
)
from reconciler.core.status import RUNTIME_STATES as SHOWN_STATES
from reconciler.core.status import ModuleState

if TYPE_CHECKING:
    from reconciler.core.head import Head
    from reconciler.core.model import ConfigRepo
    from reconciler.operations.model import Operation, RuntimeStatus
    from reconciler.operations.store import StateStore, StatusReader

RUNTIME_STATES = frozenset(SHOWN_STATES)
MODULE_STATES = frozenset((*(state.value for state in ModuleState), "Removed"))
OPERATION_STATES = frozenset(("pending", "in progress", "succeeded", "failed"))


@dataclass(frozen=True, slots=True)
class Filters:
    """What ``get`` keeps: ``-l``, ``--state-selector``, ``--module``, ``--runtime``."""

    labels: LabelSelector | None = None
    states: StateSelector | None = None
    module: str | None = None
    runtimes: tuple[str, ...] = ()

    def keeps_runtime(self, name: str, labels: Mapping[str, str]) -> bool:
        """Whether runtime ``name`` with ``labels`` passes ``--runtime`` and ``-l``."""
        if self.runtimes and name not in self.runtimes:
            return False
        return self.labels is None or self.labels.matches(labels)

    def keeps_state(self, state: str | None) -> bool:
        """Whether ``state`` passes ``--state-selector``."""
        return self.states is None or self.states.matches(state)


@dataclass(frozen=True, slots=True)
class RuntimeItem:
    """One runtime as ``get runtimes`` shows it: from git, from the store, or both."""

    name: str
    labels: Mapping[str, str] = field(default_factory=dict)
    channel: str | None = None
    in_git: bool = False
    #: ``git`` (spec.suspend), ``store`` (reconciler suspend) or empty.
    suspended: str = ""
    status: RuntimeStatus | None = None

    @property
    def state(self) -> str:
        """Its state now (:meth:`RuntimeStatus.state_of`), ``NotSynced`` before its first
        operation (``Suspended`` then, when git suspends it)."""
        from reconciler.operations.model import RuntimeStatus

        return RuntimeStatus.state_of(self.status, suspended_in_git=bool(self.suspended))

    @property
    def modules(self) -> tuple[str, ...]:
        """The modules it runs (as recorded), else those git gives it."""
        if self.status is not None:
            return tuple(m.module for m in self.status.current.modules)
        return ()

    def to_json(self) -> dict[str, Any]:
        """The item of a ``RuntimeList`` (docs/json-output.md)."""
        return {
            "name": self.name,
            "labels": dict(self.labels),
            "channel": self.channel,
            "inGit": self.in_git,
            "suspended": self.suspended or None,
            "state": self.state,
            "status": self.status.to_json() if self.status is not None else None,
        }


def runtime_items(store: StatusReader | None, config: ConfigRepo | None) -> list[RuntimeItem]:
    """Every runtime the store recorded or git declares, by name."""
    from reconciler.operations.store import load_statuses

    declared = config.runtimes if config is not None else {}
    in_git = {name: runtime.suspend for name, runtime in declared.items()}
    found = load_statuses(store, git_suspended=in_git) if store is not None else []
    statuses = {s.current.runtime: s for s in found}
    items = []
    for name in sorted(statuses.keys() | declared.keys()):
        runtime = declared.get(name)
        status = statuses.get(name)
        suspended = "git" if runtime is not None and runtime.suspend else ""
        if not suspended and status is not None and status.suspension is not None:
            suspended = "store"
        items.append(
            RuntimeItem(
                name,
                dict(runtime.labels) if runtime is not None else {},
                runtime.channel if runtime is not None else None,
                runtime is not None,
                suspended,
                status,
            )
        )
    return items


def _runtime_with_modules(item: RuntimeItem, config: ConfigRepo | None) -> tuple[str, ...]:
    """The modules ``item`` runs as recorded; before its first sync, those git resolves for
    it (dependencies and mandatory modules included)."""
    if item.modules or config is None or item.name not in config.runtimes:
        return item.modules
    from reconciler.core.resolve import resolve_runtime

    return tuple(m.name for m in resolve_runtime(config, config.runtimes[item.name]).modules)


RUNTIME_COLUMNS = [
    Column("NAME"),
    Column("STATE"),
    Column("REASON"),
    Column("MODULES"),
    Column("SUSPENDED"),
    Column("AGE"),
    Column("MESSAGE"),
    Column("CHANNEL", wide=True),
    Column("LABELS", wide=True),
    Column("OPERATION", wide=True),
]


def runtime_row(item: RuntimeItem, modules: Sequence[str], now: datetime) -> tuple[str, ...]:
    """A row of ``get runtimes``."""
    from reconciler.operations.report import age_text

    status = item.status
    record = status.current if status is not None else None
    ready = sum(1 for m in record.modules if str(m.state) == "Ready") if record else 0
    operation = status.operation if status is not None else None
    return (
        item.name,
        item.state,
        status.reason if status is not None else "-",
        f"{ready}/{len(modules)}",
        item.suspended or "-",
        age_text(now, record.updated) if record else "-",
        status.message if status is not None else "not synced yet",
        item.channel or "-",
        ",".join(f"{k}={v}" for k, v in sorted(item.labels.items())) or "-",
        operation.id if operation is not None else "-",
    )


MODULE_COLUMNS = [
    Column("RUNTIME"),
    Column("MODULE"),
    Column("STATE"),
    Column("VERSION"),
    Column("REASON"),
    Column("AGE"),
    Column("MESSAGE"),
    Column("CHANNEL", wide=True),
    Column("COMMIT", wide=True),
    Column("OPERATION", wide=True),
]


def module_rows(
    items: Sequence[RuntimeItem], filters: Filters, now: datetime
) -> list[tuple[str, ...]]:
    """The rows of ``get modules``: each recorded module of each runtime kept by ``filters``."""
    from reconciler.operations.report import age_text

    rows: list[tuple[str, ...]] = []
    for item in items:
        if item.status is None:
            continue
        record = item.status.current
        for module in record.modules:
            if filters.module is not None and module.module != filters.module:
                continue
            if not filters.keeps_state(str(module.state) if module.state else None):
                continue
            state = str(module.state) if module.state else "Removed"
            version = module.version or "-"
            age = age_text(now, record.updated)
            rows.append(
                (
                    item.name,
                    module.module,
                    state,
                    version,
                    module.reason,
                    age,
                    module.message,
                    *_module_wide(item, record.commit),
                )
            )
    return rows


def _module_wide(item: RuntimeItem, commit: Head | None) -> tuple[str, str, str]:
    """``-o wide``'s columns of a module row: the runtime's channel, the commit its module
    status was recorded at, and the operation that recorded it."""
    from reconciler.core.head import head_text

    operation = item.status.operation if item.status is not None else None
    return (
        item.channel or "-",
        head_text(commit)[:12] or "-",
        operation.id if operation is not None else "-",
    )


def _module_json(row: tuple[str, ...]) -> dict[str, Any]:
    runtime, module, state, version, reason, _age_text, message = row[:7]
    return {
        "runtime": runtime,
        "module": module,
        "state": None if state == "Removed" else state,
        "version": None if version == "-" else version,
        "reason": str(reason),
        "message": message,
    }


# -- watching ----------------------------------------------------------------------------------


class Watch:
    """The rows already printed, by key; :meth:`changed` gives the rows that are new or differ
    (``kubectl get --watch`` prints those, without a header again)."""

    def __init__(self, key: Callable[[tuple[str, ...]], str]) -> None:
        self._key = key
        self._seen: dict[str, tuple[str, ...]] = {}

    def changed(
        self, rows: Sequence[tuple[str, ...]], *, ignore: int | None = None
    ) -> list[tuple[str, ...]]:
        """The rows of ``rows`` not printed as they are now (cell ``ignore``, an age that
        grows by itself, does not count as a change)."""
        fresh = []
        for row in rows:
            compared = row if ignore is None else row[:ignore] + row[ignore + 1 :]
            key = self._key(row)
            if self._seen.get(key) != compared:
                self._seen[key] = compared
                fresh.append(row)
        return fresh


#: Waits between two looks of ``--watch`` (tests replace it).
pause: Callable[[float], None] = time.sleep


def _show(
    rows_now: Callable[[], list[tuple[str, ...]]],
    view: View,
    key: Callable[[tuple[str, ...]], str],
    age_cell: int | None,
) -> None:
    """Print the table (``-o name``: ``KIND/KEY`` per row) once, or with ``--watch`` then
    every change until Ctrl-C."""
    rows = rows_now()
    if not rows and not view.watch:
        click.echo("nothing found", err=True)
        return
    if view.named:
        lines = [f"{view.named}/{key(row)}" for row in rows]
    else:
        lines = table_lines(view.columns, rows, wide=view.wide, headers=view.headers)
    for line in lines:
        click.echo(line)
    if not view.watch:
        return
    watch = Watch(key)
    watch.changed(rows, ignore=age_cell)
    widths = lines[0] if lines else ""
    try:
        while True:
            pause(view.interval)
            for row in watch.changed(rows_now(), ignore=age_cell):
                named = f"{view.named}/{key(row)}" if view.named else None
                click.echo(named or _aligned(view, row, widths))
    except KeyboardInterrupt:
        raise click.exceptions.Exit(exits.INTERRUPTED) from None


def _aligned(view: View, row: tuple[str, ...], header: str) -> str:
    """``row`` under the header printed first (its columns where the header put them)."""
    shown = [c for c in view.columns if view.wide or not c.wide]
    starts = [header.find(c.header) for c in shown] if header else []
    if not starts or min(starts) < 0:
        return "  ".join(row[: len(shown)])
    line = ""
    for start, cell in zip(starts, row, strict=False):
        line = line.ljust(start) if len(line) < start or not line else line + "  "
        line += cell
    return line.rstrip()


@dataclass(frozen=True, slots=True)
class View:
    """How ``get`` prints: the columns, ``-o``, ``--no-headers``, ``--watch``."""

    columns: Sequence[Column]
    output_format: str
    headers: bool
    watch: bool
    interval: float
    #: The kind ``-o name`` prints before each row's name (``runtime``, ``module``, ``operation``).
    kind: str = ""

    @property
    def named(self) -> str | None:
        """The kind to print before each name with ``-o name``, else None (a table)."""
        return self.kind if self.output_format == "name" else None

    @property
    def wide(self) -> bool:
        """``-o wide``."""
        return self.output_format == "wide"


# -- the commands ------------------------------------------------------------------------------


def _label_selector(
    ctx: click.Context, param: click.Parameter, value: str | None
) -> LabelSelector | None:
    try:
        return parse_label_selector(value) if value is not None else None
    except SelectorError as error:
        raise click.BadParameter(str(error)) from None


def _state_selector(states: frozenset[str]) -> Callable[..., StateSelector | None]:
    def parse(
        ctx: click.Context, param: click.Parameter, value: str | None
    ) -> StateSelector | None:
        try:
            return parse_state_selector(value, states) if value is not None else None
        except SelectorError as error:
            raise click.BadParameter(str(error)) from None

    return parse


_GET_OUTPUT_HELP = (
    "text: a table with a header; wide: more columns; json/yaml: a versioned document "
    "(docs/json-output.md); name: KIND/NAME per line, as kubectl (runtime/NAME, "
    "module/RUNTIME/NAME, operation/ID)."
)


def _common(states: frozenset[str]) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """The options every ``get`` command takes."""
    shown = ", ".join(sorted(states))

    def decorate(command: Callable[..., Any]) -> Callable[..., Any]:
        for option in reversed(
            [
                click.option(
                    "--state-selector",
                    "states",
                    callback=_state_selector(states),
                    metavar="STATES",
                    help=f"Only these states, commas between ({shown}; any case); !STATE "
                    "for all but STATE; ready=false as flux.",
                ),
                click.option(
                    "-w",
                    "--watch",
                    is_flag=True,
                    help="After the list, print each row that changes, until Ctrl-C.",
                ),
                click.option(
                    "--interval",
                    type=Duration(),
                    default="2s",
                    show_default=True,
                    help="With --watch: how often the state store is read.",
                ),
                state_option,
                output_option("text", "wide", "json", "yaml", "name", help=_GET_OUTPUT_HELP),
                no_headers_option,
            ]
        ):
            command = option(command)
        return command

    return decorate


def _repo_options(command: Callable[..., Any]) -> Callable[..., Any]:
    """``[REPO]``, ``-l``, ``--module``, ``--runtime`` of ``get runtimes|modules``."""
    for option in reversed(
        [
            click.argument(
                "repo", required=False, type=click.Path(file_okay=False, path_type=Path)
            ),
            click.option(
                "-l",
                "--selector",
                "labels",
                callback=_label_selector,
                metavar="SELECTOR",
                help="Only runtimes whose labels (in git: needs REPO) match, as kubectl: "
                "region=eu,tier!=ops, env in (prod,staging), key, !key.",
            ),
            click.option("--module", help="Only runtimes that run MODULE (its rows, for modules)."),
            runtimes_option,
        ]
    ):
        command = option(command)
    return command


@click.group()
def get() -> None:
    """List runtimes, modules or operations, with filters (as kubectl get and flux get).

    Runtimes and modules come from the state store, joined with the config repo when REPO is
    given: its labels (-l), spec.suspend, and its runtimes never synced (state NotSynced).
    """


@get.command("runtimes", epilog=exits.RECORDS.describe())
@_repo_options
@_common(RUNTIME_STATES)
def get_runtimes(
    repo: Path | None,
    labels: LabelSelector | None,
    module: str | None,
    runtime_names: Sequence[str],
    states: StateSelector | None,
    watch: bool,
    interval: float,
    state_url: str,
    output_format: str,
    no_headers: bool,
) -> None:
    """Runtimes: state, reason, modules ready, suspension, age, message (-o wide: channel,
    labels, operation under way)."""
    from reconciler.cli.clusters import now

    filters = Filters(labels, states, module, tuple(runtime_names))
    config = _config(repo, labels)

    def kept() -> list[RuntimeItem]:
        return [
            item
            for item in runtime_items(_store(state_url), config)
            if filters.keeps_runtime(item.name, item.labels)
            and filters.keeps_state(item.state)
            and (module is None or module in _runtime_with_modules(item, config))
        ]

    view = View(RUNTIME_COLUMNS, output_format, not no_headers, watch, interval, "runtime")
    if _document(view, "RuntimeList", lambda: [i.to_json() for i in kept()]):
        return
    _show(
        lambda: [runtime_row(i, _runtime_with_modules(i, config), now()) for i in kept()],
        view,
        lambda row: row[0],
        age_cell=5,
    )


@get.command("modules", epilog=exits.RECORDS.describe())
@_repo_options
@_common(MODULE_STATES)
def get_modules(
    repo: Path | None,
    labels: LabelSelector | None,
    module: str | None,
    runtime_names: Sequence[str],
    states: StateSelector | None,
    watch: bool,
    interval: float,
    state_url: str,
    output_format: str,
    no_headers: bool,
) -> None:
    """Modules of each runtime: state, version, reason, age, message (--state-selector
    selects module states)."""
    from reconciler.cli.clusters import now

    filters = Filters(labels, states, module, tuple(runtime_names))
    config = _config(repo, labels)

    def rows() -> list[tuple[str, ...]]:
        items = [
            i
            for i in runtime_items(_store(state_url), config)
            if filters.keeps_runtime(i.name, i.labels)
        ]
        return module_rows(items, filters, now())

    view = View(MODULE_COLUMNS, output_format, not no_headers, watch, interval, "module")
    if _document(view, "ModuleList", lambda: [_module_json(r) for r in rows()]):
        return
    _show(rows, view, lambda row: f"{row[0]}/{row[1]}", age_cell=5)


@get.command("operations", epilog=exits.RECORDS.describe())
@runtimes_option
@click.option("--limit", type=click.IntRange(min=1), default=50, show_default=True)
@_common(OPERATION_STATES)
def get_operations(
    runtime_names: Sequence[str],
    limit: int,
    states: StateSelector | None,
    watch: bool,
    interval: float,
    state_url: str,
    output_format: str,
    no_headers: bool,
) -> None:
    """Operations, newest first (as operations list), with filters."""
    from reconciler.operations.report import (
        OPERATION_COLUMNS,
        OPERATION_WIDE_COLUMNS,
        operation_json,
        operation_row,
    )

    def found() -> list[Operation]:
        store = _store(state_url)
        if store is None:
            return []
        names: Sequence[str | None] = runtime_names or [None]
        operations = [o for name in names for o in store.operations(runtime=name, limit=limit)]
        operations.sort(key=lambda o: o.created, reverse=True)
        return [o for o in operations if states is None or states.matches(str(o.state))][:limit]

    columns = [Column(h) for h in OPERATION_COLUMNS]
    columns += [Column(h, wide=True) for h in OPERATION_WIDE_COLUMNS]
    view = View(columns, output_format, not no_headers, watch, interval, "operation")
    if _document(view, "OperationList", lambda: [operation_json(o) for o in found()]):
        return
    _show(lambda: [operation_row(o) for o in found()], view, lambda row: row[0], age_cell=None)


def _document(view: View, kind: str, items: Callable[[], list[dict[str, Any]]]) -> bool:
    """Print the ``kind`` document when ``-o json|yaml`` asks for one (not with --watch)."""
    if not is_document(view.output_format):
        return False
    if view.watch:
        raise click.UsageError("--watch prints rows: use it with -o text or -o wide")
    echo_document(kind, {"items": items()}, view.output_format)
    return True


def _store(state_url: str) -> StateStore | None:
    from reconciler.operations.store import open_existing_store

    return open_existing_store(state_url)


def _config(repo: Path | None, labels: LabelSelector | None) -> ConfigRepo | None:
    """The valid config repo at ``repo``; -l needs one (labels live in git)."""
    if repo is None:
        if labels is not None:
            raise click.UsageError("-l selects by the labels in git: name the config repo (REPO)")
        return None
    from reconciler.cli.loading import load_valid_repo
    from reconciler.cli.options import DEFAULT_MAX_FILE_SIZE, RepoInput

    return load_valid_repo(RepoInput(repo, None, DEFAULT_MAX_FILE_SIZE))
