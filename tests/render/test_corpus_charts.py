"""The real charts of the corpus (cert-manager, ingress-nginx) read as modules, offline: their
hooks valid and listed by phase with default values (refused by name with spec.hooks: Refuse),
gone once the values switch them off, and
cert-manager's own values.schema.json checking a runtime's values at the line that set them.
On the real API server: tests/cluster/test_kube_charts.py."""

from __future__ import annotations

from typing import Any

from reconciler.cli.render import render_stream
from reconciler.config.templates import hooks_text
from reconciler.config.validate import Validation
from reconciler.core.hooks import phases_text
from reconciler.core.model import ConfigRepo
from reconciler.core.resolve import resolve_runtime
from reconciler.render import default_renderer
from reconciler.source.loader import load_repo
from tests.support.charts import CERT_MANAGER, INGRESS_NGINX, corpus_chart_module
from tests.support.repos import RepoFactory, channel_file, runtime_file


def _load(
    make_repo: RepoFactory,
    cert_manager: dict[str, Any],
    ingress_nginx: dict[str, Any] | None,
    entry: dict[str, Any] | None = None,
    cert_hooks: str | None = None,
) -> Validation:
    tree = {
        **corpus_chart_module(
            "cert-manager",
            "cert-manager",
            "0.0.0",
            namespace="cert-manager",
            operator="cert-manager",
            values=cert_manager,
            hooks=cert_hooks,
        ),
        **corpus_chart_module(
            "ingress-nginx",
            "ingress-nginx",
            "1.15.1",
            namespace="ingress-nginx",
            operator="ingress-nginx-controller",
            values=ingress_nginx,
        ),
        **channel_file("regular", {"cert-manager": "0.0.0", "ingress-nginx": "1.15.1"}),
        **runtime_file(
            "edge",
            "regular",
            [{"name": "cert-manager", **(entry or {})}, {"name": "ingress-nginx"}],
        ),
    }
    return load_repo(make_repo(tree), renderer=default_renderer())


def test_default_values_are_valid_and_their_hooks_run_by_phase(make_repo: RepoFactory) -> None:
    validation = _load(make_repo, {"crds": {"enabled": True}}, None)
    repo = validation.repo
    assert repo is not None, [d.format() for d in validation.diagnostics]
    cert, nginx = repo.rendered[("edge", "cert-manager")], repo.rendered[("edge", "ingress-nginx")]
    assert "Job/cert-manager-startupapicheck (post-install)" in hooks_text(cert)
    phases = dict(line.split(": ", 1) for line in phases_text(nginx.hooks))
    # one weight: by Helm's kind order, so the ServiceAccount and RBAC before the Job
    assert phases["pre-install"].endswith("Job/ingress-nginx-admission-create")
    assert phases["post-install"].endswith("Job/ingress-nginx-admission-patch")
    assert "Job/ingress-nginx-admission-create" in phases["pre-upgrade"]
    assert "pre-delete" not in phases


def test_hooks_stated_refused_are_refused_naming_each_chart_and_hook(
    make_repo: RepoFactory,
) -> None:
    validation = _load(make_repo, {"crds": {"enabled": True}}, INGRESS_NGINX, cert_hooks="Refuse")
    assert validation.repo is None
    (error,) = validation.diagnostics
    assert error.rule == "C9"
    assert error.path.endswith("cert-manager/0.0.0/chart/Chart.yaml")
    assert "Job/cert-manager-startupapicheck (post-install)" in error.message
    assert "refused by spec.hooks: Refuse" in error.message


def test_with_hooks_switched_off_both_render_as_plain_objects(make_repo: RepoFactory) -> None:
    validation = _load(make_repo, CERT_MANAGER, INGRESS_NGINX)
    repo = validation.repo
    assert repo is not None, [d.format() for d in validation.diagnostics]
    cert, nginx = repo.rendered[("edge", "cert-manager")], repo.rendered[("edge", "ingress-nginx")]
    assert cert.hooks == ()
    assert nginx.hooks == ()
    kinds = [o["kind"] for o in cert.objects]
    assert kinds.count("CustomResourceDefinition") == 6
    assert "ValidatingWebhookConfiguration" in kinds
    assert "IngressClass" in {o["kind"] for o in nginx.objects}
    assert "ValidatingWebhookConfiguration" not in {o["kind"] for o in nginx.objects}
    assert _names(repo) >= {"cert-manager", "ingress-nginx-controller"}


def test_cert_managers_schema_locates_a_runtimes_bad_value(make_repo: RepoFactory) -> None:
    entry = {"values": {"replicaCount": "two"}}
    validation = _load(make_repo, CERT_MANAGER, INGRESS_NGINX, entry)
    (error,) = validation.diagnostics
    assert error.rule == "C9"
    assert error.path.endswith("runtimes/edge.yaml")
    assert error.pointer == "/spec/modules/0/values/replicaCount"
    assert "'two' is not of type 'number'" in error.message


def _names(repo: ConfigRepo) -> set[str]:
    return {
        o["metadata"]["name"]
        for r in repo.rendered.values()
        for o in r.objects
        if o["kind"] == "Deployment"
    }


def test_hooks_stated_skipped_are_neither_run_nor_applied_and_render_lists_them(
    make_repo: RepoFactory,
) -> None:
    validation = _load(make_repo, {"crds": {"enabled": True}}, INGRESS_NGINX, cert_hooks="Skip")
    repo = validation.repo
    assert repo is not None, [d.format() for d in validation.diagnostics]
    cert = repo.rendered[("edge", "cert-manager")]
    assert "Job/cert-manager-startupapicheck" in hooks_text(cert)
    assert "Job" not in {o["kind"] for o in cert.objects}
    stream = render_stream(repo, resolve_runtime(repo, repo.runtimes["edge"]), ["cert-manager"])
    assert (
        "# hooks skipped (spec.hooks: Skip), never run: Job/cert-manager-startupapicheck "
        "(post-install)" in stream
    )
    assert "kind: Job" not in stream
