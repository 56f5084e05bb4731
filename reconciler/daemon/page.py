"""The status page on the daemon's port: ``/`` (the fleet), ``/runtimes/NAME`` (a runtime) and
``/rollouts`` (the rollouts, to a client that asks for HTML: :func:`wants_html`; JSON to the
others, ``reconciler rollout --daemon``), read-only HTML rendered on the server with Jinja2, and
``/static/page.css``.

The data is loaded here (the state store, the commit in force, the members) and handed to the
pure view models (:mod:`reconciler.daemon.page_model`, ``page_runtime``); the templates and the
stylesheet ship in the package (``reconciler/daemon/templates``, ``static``). Everything a
template prints is HTML-escaped (autoescape); an undefined name in a template is an error, not
an empty cell. No script, no CDN: the pages work without JavaScript and say so in their
Content-Security-Policy. Who may read them: whoever may read ``/status`` (docs/security.md).

Adding a page: a pure view module beside
``page_runtime`` (added to the pure contract in pyproject.toml), a template
in ``templates/``, a loader here, one entry in :data:`PAGES` (its path, its title in the
navigation) and one branch in :meth:`Pages.respond`.

Caller: :mod:`reconciler.daemon.http`.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from dataclasses import dataclass
from importlib import resources
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qsl

import jinja2

from reconciler.core.diagnostics import did_you_mean
from reconciler.core.head import head_text
from reconciler.core.model import is_runtime_name
from reconciler.core.redaction import mask
from reconciler.daemon.page_model import (
    CommitProblem,
    FleetQuery,
    FleetRuntime,
    SourceView,
    fleet_view,
    held_problem,
    refused_problem,
    time_text,
)
from reconciler.daemon.page_rollouts import ROLLOUTS_SHOWN, rollouts_view
from reconciler.daemon.page_runtime import OPERATIONS_SHOWN, runtime_view
from reconciler.errors import NotFoundError, TransientError
from reconciler.operations.model import RuntimeStatus
from reconciler.operations.rollouts import find_rollout
from reconciler.operations.store import load_status, load_statuses

if TYPE_CHECKING:
    from reconciler.daemon.service import Daemon

#: The pages, in the navigation's order: path, title.
PAGES = (("/", "Fleet"), ("/rollouts", "Rollouts"))
#: The page that shares its path with a JSON endpoint: HTML only to a client that asks for it.
ROLLOUTS = "/rollouts"
#: What a page's answer carries besides its body: no script, no frame, no referrer.
HTML_HEADERS = (
    (
        "Content-Security-Policy",
        "default-src 'none'; style-src 'self'; img-src 'self'; form-action 'self'; "
        "base-uri 'none'; frame-ancestors 'none'",
    ),
    ("X-Content-Type-Options", "nosniff"),
    ("Referrer-Policy", "no-referrer"),
    ("Cache-Control", "no-store"),
)
HTML = "text/html; charset=utf-8"
STYLESHEET = "/static/page.css"


@dataclass(frozen=True, slots=True)
class PageAnswer:
    """A page: its status, its content type, its body."""

    status: int
    kind: str
    body: bytes


def is_page(path: str) -> bool:
    """Whether ``path`` is one of the status page's."""
    return path == "/" or path == STYLESHEET or path.startswith("/runtimes/")


def wants_html(accept: str) -> bool:
    """Whether a request's ``Accept`` header asks for HTML before JSON (a browser's does;
    ``curl``'s ``*/*`` and ``reconciler rollout --daemon``'s none do not): ``text/html``
    listed with a weight above 0, ahead of ``application/json`` if that is listed too."""
    ranked: list[tuple[float, int, str]] = []
    for position, item in enumerate(accept[:1000].split(",")):
        kind, _, params = item.strip().lower().partition(";")
        weight = 1.0
        for param in params.split(";"):
            name, _, value = param.strip().partition("=")
            if name == "q":
                try:
                    weight = float(value)
                except ValueError:
                    weight = 0.0
        ranked.append((-weight, position, kind.strip()))
    kinds = [kind for weight, _, kind in sorted(ranked) if weight < 0]
    if "text/html" not in kinds:
        return False
    return "application/json" not in kinds or kinds.index("text/html") < kinds.index(
        "application/json"
    )


@functools.cache
def environment() -> jinja2.Environment:
    """The templates of the package, autoescaped, strict about undefined names."""
    env = jinja2.Environment(
        loader=jinja2.PackageLoader("reconciler.daemon", "templates"),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        finalize=_masked,
    )
    env.globals.update(pages=PAGES, stylesheet=STYLESHEET)
    return env


def _masked(value: object) -> object:
    """Every text a template prints, with the shapes of secrets masked (S4), as ``/status``."""
    return mask(value) if isinstance(value, str) else value


@functools.cache
def stylesheet() -> bytes:
    """The stylesheet shipped in the package."""
    return resources.files("reconciler.daemon").joinpath("static/page.css").read_bytes()


def problem_page(status: int, title: str, message: str) -> PageAnswer:
    """A page that says what went wrong, in one line."""
    return PageAnswer(
        status, HTML, render_page("problem.html", title=title, message=message, here="")
    )


def render_page(template: str, **values: Any) -> bytes:
    """``template`` with ``values``, as UTF-8."""
    return environment().get_template(template).render(**values).encode()


class Pages:
    """The status page's answers, from the daemon's state at each request."""

    def __init__(self, daemon: Daemon) -> None:
        self.daemon = daemon

    def respond(self, path: str, query: str) -> PageAnswer:
        """The answer to ``GET path?query``; 503 with the reason while the state store cannot
        be read (a PostgreSQL restarting), as a page and one log line."""
        try:
            return self._respond(path, query)
        except TransientError as error:
            message = f"cannot read the daemon's state now ({type(error).__name__}): {error}"
            return problem_page(503, "Unavailable, try again", message)

    def _respond(self, path: str, query: str) -> PageAnswer:
        if path == STYLESHEET:
            return PageAnswer(200, "text/css; charset=utf-8", stylesheet())
        if path == "/":
            return self.fleet(query)
        if path == ROLLOUTS:
            return self.rollouts(query)
        return self.runtime(path.removeprefix("/runtimes/"))

    def fleet(self, query: str) -> PageAnswer:
        """``/``: the fleet, filtered by the query's parameters."""
        view = fleet_view(
            load_fleet(self.daemon), FleetQuery.of(page_params(query)), load_source(self.daemon),
            self.daemon.clock(),
        )  # fmt: skip
        return PageAnswer(200, HTML, render_page("fleet.html", view=view, here="/"))

    def runtime(self, name: str) -> PageAnswer:
        """``/runtimes/NAME``: 404 (with the closest name) for one the daemon does not know."""
        if not is_runtime_name(name):  # never compared with the fleet: it may be 60 KiB
            message = f"'{name[:100]}' is no runtime name (a DNS-1123 label)"
            return problem_page(404, "Not found", message)
        runtime = load_runtime(self.daemon, name)
        if runtime is None:
            known = self.daemon.fleet()
            message = f"no runtime '{name}' in the commit in force nor in the state store"
            return problem_page(404, "Not found", message + did_you_mean(name, known))
        operations = self.daemon.store.operations(runtime=name, limit=OPERATIONS_SHOWN)
        view = runtime_view(runtime, operations, load_source(self.daemon), self.daemon.clock())
        return PageAnswer(200, HTML, render_page("runtime.html", view=view, here=""))

    def rollouts(self, query: str) -> PageAnswer:
        """``/rollouts``: the newest rollouts; ``?id=`` one of them (404 for an unknown one)."""
        wanted = page_params(query).get("id", "")[:100]
        if wanted:
            try:
                found = [find_rollout(self.daemon.store, wanted)]
            except NotFoundError as error:
                return problem_page(404, "Not found", str(error))
        else:
            found = self.daemon.store.rollouts(limit=ROLLOUTS_SHOWN)
        view = rollouts_view(found, load_source(self.daemon), self.daemon.clock())
        return PageAnswer(200, HTML, render_page("rollouts.html", view=view, here=ROLLOUTS))


def load_fleet(daemon: Daemon) -> list[FleetRuntime]:
    """Every runtime of the commit in force and of the store, with its status and owner."""
    repo = daemon.state.repo
    declared = repo.runtimes if repo is not None else {}
    in_git = {name: runtime.suspend for name, runtime in declared.items()}
    statuses = {s.current.runtime: s for s in load_statuses(daemon.store, git_suspended=in_git)}
    names = sorted(set(declared) | set(statuses))
    owners = daemon.membership.owners(names)
    rollout = daemon.store.latest_rollout()
    return [
        FleetRuntime.of(
            name,
            declared.get(name),
            statuses.get(name),
            owners.get(name, ""),
            in_sync=_in_sync(daemon, name, statuses.get(name)),
            rollout=rollout,
        )
        for name in names
    ]


def _in_sync(daemon: Daemon, name: str, status: RuntimeStatus | None) -> bool:
    """Whether ``name``'s record, made at an older commit, is in sync at the commit in force
    (the commits since changed nothing of it)."""
    if status is None:
        return False
    synced, in_force = head_text(status.current.commit), head_text(daemon.state.commit)
    return daemon.state.unchanged.in_sync(name, synced, in_force)


def load_runtime(daemon: Daemon, name: str) -> FleetRuntime | None:
    """One runtime as :func:`load_fleet` gathers it; ``None`` when neither the commit in force
    nor the store knows it."""
    repo = daemon.state.repo
    spec = repo.runtimes.get(name) if repo is not None else None
    status = load_status(
        daemon.store, name, git_suspended=spec.suspend if spec is not None else None
    )
    if spec is None and status is None:
        return None
    owners = daemon.membership.owners(daemon.fleet())
    return FleetRuntime.of(
        name, spec, status, owners.get(name, ""),
        in_sync=_in_sync(daemon, name, status), rollout=daemon.store.latest_rollout(),
    )  # fmt: skip


def load_source(daemon: Daemon) -> SourceView:
    """The commit in force and a refused, held or waiting newer one."""
    state = daemon.state
    problems: list[CommitProblem] = []
    if state.refused is not None:
        refused = state.refused
        problems.append(
            refused_problem(refused.commit, refused.message, refused.errors, refused.signatures)
        )
    if state.held is not None:
        held = state.held
        removals = (*held.runtimes, *held.modules, *held.crds)
        problems.append(held_problem(held.commit, held.message, removals))
    if state.waiting is not None:
        waiting = state.waiting
        how = "Nothing to do: it is read again then; the commit in force stays meanwhile."
        problems.append(CommitProblem("waiting", waiting.commit, waiting.message, how))
    return SourceView(
        url=daemon.source.shown,
        commit=head_text(state.commit),
        last_poll=time_text(state.last_poll),
        error=state.error,
        problems=tuple(problems),
    )


def page_params(query: str) -> Mapping[str, str]:
    """The decoded parameters of a query string (the last of a repeated one)."""
    return dict(parse_qsl(query[:2000], keep_blank_values=True))
