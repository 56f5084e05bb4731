"""Who changed an enforced field, as the fleet diff names it: the runtime's module entry or the
channel's ``spec.config``; a field the runtime's ``null`` releases is the runtime's doing."""

from __future__ import annotations

from reconciler.core.fielddiff import FieldChange
from reconciler.core.model import Channel, ClusterAccess, ModuleRef, Runtime
from reconciler.core.overridediff import override_causes, override_fields
from reconciler.core.overrides import ConfigOverride, EnforcedField

CHANNEL = Channel(
    "regular",
    {"widget": "1.0.0"},
    source="channels/regular.yaml",
    config={"widget": {"logLevel": "warn"}},
)
BY_CHANNEL = ConfigOverride(
    "widget",
    "1.0.0",
    {"logLevel": "warn"},
    (EnforcedField(("logLevel",), "channel regular"),),
)


def _runtime(config: dict[str, object] | None) -> Runtime:
    modules = (ModuleRef("other"), ModuleRef("widget", config=config))
    return Runtime("rt", "regular", ClusterAccess(), modules, source="runtimes/rt.yaml")


def test_a_field_the_runtime_nulls_is_released_by_the_runtime_entry() -> None:
    fields = override_fields(BY_CHANNEL, None)
    assert fields == (FieldChange("spec.logLevel", "warn", None),)

    causes = override_causes(
        fields, (BY_CHANNEL, None), "widget", (_runtime({"logLevel": None}), CHANNEL)
    )

    assert causes == [("runtimes/rt.yaml", "spec.modules[1].config.logLevel")]


def test_a_field_the_channel_stops_enforcing_is_the_channel_s_doing() -> None:
    fields = override_fields(BY_CHANNEL, None)

    causes = override_causes(fields, (BY_CHANNEL, None), "widget", (_runtime(None), CHANNEL))

    assert causes == [("channels/regular.yaml", "spec.config.widget.logLevel")]
