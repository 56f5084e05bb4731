"""Charts rendered by Helm's own engine (reconciler.render), and read as modules of a repo."""

from __future__ import annotations

import base64
import io
import json
import tarfile
from collections.abc import Mapping
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

import pytest
import yaml
from click.testing import CliRunner

from reconciler.cli import cli
from reconciler.core.hooks import runnable
from reconciler.core.model import ConfigRepo, ModuleKind, RenderedTemplate, TemplateSource
from reconciler.core.render import Renderer
from reconciler.core.resolve import resolve_runtime
from reconciler.core.templates import (
    DEFAULT_KUBE_VERSION,
    ENGINE_DEFAULT,
    Capabilities,
    RenderCache,
    RenderRequest,
)
from reconciler.errors import RenderError
from reconciler.render import default_renderer
from reconciler.render.documents import split_manifest
from reconciler.render.helm import HelmChartRenderer
from reconciler.source.loader import load_repo
from tests.support.charts import CHART_TEMPLATES, chart_module_files
from tests.support.http_fakes import CountingServer
from tests.support.repos import RepoFactory, channel_file, dump, runtime_file


def test_a_document_may_start_with_a_comment_after_its_separator() -> None:
    text = "a: 1\n---# second\nb: 2\n---  \n\nc: 3\n"
    # as Go's regexp splits on (?:^|\s*\n)---\s*: the blank lines go with the separator
    assert split_manifest(text) == ["a: 1", "# second\nb: 2", "c: 3\n"]


def _repo(make_repo: RepoFactory, **files: Mapping[str, str]) -> ConfigRepo:
    channel = channel_file("regular", {"web": "1.0.0"})
    document = {
        "apiVersion": "reconciler.dev/v1alpha1",
        "kind": "Channel",
        "metadata": {"name": "regular"},
        "spec": {"modules": {"web": "1.0.0"}, "values": {"web": {"size": "medium"}}},
    }
    channel["channels/regular.yaml"] = dump(document)
    tree = {
        **chart_module_files("web", values={"greeting": "hi", "size": "small"}),
        **channel,
        **runtime_file("plain", "regular", [{"name": "web"}]),
        **runtime_file(
            "tuned",
            "regular",
            [{"name": "web", "valuesFrom": "values/big.yaml", "values": {"greeting": "hey"}}],
        ),
        "values/big.yaml": dump({"size": "large", "greeting": "yo", "replicas": 3}),
    }
    for extra in files.values():
        tree.update(extra)
    validation = load_repo(make_repo(tree), renderer=default_renderer())
    assert validation.repo is not None, [d.format() for d in validation.diagnostics]
    return validation.repo


def _objects(repo: ConfigRepo, runtime: str) -> dict[str, Mapping[str, Any]]:
    resolution = resolve_runtime(repo, repo.runtimes[runtime])
    return {o.body["kind"]: o.body for o in Renderer(repo).render(resolution)}


def test_a_chart_module_renders_with_each_runtimes_values(make_repo: RepoFactory) -> None:
    repo = _repo(make_repo)
    assert repo.modules["web"].versions["1.0.0"].kind is ModuleKind.CHART
    plain, tuned = _objects(repo, "plain"), _objects(repo, "tuned")
    assert plain["ConfigMap"]["data"] == {
        "greeting": "hi",  # the version's values.yaml over the chart's default
        "size": "medium",  # the channel's values over both
        "namespace": "web-system",
    }
    assert tuned["ConfigMap"]["data"]["greeting"] == "hey"  # values over valuesFrom
    assert tuned["ConfigMap"]["data"]["size"] == "large"
    assert tuned["Deployment"]["spec"]["replicas"] == 3
    assert plain["ConfigMap"]["metadata"]["name"] == "web-settings"  # release: the module
    labels = tuned["Deployment"]["metadata"]["labels"]
    assert labels["reconciler.dev/runtime"] == "tuned"
    assert labels["reconciler.dev/module"] == "web"


def test_notes_are_text_not_objects(make_repo: RepoFactory) -> None:
    repo = _repo(make_repo)
    rendered = repo.rendered[("plain", "web")]
    assert rendered.notes.startswith("Thanks for installing web")
    assert sorted(o["kind"] for o in rendered.objects) == ["ConfigMap", "Deployment"]


_JOB = (
    "apiVersion: batch/v1\nkind: Job\nmetadata:\n  name: {name}\n  annotations:\n"
    '    "helm.sh/hook": {hook}\nspec:\n  template:\n    spec:\n      restartPolicy: Never\n'
    "      containers: [{{name: j, image: busybox}}]\n"
)


def test_test_hooks_are_kept_apart_and_never_run(make_repo: RepoFactory) -> None:
    hooks = {"modules/web/1.0.0/chart/templates/test.yaml": _JOB.format(name="t", hook="test")}
    repo = _repo(make_repo, hooks=hooks)
    rendered = repo.rendered[("plain", "web")]
    assert [h["metadata"]["name"] for h in rendered.hooks] == ["t"]  # listed by render
    assert runnable(rendered.hooks) == []  # never run: helm test is not part of a sync
    assert "Job" not in {o["kind"] for o in rendered.objects}


def test_a_chart_with_hooks_is_valid_and_its_hooks_come_from_the_same_render(
    make_repo: RepoFactory,
) -> None:
    hooks = {
        "modules/web/1.0.0/chart/templates/pre.yaml": _JOB.format(
            name="migrate", hook="pre-install,pre-upgrade"
        )
    }
    repo = _repo(make_repo, hooks=hooks)
    renderer = Renderer(repo)
    resolution = resolve_runtime(repo, repo.runtimes["plain"])
    (resolved,) = resolution.modules
    (hook,) = renderer.hooks(resolved, "plain")
    assert hook["metadata"]["namespace"] == "web-system"  # the release namespace
    assert hook["metadata"]["labels"] == {"reconciler.dev/hook-of": "web"}  # never ours
    assert "Job" not in {o.body["kind"] for o in renderer.render(resolution)}


def test_a_helm_2_crd_install_hook_is_refused_in_one_line(make_repo: RepoFactory) -> None:
    hooks = {
        "modules/web/1.0.0/chart/templates/crd.yaml": _JOB.format(name="old", hook="crd-install")
    }
    tree = {
        **chart_module_files("web"),
        **hooks,
        **channel_file("regular", {"web": "1.0.0"}),
        **runtime_file("a", "regular", [{"name": "web"}]),
    }
    validation = load_repo(make_repo(tree), renderer=default_renderer())
    assert validation.repo is None
    (error,) = validation.diagnostics
    assert error.rule == "C9"
    assert "Job/old: 'crd-install' is a Helm 2 hook" in error.message
    assert "\n" not in error.message


def test_a_chart_with_hooks_is_refused_by_spec_hooks_refuse_naming_chart_hook_and_object(
    make_repo: RepoFactory,
) -> None:
    hooks = {
        "modules/web/1.0.0/chart/templates/pre.yaml": _JOB.format(
            name="migrate", hook="pre-install,pre-upgrade"
        ),
        "modules/web/1.0.0/chart/templates/test.yaml": _JOB.format(name="t", hook="test"),
    }
    tree = {
        **chart_module_files("web"),
        **hooks,
        **channel_file("regular", {"web": "1.0.0"}),
        **runtime_file("a", "regular", [{"name": "web"}]),
        **runtime_file("b", "regular", [{"name": "web"}]),
    }
    module = yaml.safe_load(tree["modules/web/module.yaml"])
    module["spec"]["hooks"] = "Refuse"
    tree["modules/web/module.yaml"] = dump(module)
    validation = load_repo(make_repo(tree), renderer=default_renderer())
    assert validation.repo is None  # never applied as an ordinary object
    (error,) = validation.diagnostics
    assert error.rule == "C9"
    assert error.path.endswith("modules/web/1.0.0/chart/Chart.yaml")
    assert "module web 1.0.0 has Helm hooks, refused by spec.hooks: Refuse" in error.message
    assert "Job/migrate (pre-install,pre-upgrade)" in error.message
    assert "Job/t" not in error.message
    assert "[runtime a and 1 more]" in error.message


def test_a_template_error_is_a_located_c9_error(make_repo: RepoFactory) -> None:
    broken = {"modules/web/1.0.0/chart/templates/bad.yaml": "{{ .Values.nope.deeper }}\n"}
    tree = {
        **chart_module_files("web"),
        **broken,
        **channel_file("regular", {"web": "1.0.0"}),
        **runtime_file("a", "regular", [{"name": "web"}]),
        **runtime_file("b", "regular", [{"name": "web"}]),
    }
    validation = load_repo(make_repo(tree), renderer=default_renderer())
    (error,) = validation.diagnostics
    assert error.rule == "C9"
    assert error.path.endswith("modules/web/1.0.0/chart")
    assert "does not render for runtime a and 1 more" in error.message
    assert "nope" in error.message


def test_the_same_chart_and_values_render_once_across_reads(make_repo: RepoFactory) -> None:
    root = make_repo(
        {
            **chart_module_files("web"),
            **channel_file("regular", {"web": "1.0.0"}),
            **{
                k: v
                for i in range(5)
                for k, v in runtime_file(f"r{i}", "regular", [{"name": "web"}]).items()
            },
        }
    )
    cache = RenderCache()
    for _ in range(2):
        load_repo(root, renderer=default_renderer(), render_cache=cache)
    assert cache.renders == 1


def test_without_a_renderer_a_chart_module_is_refused_not_emptied(make_repo: RepoFactory) -> None:
    tree = {
        **chart_module_files("web"),
        **channel_file("regular", {"web": "1.0.0"}),
        **runtime_file("a", "regular", [{"name": "web"}]),
    }
    repo = load_repo(make_repo(tree)).repo
    assert repo is not None
    with pytest.raises(RenderError, match="was not rendered"):
        Renderer(repo).render(resolve_runtime(repo, repo.runtimes["a"]))


def test_a_render_without_the_operator_or_with_another_version_label_is_refused(
    make_repo: RepoFactory,
) -> None:
    chart = chart_module_files("web")
    chart["modules/web/1.0.0/chart/Chart.yaml"] = dump(
        {"apiVersion": "v2", "name": "web", "version": "1.0.0", "appVersion": "2.0.0"}
    )
    tree = {
        **chart,
        **chart_module_files(
            "api", templates={"templates/cm.yaml": CHART_TEMPLATES["templates/config.yaml"]}
        ),
        **channel_file("regular", {"web": "1.0.0", "api": "1.0.0"}),
        **runtime_file("a", "regular", [{"name": "web"}, {"name": "api"}]),
    }
    validation = load_repo(make_repo(tree), renderer=default_renderer())
    assert validation.repo is None
    errors = {e.rule: e for e in validation.diagnostics}
    assert set(errors) == {"C2", "C4"}
    assert errors["C2"].path.endswith("modules/api/1.0.0/chart/Chart.yaml")
    assert "renders no Deployment 'api-operator'" in errors["C2"].message
    assert errors["C4"].path.endswith("modules/web/1.0.0/chart/Chart.yaml")
    assert "label as '2.0.0', not the version of its folder, 1.0.0" in errors["C4"].message


def _chart_request(files: Mapping[str, bytes]) -> RenderRequest:
    chart = {"apiVersion": "v2", "name": "web", "version": "1.0.0", "appVersion": "1.0.0"}
    files = {
        "Chart.yaml": dump(chart).encode(),
        "values.yaml": b"greeting: hello\nsize: small\nreplicas: 1\n",
        **{path: text.encode() for path, text in CHART_TEMPLATES.items()},
        **files,
    }
    template = TemplateSource(ModuleKind.CHART, "sha256:x", files, "pulled/web")
    return RenderRequest("web", "1.0.0", template, {"size": "medium"}, "web", "web-system")


def _packed(name: str, files: Mapping[str, bytes]) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as archive:
        for path, data in files.items():
            info = tarfile.TarInfo(f"{name}/{path}")
            info.size = len(data)
            archive.addfile(info, io.BytesIO(data))
    return buffer.getvalue()


def test_the_engine_is_never_handed_a_schema_that_refers_out_of_itself() -> None:
    """A chart that reached the renderer without validation (a pulled one): Helm's engine would
    fetch the reference when it checks the values; it is refused before, also in a subchart
    packed under charts/, and nothing is asked."""
    served = CountingServer(json.dumps({"enum": ["huge"]}).encode())
    schema = {"type": "object", "properties": {"size": {"$ref": f"{served.url}/size.json"}}}
    sub_chart = {"apiVersion": "v2", "name": "db", "version": "0.1.0"}
    subchart = _packed(
        "db",
        {"Chart.yaml": dump(sub_chart).encode(), "values.schema.json": json.dumps(schema).encode()},
    )
    try:
        with pytest.raises(RenderError) as top:
            HelmChartRenderer().render(
                _chart_request({"values.schema.json": json.dumps(schema).encode()})
            )
        with pytest.raises(RenderError) as packed:
            HelmChartRenderer().render(_chart_request({"charts/db-0.1.0.tgz": subchart}))
    finally:
        served.close()

    assert served.requests == []
    assert top.value.path == "pulled/web/values.schema.json"
    assert packed.value.path == "pulled/web/charts/db-0.1.0.tgz/db/values.schema.json"
    assert "$ref" in str(top.value)
    assert "it would be fetched" in str(packed.value)


def test_render_masks_a_chart_secrets_values_unless_asked(make_repo: RepoFactory) -> None:
    """S4 holds in ``render`` as in ``diff``: a Secret a chart makes is printed with its keys
    and ``***`` for each value; ``--show-secrets`` prints them (for ``kubectl apply -f -``)."""
    secret = (
        "apiVersion: v1\nkind: Secret\nmetadata:\n  name: {{ .Release.Name }}-auth\n"
        "data:\n  key: {{ randAlphaNum 16 | b64enc | quote }}\n"
        "stringData:\n  plain: {{ randAlphaNum 12 | quote }}\n"
    )
    templates = {**CHART_TEMPLATES, "templates/secret.yaml": secret}
    tree = {
        **chart_module_files("web", templates=templates),
        **channel_file("regular", {"web": "1.0.0"}),
        **runtime_file("plain", "regular", [{"name": "web"}]),
    }
    repo = make_repo(tree)
    for output in ("yaml", "json"):
        args = ["render", str(repo), "--runtime", "plain", "-o", output]
        masked = CliRunner().invoke(cli, args)
        shown = CliRunner().invoke(cli, [*args, "--show-secrets"])
        assert masked.exit_code == 0, masked.output
        assert shown.exit_code == 0, shown.output
        secrets = [_secret(masked.stdout, output), _secret(shown.stdout, output)]
        assert secrets[0]["data"] == {"key": "***"}
        assert secrets[0]["stringData"] == {"plain": "***"}
        assert len(base64.b64decode(secrets[1]["data"]["key"])) == 16
        assert len(secrets[1]["stringData"]["plain"]) == 12


def _secret(printed: str, output: str) -> Mapping[str, Any]:
    if output == "json":
        objects = json.loads(printed)["items"]
    else:
        objects = [o for o in yaml.safe_load_all(printed) if o]
    return next(o for o in objects if o["kind"] == "Secret")


CAPABILITIES_TEMPLATE = (
    "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: caps\ndata:\n"
    "  kube: {{ .Capabilities.KubeVersion.Version | quote }}\n"
    '  gadgets: {{ .Capabilities.APIVersions.Has "example.io/v1/Gadget" | quote }}\n'
)


def _capabilities_request(constraint: str, capabilities: Capabilities) -> RenderRequest:
    chart = {"apiVersion": "v2", "name": "web", "version": "1.0.0", "kubeVersion": constraint}
    request = _chart_request(
        {"Chart.yaml": dump(chart).encode(), "templates/caps.yaml": CAPABILITIES_TEMPLATE.encode()}
    )
    return replace(request, capabilities=capabilities)


def _shown(rendered: RenderedTemplate) -> dict[str, str]:
    return next(o["data"] for o in rendered.objects if o["metadata"]["name"] == "caps")


def test_a_chart_sees_the_recorded_cluster_and_its_kube_version_is_checked_against_it() -> None:
    recorded = Capabilities("v1.30.4", ("example.io/v1", "example.io/v1/Gadget"), datetime.now(UTC))

    seen = HelmChartRenderer().render(_capabilities_request(">=1.30.0-0", recorded))
    with pytest.raises(RenderError) as refused:
        HelmChartRenderer().render(_capabilities_request(">=1.31.0-0", recorded))

    assert _shown(seen) == {"kube": "v1.30.4", "gadgets": "true"}
    assert str(refused.value) == (
        "chart requires kubeVersion: >=1.31.0-0 which is incompatible with Kubernetes v1.30.4"
    )


def test_without_a_recorded_cluster_the_engine_default_renders_and_kube_version_waits() -> None:
    rendered = HelmChartRenderer().render(_capabilities_request(">=1.99.0-0", ENGINE_DEFAULT))

    assert _shown(rendered) == {"kube": DEFAULT_KUBE_VERSION, "gadgets": "false"}
