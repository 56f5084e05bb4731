"""deploy/ is usable as written: manifests parse, probes and environment match the daemon's
endpoints and options, RBAC is least privilege, the Dockerfile installs what it runs."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click
import yaml

from reconciler.cli import cli

DEPLOY = Path(__file__).parent.parent / "deploy"


def _objects(name: str) -> list[dict[str, Any]]:
    return [o for o in yaml.safe_load_all((DEPLOY / name).read_text()) if o]


def test_manifests_parse_and_name_their_namespace() -> None:
    kustomization = yaml.safe_load((DEPLOY / "kustomization.yaml").read_text())
    for name in kustomization["resources"]:
        for body in _objects(name):
            assert {"apiVersion", "kind", "metadata"} <= set(body), name
            if body["kind"] != "Namespace":
                assert body["metadata"].get("namespace") == "reconciler-system", name


def test_probes_and_environment_match_the_daemon() -> None:
    deployment = next(o for o in _objects("daemon.yaml") if o["kind"] == "Deployment")
    container = deployment["spec"]["template"]["spec"]["containers"][0]
    assert container["livenessProbe"]["httpGet"]["path"] == "/healthz"
    assert container["readinessProbe"]["httpGet"]["path"] == "/readyz"
    command = cli.get_command(click.Context(cli), "daemon")
    assert command is not None
    known = {p.envvar for p in command.params if isinstance(p, click.Option) and p.envvar}
    known.add("RECONCILER_STATE")
    assert {e["name"] for e in container["env"]} <= known
    assert container["args"] == ["daemon"]


def test_rbac_is_least_privilege_in_control_plane_mode() -> None:
    role = next(o for o in _objects("rbac.yaml") if o["kind"] == "Role")
    assert role["rules"] == [{"apiGroups": [""], "resources": ["secrets"], "verbs": ["get"]}]
    assert not any(o["kind"].startswith("Cluster") for o in _objects("rbac.yaml"))


def test_dockerfile_installs_the_package_and_git() -> None:
    dockerfile = (DEPLOY / "Dockerfile").read_text()
    assert "COPY schemas ./schemas" in dockerfile
    assert "git" in dockerfile
    assert 'ENTRYPOINT ["reconciler"]' in dockerfile
