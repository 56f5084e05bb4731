"""Resolution (which modules and versions a runtime gets, and why) and rendering (the objects).

Built from plain model values, no files: resolve and render are pure.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

import pytest

from reconciler.core.model import (
    ANNOTATION_DEFAULT_CONFIGURATION,
    ANNOTATION_MODULE_VERSION,
    LABEL_MANAGED_BY,
    LABEL_MODULE,
    LABEL_RUNTIME,
    Channel,
    ClusterAccess,
    ConfigRepo,
    Module,
    ModuleRef,
    ModuleVersion,
    Runtime,
    Settings,
    Strategy,
)
from reconciler.core.render import Renderer, apply_order_key
from reconciler.core.resolve import Inclusion, VersionSource, resolve_runtime


def _obj(kind: str, name: str, api: str = "v1", **extra: Any) -> dict[str, Any]:
    return {"apiVersion": api, "kind": kind, "metadata": {"name": name}, **extra}


def _module(name: str, versions: tuple[str, ...] = ("1.0.0", "2.0.0"), **fields: Any) -> Module:
    objects = (
        _obj("Deployment", f"{name}-operator", "apps/v1"),
        _obj("ServiceAccount", f"{name}-operator"),
        _obj("ClusterRole", f"{name}-operator", "rbac.authorization.k8s.io/v1"),
        _obj(
            "CustomResourceDefinition",
            f"{name}s.example.io",
            "apiextensions.k8s.io/v1",
            spec={"group": "example.io", "scope": "Namespaced", "names": {"kind": name.title()}},
        ),
    )
    default = _obj(name.title(), "default", "example.io/v1")
    content = {v: ModuleVersion(v, objects, default) for v in versions}
    return Module(name, "kyma-system", "Deployment", f"{name}-operator", content, **fields)


def _repo(*modules: Module, runtime: Runtime | None = None) -> ConfigRepo:
    channels = {
        "regular": Channel("regular", {m.name: min(m.versions) for m in modules}),
        "fast": Channel("fast", {m.name: max(m.versions) for m in modules}),
    }
    runtimes = {runtime.name: runtime} if runtime else {}
    return ConfigRepo(Settings(), runtimes, {m.name: m for m in modules}, channels)


def _runtime(*refs: ModuleRef, channel: str = "regular") -> Runtime:
    return Runtime("rt", channel, ClusterAccess(context="c"), refs)


# -- resolution ----------------------------------------------------------------------------------


def test_pin_beats_module_channel_beats_runtime_channel() -> None:
    repo = _repo(_module("a"), _module("b"), _module("c"))
    runtime = _runtime(
        ModuleRef("a", version="2.0.0", channel="regular"),
        ModuleRef("b", channel="fast"),
        ModuleRef("c"),
    )

    resolution = resolve_runtime(repo, runtime)

    got = {m.name: (m.version, m.source, m.origin()) for m in resolution.modules}
    assert got == {
        "a": ("2.0.0", VersionSource.PIN, "pinned"),
        "b": ("2.0.0", VersionSource.MODULE_CHANNEL, "channel fast (module override)"),
        "c": ("1.0.0", VersionSource.RUNTIME_CHANNEL, "channel regular"),
    }
    assert resolution.problems == ()


def test_mandatory_modules_and_dependencies_are_added_with_their_own_versions() -> None:
    repo = _repo(
        _module("base", mandatory=True),
        _module("mesh", versions=("1.0.0", "1.5.0")),
        _module("app", depends_on=("mesh",)),
        _module("tool", depends_on=("mesh",)),
    )
    runtime = _runtime(ModuleRef("app", version="2.0.0"), ModuleRef("tool"), channel="fast")

    resolution = resolve_runtime(repo, runtime)

    by_name = {m.name: m for m in resolution.modules}
    assert by_name["base"].inclusion is Inclusion.MANDATORY
    assert by_name["mesh"].inclusion is Inclusion.DEPENDENCY
    assert by_name["mesh"].version == "1.5.0"  # the runtime's channel, not app's pin
    assert by_name["mesh"].required_by == ("app", "tool")
    assert by_name["mesh"].reason() == "dependency of app, tool"


def test_listed_dependency_keeps_its_own_entry() -> None:
    repo = _repo(_module("mesh"), _module("app", depends_on=("mesh",)))
    runtime = _runtime(
        ModuleRef("app"), ModuleRef("mesh", version="2.0.0", strategy=Strategy.IGNORE)
    )

    mesh = resolve_runtime(repo, runtime).module("mesh")

    assert mesh is not None
    assert (mesh.version, mesh.inclusion, mesh.strategy) == (
        "2.0.0",
        Inclusion.LISTED,
        Strategy.IGNORE,
    )


def test_dependency_order_then_names() -> None:
    repo = _repo(
        _module("zeta"),
        _module("app", depends_on=("zeta", "mesh")),
        _module("mesh", depends_on=("zeta",)),
        _module("alpha"),
    )
    runtime = _runtime(*(ModuleRef(n) for n in ("app", "alpha", "mesh", "zeta")))

    order = [m.name for m in resolve_runtime(repo, runtime).modules]

    assert order == ["alpha", "zeta", "mesh", "app"]


@pytest.mark.parametrize(
    ("ref", "channel", "pointer", "message"),
    [
        (
            ModuleRef("nope"),
            "regular",
            ("spec", "modules", 0, "name"),
            "module 'nope' does not exist",
        ),
        (
            ModuleRef("a", channel="fsat"),
            "regular",
            ("spec", "modules", 0, "channel"),
            "channel 'fsat' does not exist; did you mean 'fast'?",
        ),
        (
            ModuleRef("a", version="3.0.0"),
            "regular",
            ("spec", "modules", 0, "version"),
            "module 'a' has no version 3.0.0 (versions: 1.0.0, 2.0.0)",
        ),
        (ModuleRef("a"), "reguler", ("spec", "channel"), "channel 'reguler' does not exist"),
    ],
)
def test_problems_point_at_their_field(
    ref: ModuleRef, channel: str, pointer: tuple[Any, ...], message: str
) -> None:
    resolution = resolve_runtime(_repo(_module("a")), _runtime(ref, channel=channel))

    assert len(resolution.problems) == 1
    assert resolution.problems[0].pointer == pointer
    assert resolution.problems[0].message.startswith(message)


# -- rendering -----------------------------------------------------------------------------------


def _render(repo: ConfigRepo, runtime: Runtime, *modules: str) -> list[Mapping[str, Any]]:
    return [o.body for o in Renderer(repo).render(resolve_runtime(repo, runtime), modules)]


def test_every_object_carries_our_labels_and_annotation() -> None:
    repo = _repo(_module("a"), _module("b"))

    bodies = _render(repo, _runtime(ModuleRef("a"), ModuleRef("b", channel="fast")))

    assert len(bodies) == 10
    for body in bodies:
        labels = body["metadata"]["labels"]
        assert labels[LABEL_MANAGED_BY] == "reconciler"
        assert labels[LABEL_RUNTIME] == "rt"
        expected = "1.0.0" if labels[LABEL_MODULE] == "a" else "2.0.0"
        assert body["metadata"]["annotations"][ANNOTATION_MODULE_VERSION] == expected


def test_crds_first_default_configuration_last() -> None:
    bodies = _render(_repo(_module("a")), _runtime(ModuleRef("a")))

    kinds = [b["kind"] for b in bodies]
    assert kinds == ["CustomResourceDefinition", "ServiceAccount", "ClusterRole", "Deployment", "A"]
    assert bodies[-1]["metadata"]["annotations"][ANNOTATION_DEFAULT_CONFIGURATION] == "true"
    assert all(
        ANNOTATION_DEFAULT_CONFIGURATION not in b["metadata"]["annotations"] for b in bodies[:-1]
    )


def test_namespaces_filled_for_namespaced_objects_only() -> None:
    module = _module("a")
    cluster_crd = _obj(
        "CustomResourceDefinition",
        "globals.example.io",
        "apiextensions.k8s.io/v1",
        spec={"group": "example.io", "scope": "Cluster", "names": {"kind": "Global"}},
    )
    extra = (
        cluster_crd,
        _obj("Global", "g", "example.io/v1"),
        _obj("ConfigMap", "elsewhere", metadata={"name": "elsewhere", "namespace": "other"}),
    )
    versions = {"1.0.0": ModuleVersion("1.0.0", module.versions["1.0.0"].objects + extra)}
    module = Module(module.name, module.namespace, "Deployment", "a-operator", versions)
    repo = ConfigRepo(
        Settings(), {}, {"a": module}, {"regular": Channel("regular", {"a": "1.0.0"})}
    )

    bodies = _render(repo, _runtime(ModuleRef("a")))

    namespaces = {(b["kind"], b["metadata"].get("namespace")) for b in bodies}
    assert ("Deployment", "kyma-system") in namespaces
    assert ("ServiceAccount", "kyma-system") in namespaces
    assert ("ClusterRole", None) in namespaces
    assert ("CustomResourceDefinition", None) in namespaces
    assert ("Global", None) in namespaces
    assert ("ConfigMap", "other") in namespaces


def test_rendering_is_deterministic_and_does_not_touch_the_model() -> None:
    repo = _repo(_module("a"), _module("b", depends_on=("a",)))
    before = copy.deepcopy(repo.modules["a"].versions["1.0.0"].objects)

    first = _render(repo, _runtime(ModuleRef("b")))
    second = _render(repo, _runtime(ModuleRef("b")))

    assert first == second
    assert repo.modules["a"].versions["1.0.0"].objects == before
    assert [b["metadata"]["labels"][LABEL_MODULE] for b in first][:5] == ["a"] * 5


def test_runtime_label_differs_per_runtime_from_one_cache() -> None:
    repo = _repo(_module("a"))
    renderer = Renderer(repo)
    one = renderer.render(resolve_runtime(repo, _runtime(ModuleRef("a"))))
    other_runtime = Runtime("other", "regular", ClusterAccess(context="c"), (ModuleRef("a"),))
    two = renderer.render(resolve_runtime(repo, other_runtime))

    assert {o.body["metadata"]["labels"][LABEL_RUNTIME] for o in one} == {"rt"}
    assert {o.body["metadata"]["labels"][LABEL_RUNTIME] for o in two} == {"other"}


def test_narrowing_to_modules() -> None:
    repo = _repo(_module("a"), _module("b"))

    bodies = _render(repo, _runtime(ModuleRef("a"), ModuleRef("b")), "b")

    assert {b["metadata"]["labels"][LABEL_MODULE] for b in bodies} == {"b"}


def test_apply_order_key_puts_custom_resources_after_builtins() -> None:
    bodies = [_obj("Widget", "w", "example.io/v1"), _obj("Namespace", "n"), _obj("Service", "s")]

    assert [b["kind"] for b in sorted(bodies, key=apply_order_key)] == [
        "Namespace",
        "Service",
        "Widget",
    ]
