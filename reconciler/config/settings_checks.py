"""Checks of ``reconciler.yaml`` (Settings) beyond its schema (pure).

The schema says what the fields look like; these checks say whether they mean something:

- every name in ``spec.operations.disabledSteps`` is an *optional* step (built in, or offered by
  an installed plugin). The engine would otherwise skip nothing and say nothing. Built-in steps
  are listed here (:data:`BUILTIN_STEPS`, name -> optional) because the pure core may not import
  the operations package; a test keeps the list equal to ``BUILTIN_STAGES``. Plugin steps are
  found by the loader, which passes their names in;
- every duration of ``spec.operations.timeouts`` and ``spec.intervals`` is more than zero (a zero
  time limit fails every operation at once; a zero interval polls without pause);
- the names of ``spec.notifications.endpoints`` are unique, and no endpoint's ``url`` is a
  credential in itself (C6): a Slack or Teams incoming-webhook URL, or one with a query string
  (``?token=...``), belongs in ``urlFrom``.
- the waves of ``spec.rollout`` have distinct names and selectors that read as kubectl's.

Problems are C1 diagnostics at the offending value. Caller: the validator.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from reconciler.config.yamlsafe import Document
from reconciler.core.diagnostics import Diagnostic, Pointer, did_you_mean

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
    document: Document, plugin_steps: Mapping[str, bool] | None = None
) -> Iterator[Diagnostic]:
    """What is wrong in a schema-valid Settings ``document``; ``plugin_steps`` are the installed
    plugins' steps (name -> optional)."""
    spec = document.data.get("spec") or {}
    steps = {**(plugin_steps or {}), **BUILTIN_STEPS}
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
    yield from _wave_problems(document, spec.get("rollout", {}).get("waves", ()))
    yield from _endpoint_problems(document, spec.get("notifications", {}).get("endpoints", ()))


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
