"""Checks of ``reconciler.yaml`` (Settings) beyond its schema (pure).

The schema says what the fields look like; these checks say whether they mean something:

- every name in ``spec.operations.disabledSteps`` is an *optional* step (built in, or offered by
  an installed plugin). The engine would otherwise skip nothing and say nothing. Built-in steps
  are listed here (:data:`BUILTIN_STEPS`, name -> optional) because the pure core may not import
  the operations package; a test keeps the list equal to ``BUILTIN_STAGES``. Plugin steps are
  found by the loader, which passes their names in;
- every duration of ``spec.operations.timeouts`` and ``spec.intervals`` is more than zero (a zero
  time limit fails every operation at once; a zero interval polls without pause);
- every limit of ``spec.operations.retryWithoutFail`` (O5) is more than zero and less than the
  time limit of the operations its steps run in (else the operation times out before the step
  is skipped), and names only steps that retry without fail (built in, :data:`RETRY_STEPS`, or
  a plugin's);
- the names of ``spec.notifications.endpoints`` are unique, and no endpoint's ``url`` is a
  credential in itself (C6): a Slack or Teams incoming-webhook URL, or one with a query string
  (``?token=...``), belongs in ``urlFrom``.
- the waves of ``spec.rollout`` have distinct names and selectors that read as kubectl's.

Problems are C1 diagnostics at the offending value. Caller: the validator.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from reconciler.config.yamlsafe import Document
from reconciler.core.diagnostics import Diagnostic, Pointer, did_you_mean
from reconciler.core.durations import duration_text, parse_duration
from reconciler.core.model import DEFAULT_OPERATION_TIMEOUTS

RULE = "C1"

#: Every built-in step and whether Settings may switch it off (``Step.optional``).
BUILTIN_STEPS: Mapping[str, bool] = {
    "Starting": False,
    "Resolve_Kubeconfig": False,
    "Check_Cluster_Access": False,
    "Plan_Changes": False,
    "Ensure_System_Namespace": False,
    "Apply_Modules": False,
    "Check_Modules_Ready": False,
    "Remove_Modules": False,
    "Record_Status": False,
    "Delete_Default_Configurations": False,
    "Wait_For_Managed_Resources": False,
    "Delete_Module_Manifests": False,
    "Delete_Inventory": False,
    "Remove_Runtime_Record": False,
}
#: The built-in steps that retry without fail (O5, ``Step.retry_without_fail``), with the
#: operations they run in; a test keeps it equal to ``BUILTIN_STAGES``.
RETRY_STEPS: Mapping[str, tuple[str, ...]] = {"Wait_For_Managed_Resources": ("deprovision",)}
_RETRY: Pointer = ("operations", "retryWithoutFail")


@dataclass(frozen=True, slots=True)
class StepTraits:
    """What Settings may say about a plugin's step: whether it may be switched off
    (``optional``) and whether it retries without fail (``retry_without_fail`` set)."""

    optional: bool = False
    retries_without_fail: bool = False


#: The durations checked, as (field path under ``spec``, what to call it).
DURATIONS: tuple[tuple[Pointer, str], ...] = (
    (("operations", "timeouts", "provision"), "the provision timeout"),
    (("operations", "timeouts", "update"), "the update timeout"),
    (("operations", "timeouts", "deprovision"), "the deprovision timeout"),
    (("intervals", "poll"), "the poll interval"),
    (("intervals", "resync"), "the resync interval"),
    (("intervals", "debounce"), "the debounce interval"),
)


def settings_problems(
    document: Document, plugin_steps: Mapping[str, StepTraits] | None = None
) -> Iterator[Diagnostic]:
    """What is wrong in a schema-valid Settings ``document``; ``plugin_steps`` are the installed
    plugins' steps."""
    spec = document.data.get("spec") or {}
    plugins = plugin_steps or {}
    steps = {**{name: t.optional for name, t in plugins.items()}, **BUILTIN_STEPS}
    disabled = spec.get("operations", {}).get("disabledSteps", ())
    for index, name in enumerate(disabled):
        message = disabled_step_problem(name, steps)
        if message is not None:
            pointer: Pointer = ("spec", "operations", "disabledSteps", index)
            yield document.diagnostic(RULE, message, pointer)
    for path, what in DURATIONS:
        value = _get(spec, path)
        if isinstance(value, str) and is_zero_duration(value):
            message = f"{what} must be more than 0 (e.g. 30s, 10m or 3h)"
            yield document.diagnostic(RULE, message, ("spec", *path))
    yield from _retry_problems(document, spec, plugins)
    yield from _wave_problems(document, spec.get("rollout", {}).get("waves", ()))
    yield from _endpoint_problems(document, spec.get("notifications", {}).get("endpoints", ()))


def _retry_problems(
    document: Document, spec: Mapping[str, Any], plugins: Mapping[str, StepTraits]
) -> Iterator[Diagnostic]:
    """``retryWithoutFail``: limits that are zero or not below their operations' time limit,
    and names of steps that never retry without fail. A plugin's step may run in any operation:
    the longest time limit counts."""
    retry = _get(spec, _RETRY) or {}
    timeouts = _timeouts(spec)
    default = retry.get("default")
    if isinstance(default, str):
        kinds = tuple(dict.fromkeys(k for ks in RETRY_STEPS.values() for k in ks))
        where: Pointer = ("spec", *_RETRY, "default")
        yield from _limit_problems(document, default, [timeouts[k] for k in kinds], where)
    retrying = {n for n, t in plugins.items() if t.retries_without_fail} - set(BUILTIN_STEPS)
    known = sorted({*RETRY_STEPS, *retrying})
    for name, text in (retry.get("steps") or {}).items():
        where = ("spec", *_RETRY, "steps", name)
        if name not in known:
            listing = f"(steps that retry without fail: {', '.join(known)})"
            message = (
                f"step {name} does not retry without fail: it is never skipped {listing}"
                if name in BUILTIN_STEPS or name in plugins
                else f"no installed step has this name {listing}" + did_you_mean(name, known)
            )
            yield document.diagnostic(RULE, message, where, key=True)
            continue
        limits = [timeouts[k] for k in RETRY_STEPS.get(name, tuple(timeouts))]
        yield from _limit_problems(document, text, limits, where)


def _limit_problems(
    document: Document, text: str, timeouts: list[tuple[str, float]], where: Pointer
) -> Iterator[Diagnostic]:
    """A retry-without-fail limit of zero, or not below the longest of ``timeouts`` (what to
    call it, seconds)."""
    if is_zero_duration(text):
        message = "a retry-without-fail limit must be more than 0 (e.g. 30s, 10m or 1h)"
        yield document.diagnostic(RULE, message, where)
        return
    what, longest = max(timeouts, key=lambda t: t[1])
    if parse_duration(text) >= longest:
        message = (
            f"a retry-without-fail limit of {text} is not below {what} "
            f"({duration_text(timedelta(seconds=longest))}): the operation would time out "
            "before the step is skipped"
        )
        yield document.diagnostic(RULE, message, where)


def _timeouts(spec: Mapping[str, Any]) -> dict[str, tuple[str, float]]:
    """Operation kind -> (its time limit's name, seconds): ``spec.operations.timeouts`` where
    set (and valid), else the default."""
    found: dict[str, tuple[str, float]] = {}
    for kind, limit in DEFAULT_OPERATION_TIMEOUTS.items():
        text = _get(spec, ("operations", "timeouts", kind))
        given = isinstance(text, str) and not is_zero_duration(text)
        seconds = parse_duration(text) if given else limit.total_seconds()
        found[kind] = (f"the {kind} timeout", seconds)
    return found


def _wave_problems(document: Document, waves: list[Mapping[str, Any]]) -> Iterator[Diagnostic]:
    """Wave names used twice and selectors that do not read."""
    seen: set[str] = set()
    for index, wave in enumerate(waves):
        pointer: Pointer = ("spec", "rollout", "waves", index)
        if wave["name"] in seen:
            message = f"wave {wave['name']} is named twice; each wave needs its own name"
            yield document.diagnostic(RULE, message, (*pointer, "name"))
        seen.add(wave["name"])
        selector = wave.get("selector")
        if selector is None:
            continue
        from reconciler.core.selectors import SelectorError, parse_label_selector  # waves only

        try:
            parse_label_selector(selector)
        except SelectorError as error:
            message = f"not a label selector: {error}"
            yield document.diagnostic(RULE, message, (*pointer, "selector"))


#: Hosts whose incoming-webhook URLs carry their own credential (anyone holding one may post).
SECRET_WEBHOOK_HOSTS = ("hooks.slack.com", "webhook.office.com", "outlook.office.com")


def _endpoint_problems(document: Document, endpoints: list[Any]) -> Iterator[Diagnostic]:
    seen: set[str] = set()
    for index, endpoint in enumerate(endpoints):
        where: Pointer = ("spec", "notifications", "endpoints", index)
        name = endpoint.get("name")
        if name in seen:
            message = f"endpoint name '{name}' is used twice; each endpoint needs its own"
            yield document.diagnostic("C4", message, (*where, "name"))
        seen.add(name)
        url = endpoint.get("url")
        if isinstance(url, str) and secret_url(url):
            message = (
                "this URL is a credential (anyone holding it may post): keep it out of the repo "
                "and give urlFrom (a file in --notification-secrets-dir, or a Secret)"
            )
            yield document.diagnostic("C6", message, (*where, "url"))


def secret_url(url: str) -> bool:
    """Whether a notification ``url`` carries a credential: a query string, or the host of an
    incoming webhook whose path is its key (Slack, Microsoft Teams)."""
    rest = url.split("://", 1)[-1]
    host = rest.split("/", 1)[0].split(":", 1)[0].lower()
    secret_host = any(host == h or host.endswith("." + h) for h in SECRET_WEBHOOK_HOSTS)
    return "?" in rest or secret_host


def disabled_step_problem(name: str, steps: Mapping[str, bool]) -> str | None:
    """Why ``name`` cannot be in ``disabledSteps`` (``None`` when it can): ``steps`` maps every
    known step to whether it is optional. An unknown name is not repeated (it may be anything)."""
    optional = sorted(n for n, is_optional in steps.items() if is_optional)
    if steps.get(name):
        return None
    if name in steps:
        return f"step {name} cannot be switched off: it is not optional ({_listing(optional)})"
    return f"no optional step has this name ({_listing(optional)})" + did_you_mean(name, optional)


def _listing(optional: list[str]) -> str:
    if not optional:
        return "no step installed here is optional; plugins may offer optional steps"
    return "optional steps: " + ", ".join(optional)


def is_zero_duration(text: str) -> bool:
    """Whether a schema-valid duration (``1h30m``, ``0s``, ``""``) is zero long."""
    return not any(c in "123456789" for c in text)


def _get(spec: Mapping[str, Any], path: Pointer) -> Any:
    node: Any = spec
    for part in path:
        if not isinstance(node, Mapping):
            return None
        node = node.get(part)
    return node
