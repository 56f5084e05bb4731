"""Rendering (reconciler.core.render): the objects a runtime should run, labelled and ordered."""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from typing import Any

import pytest

from reconciler.core.model import (
    ANNOTATION_DEFAULT_CONFIGURATION,
    ANNOTATION_MODULE_VERSION,
    LABEL_MANAGED_BY,
    LABEL_MODULE,
    LABEL_RUNTIME,
    ConfigRepo,
)
from reconciler.core.plan_values import desired_modules, prepared_module
from reconciler.core.render import KIND_ORDER, RenderedObject, Renderer
from reconciler.core.resolve import resolve_runtime
from reconciler.source.loader import load_repo
from tests.support.repos import RepoFactory, channel_file, module_files, runtime_file


def _obj(api: str, kind: str, name: str, **fields: Any) -> dict[str, Any]:
    metadata = {"name": name, **fields.pop("metadata", {})}
    return {"apiVersion": api, "kind": kind, "metadata": metadata, **fields}


def _crd(plural: str, group: str, kind: str, scope: str) -> dict[str, Any]:
    spec = {
        "group": group,
        "names": {"kind": kind, "plural": plural},
        "scope": scope,
        "versions": [{"name": "v1", "served": True, "storage": True}],
    }
    return _obj(
        "apiextensions.k8s.io/v1", "CustomResourceDefinition", f"{plural}.{group}", spec=spec
    )


#: The objects of module mesh, in a deliberately unhelpful file order (CRDs last).
MESH_OBJECTS = [
    _obj("mesh.io/v1", "Gateway", "ingress"),
    _obj("mesh.io/v1", "MeshPolicy", "global"),
    _obj("v1", "ConfigMap", "shared", metadata={"namespace": "other-ns"}),
    _obj("rbac.authorization.k8s.io/v1", "ClusterRole", "mesh-reader"),
    _obj("v1", "ServiceAccount", "mesh", metadata={"labels": {"team": "net"}}),
    _obj("scheduling.k8s.io/v1", "PriorityClass", "mesh-critical", value=1000),
    _obj("v1", "Namespace", "mesh-system"),
    _crd("meshpolicies", "mesh.io", "MeshPolicy", "Cluster"),
    _crd("gateways", "mesh.io", "Gateway", "Namespaced"),
]
#: Module app uses a cluster-scoped kind that mesh defines.
APP_OBJECTS = [
    _obj("v1", "Service", "app"),
    _obj("mesh.io/v1", "MeshPolicy", "app-policy"),
]
CLUSTER_SCOPED = {
    "Namespace",
    "ClusterRole",
    "PriorityClass",
    "CustomResourceDefinition",
    "MeshPolicy",
}


def _files() -> dict[str, str]:
    return {
        **module_files(
            "mesh",
            ("1.0.0", "2.0.0"),
            objects=MESH_OBJECTS,
            default=_obj("mesh.io/v1", "Mesh", "default"),
        ),
        **module_files(
            "app",
            ("1.0.0",),
            depends_on=["mesh"],
            objects=APP_OBJECTS,
            default=_obj("app.io/v1", "App", "default", spec={"replicas": 2}),
        ),
        **channel_file("regular", {"mesh": "1.0.0", "app": "1.0.0"}),
        **runtime_file("blue", "regular", [{"name": "app"}]),
        **runtime_file("green", "regular", [{"name": "app"}, {"name": "mesh", "version": "2.0.0"}]),
    }


@pytest.fixture
def repo(make_repo: RepoFactory) -> ConfigRepo:
    validation = load_repo(make_repo(_files()))
    assert validation.repo is not None, [d.format() for d in validation.diagnostics]
    return validation.repo


def _render(repo: ConfigRepo, runtime: str, modules: Sequence[str] = ()) -> list[RenderedObject]:
    return Renderer(repo).render(resolve_runtime(repo, repo.runtimes[runtime]), modules)


def _metadata(obj: RenderedObject) -> Mapping[str, Any]:
    metadata: Mapping[str, Any] = obj.body["metadata"]
    return metadata


def _find(rendered: Sequence[RenderedObject], kind: str, name: str) -> RenderedObject:
    matches = [o for o in rendered if o.body["kind"] == kind and _metadata(o)["name"] == name]
    assert len(matches) == 1, [o.subject for o in rendered]
    return matches[0]


# -- labels and annotations (DESIGN.md §3) -------------------------------------------------------


@pytest.mark.parametrize("runtime", ["blue", "green"])
def test_every_object_carries_the_labels_and_annotation(repo: ConfigRepo, runtime: str) -> None:
    rendered = _render(repo, runtime)
    resolution = resolve_runtime(repo, repo.runtimes[runtime])
    versions = {m.name: m.version for m in resolution.modules}

    # every object of every module: manifest objects, the operator and the default
    assert len(rendered) == (len(MESH_OBJECTS) + 2) + (len(APP_OBJECTS) + 2)
    for obj in rendered:
        labels = _metadata(obj)["labels"]
        assert labels[LABEL_MANAGED_BY] == "reconciler"
        assert labels[LABEL_RUNTIME] == runtime
        assert labels[LABEL_MODULE] == obj.module
        assert _metadata(obj)["annotations"][ANNOTATION_MODULE_VERSION] == versions[obj.module]
        assert obj.version == versions[obj.module]


def test_the_resolved_version_decides_the_objects(repo: ConfigRepo) -> None:
    blue = _find(_render(repo, "blue"), "Deployment", "mesh-operator")
    green = _find(_render(repo, "green"), "Deployment", "mesh-operator")

    assert _metadata(blue)["labels"]["app.kubernetes.io/version"] == "1.0.0"
    assert _metadata(green)["labels"]["app.kubernetes.io/version"] == "2.0.0"
    assert _metadata(green)["annotations"][ANNOTATION_MODULE_VERSION] == "2.0.0"


def test_labels_of_the_manifest_are_kept(repo: ConfigRepo) -> None:
    labels = _metadata(_find(_render(repo, "blue"), "ServiceAccount", "mesh"))["labels"]

    assert labels["team"] == "net"
    assert labels[LABEL_MODULE] == "mesh"


def test_the_default_configuration_is_annotated_and_last_in_its_module(repo: ConfigRepo) -> None:
    rendered = _render(repo, "blue")

    for module, kind in (("mesh", "Mesh"), ("app", "App")):
        objects = [o for o in rendered if o.module == module]
        last = objects[-1]
        assert (last.body["kind"], last.default_configuration) == (kind, True)
        assert _metadata(last)["annotations"][ANNOTATION_DEFAULT_CONFIGURATION] == "true"
        for other in objects[:-1]:
            assert not other.default_configuration
            assert ANNOTATION_DEFAULT_CONFIGURATION not in _metadata(other)["annotations"]
    assert _find(rendered, "App", "default").body["spec"] == {"replicas": 2}


# -- namespaces ----------------------------------------------------------------------------------


def test_namespaced_objects_without_one_get_the_module_namespace(repo: ConfigRepo) -> None:
    rendered = _render(repo, "blue")

    for obj in rendered:
        if obj.body["kind"] in CLUSTER_SCOPED:
            continue
        expected = "other-ns" if _metadata(obj)["name"] == "shared" else f"{obj.module}-system"
        assert _metadata(obj)["namespace"] == expected, obj.subject
    assert _find(rendered, "Gateway", "ingress").subject == "Gateway/mesh-system/ingress"
    assert _metadata(_find(rendered, "Mesh", "default"))["namespace"] == "mesh-system"


def test_cluster_scoped_objects_get_no_namespace(repo: ConfigRepo) -> None:
    rendered = _render(repo, "blue")

    cluster_scoped = [o for o in rendered if o.body["kind"] in CLUSTER_SCOPED]
    # 2 CRDs, Namespace, ClusterRole, PriorityClass, MeshPolicy of mesh; MeshPolicy of app
    assert len(cluster_scoped) == 7
    for obj in cluster_scoped:
        assert "namespace" not in _metadata(obj), obj.subject
    # a kind made cluster-scoped by a CRD of another module
    assert _find(rendered, "MeshPolicy", "app-policy").subject == "MeshPolicy/app-policy"


# -- order ---------------------------------------------------------------------------------------


def test_modules_come_in_dependency_order(repo: ConfigRepo) -> None:
    modules = [o.module for o in _render(repo, "blue")]

    assert modules == sorted(modules, key=["mesh", "app"].index)


def test_crds_and_namespaces_first_custom_resources_after_builtins(repo: ConfigRepo) -> None:
    for module in ("mesh", "app"):
        kinds = [o.body["kind"] for o in _render(repo, "blue") if o.module == module]
        ranks = [KIND_ORDER.index(k) if k in KIND_ORDER else len(KIND_ORDER) for k in kinds[:-1]]

        assert ranks == sorted(ranks), kinds
        if module == "mesh":
            assert kinds[:3] == [
                "CustomResourceDefinition",
                "CustomResourceDefinition",
                "Namespace",
            ]
            assert kinds[-3:] == ["Gateway", "MeshPolicy", "Mesh"]
            assert kinds.index("ServiceAccount") < kinds.index("Deployment")
            assert kinds.index("ClusterRole") < kinds.index("Deployment")


def test_ties_are_broken_by_namespace_and_name(make_repo: RepoFactory) -> None:
    objects = [
        _obj("v1", "ConfigMap", "b"),
        _obj("v1", "ConfigMap", "a", metadata={"namespace": "zz"}),
        _obj("v1", "ConfigMap", "c", metadata={"namespace": "aa"}),
        _obj("v1", "ConfigMap", "a"),
    ]
    files = {
        **module_files("solo", objects=objects, namespace="mm"),
        **channel_file("regular", {"solo": "1.0.0"}),
        **runtime_file("one", "regular", [{"name": "solo"}]),
    }
    validation = load_repo(make_repo(files))
    assert validation.repo is not None

    subjects = [o.subject for o in _render(validation.repo, "one") if o.body["kind"] == "ConfigMap"]

    assert subjects == ["ConfigMap/aa/c", "ConfigMap/mm/a", "ConfigMap/mm/b", "ConfigMap/zz/a"]


# -- purity --------------------------------------------------------------------------------------


def test_rendering_is_deterministic(repo: ConfigRepo) -> None:
    renderer = Renderer(repo)
    resolution = resolve_runtime(repo, repo.runtimes["green"])

    first = renderer.render(resolution)
    again = renderer.render(resolution)
    fresh = _render(repo, "green")

    assert first == again == fresh
    assert [o.subject for o in first] == [o.subject for o in fresh]


def test_the_model_is_not_mutated(repo: ConfigRepo) -> None:
    before = copy.deepcopy({name: dict(m.versions) for name, m in repo.modules.items()})

    renderer = Renderer(repo)
    for runtime in ("blue", "green"):
        renderer.render(resolve_runtime(repo, repo.runtimes[runtime]))

    after = {name: dict(m.versions) for name, m in repo.modules.items()}
    assert after == before
    service = repo.modules["app"].versions["1.0.0"].objects[0]
    assert service["metadata"] == {"name": "app"}  # no labels, namespace or annotations added


def test_each_runtime_gets_its_own_runtime_label_from_one_renderer(repo: ConfigRepo) -> None:
    renderer = Renderer(repo)
    blue = renderer.render(resolve_runtime(repo, repo.runtimes["blue"]))
    snapshot = copy.deepcopy([o.body for o in blue])

    green = renderer.render(resolve_runtime(repo, repo.runtimes["green"]))

    assert {_metadata(o)["labels"][LABEL_RUNTIME] for o in blue} == {"blue"}
    assert {_metadata(o)["labels"][LABEL_RUNTIME] for o in green} == {"green"}
    assert [o.body for o in blue] == snapshot


# -- narrowing -----------------------------------------------------------------------------------


def test_modules_narrow_the_output(repo: ConfigRepo) -> None:
    everything = _render(repo, "blue")

    only_app = _render(repo, "blue", ["app"])

    assert {o.module for o in only_app} == {"app"}
    assert only_app == [o for o in everything if o.module == "app"]
    assert _render(repo, "blue", ["app", "mesh"]) == everything


# -- unusual but valid metadata ------------------------------------------------------------------


def test_null_labels_and_annotations_are_filled(make_repo: RepoFactory) -> None:
    objects = [_obj("v1", "ConfigMap", "c", metadata={"labels": None, "annotations": None})]
    files = {
        **module_files("solo", objects=objects),
        **channel_file("regular", {"solo": "1.0.0"}),
        **runtime_file("one", "regular", [{"name": "solo"}]),
    }
    validation = load_repo(make_repo(files))
    assert validation.repo is not None, [d.format() for d in validation.diagnostics]

    config_map = _find(_render(validation.repo, "one"), "ConfigMap", "c")

    assert _metadata(config_map)["labels"][LABEL_RUNTIME] == "one"
    assert _metadata(config_map)["annotations"][ANNOTATION_MODULE_VERSION] == "1.0.0"


# -- desired modules: the one way they are built (core.plan_values) ------------------------------


def test_desired_modules_are_the_render_split_per_module_in_dependency_order(
    repo: ConfigRepo,
) -> None:
    resolution = resolve_runtime(repo, repo.runtimes["green"])
    renderer = Renderer(repo)
    desired = desired_modules(repo, resolution, renderer)
    assert [d.name for d in desired] == ["mesh", "app"]
    rendered = renderer.render(resolution)
    for module in desired:
        mine = [o for o in rendered if o.module == module.name]
        assert [*module.objects, module.default_configuration] == mine  # default last
        assert all(_metadata(o)["labels"][LABEL_RUNTIME] == "green" for o in module.objects)
    (app,) = desired_modules(repo, resolution, renderer, ("app",))  # narrowed: the same
    assert app == desired[1]


def test_a_prepared_module_is_its_version_before_the_runtime_label(repo: ConfigRepo) -> None:
    resolution = resolve_runtime(repo, repo.runtimes["green"])
    renderer = Renderer(repo)
    mesh = resolution.modules[0]
    prepared = prepared_module(renderer, mesh, "green")
    (stamped,) = desired_modules(repo, resolution, renderer, ("mesh",))
    assert prepared.resolved == stamped.resolved
    assert [o.subject for o in prepared.objects] == [o.subject for o in stamped.objects]
    assert all(LABEL_RUNTIME not in _metadata(o)["labels"] for o in prepared.objects)
    assert prepared_module(renderer, mesh, "green", hooks=False).hooks == ()
