"""Rendering after resolution (reconciler.core.templates): values layers and the render cache."""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest

from reconciler.core.model import (
    Channel,
    ClusterAccess,
    ConfigRepo,
    Module,
    ModuleKind,
    ModuleRef,
    ModuleVersion,
    RenderedTemplate,
    Runtime,
    Settings,
    TemplateSource,
)
from reconciler.core.templates import (
    RenderCache,
    RenderRequest,
    merge_values,
    render_repo,
)
from reconciler.errors import RenderError


@dataclass
class CountingRenderer:
    """Our seam's fake: one ConfigMap carrying the values; counts calls."""

    calls: list[RenderRequest] = field(default_factory=list)
    fail: bool = False

    def render(self, request: RenderRequest) -> RenderedTemplate:
        self.calls.append(request)
        if self.fail:
            raise RenderError("template broken", request.template.root)
        body = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}}
        return RenderedTemplate(({**body, "data": dict(request.values)},), request.key)


def _fleet(runtimes: int, value_sets: int) -> ConfigRepo:
    template = TemplateSource(
        ModuleKind.CHART,
        "sha256:abc",
        {"Chart.yaml": b"name: web"},
        "web/1.0.0/chart",
        {"size": "small", "tier": {"name": "base", "replicas": 1}},
    )
    version = ModuleVersion("1.0.0", (), kind=ModuleKind.CHART, template=template)
    module = Module("web", "web-system", "Deployment", "web-op", {"1.0.0": version})
    channel = Channel("regular", {"web": "1.0.0"}, values={"web": {"tier": {"replicas": 2}}})
    fleet = {
        f"rt-{i}": Runtime(
            f"rt-{i}",
            "regular",
            ClusterAccess(context="c"),
            (ModuleRef("web", values={"size": f"set-{i % value_sets}"}),),
        )
        for i in range(runtimes)
    }
    return ConfigRepo(Settings(), fleet, {"web": module}, {"regular": channel})


def test_a_fleet_of_1000_runtimes_with_3_value_sets_renders_3_times() -> None:
    repo, renderer, cache = _fleet(1000, 3), CountingRenderer(), RenderCache()
    rendered, failures = render_repo(repo, renderer, cache)
    assert not failures
    assert (len(renderer.calls), cache.renders, len(rendered)) == (3, 3, 1000)
    assert len({r.key for r in rendered.values()}) == 3


def test_values_layer_version_then_channel_then_runtime() -> None:
    rendered, _ = render_repo(_fleet(2, 2), CountingRenderer())
    (config,) = rendered[("rt-1", "web")].objects
    assert config["data"] == {"size": "set-1", "tier": {"name": "base", "replicas": 2}}


def test_a_request_names_the_release_after_the_module_in_its_namespace() -> None:
    renderer = CountingRenderer()
    render_repo(_fleet(1, 1), renderer)
    (request,) = renderer.calls
    assert (request.release_name, request.namespace) == ("web", "web-system")


def test_a_failed_render_is_tried_once_per_key_and_reported_per_runtime() -> None:
    renderer = CountingRenderer(fail=True)
    rendered, failures = render_repo(_fleet(10, 2), renderer)
    assert (len(renderer.calls), len(failures), rendered) == (2, 10, {})
    assert failures[0].path == "web/1.0.0/chart"


@pytest.mark.parametrize(
    ("base", "over", "merged"),
    [
        ({"a": {"b": 1, "c": 2}}, {"a": {"c": 3}}, {"a": {"b": 1, "c": 3}}),
        ({"a": [1, 2]}, {"a": [3]}, {"a": [3]}),
        ({"a": {"b": 1}}, {"a": None}, {"a": None}),
        ({"a": 1}, {"a": {"b": 2}}, {"a": {"b": 2}}),
    ],
)
def test_merge_values_merges_mappings_and_replaces_the_rest(
    base: dict[str, object], over: dict[str, object], merged: dict[str, object]
) -> None:
    assert merge_values(base, over) == merged
