"""deploy/ is production-ready as written: both kustomizations (deploy/ and deploy/ha/) build
with kustomize (``kubectl kustomize``), checkov finds nothing in them that is not skipped with a
reason, and plain checks prove what matters without the scanner: every pod passes Pod Security
"restricted", whatever the daemon writes is on a writable volume, the environment names the
daemon's options, RBAC and the network policy are narrow, the secrets come from files the user
creates (a build without them fails), and the HA overlay spreads three replicas under a
disruption budget with the PostgreSQL URL from a Secret.

kubectl and checkov come from ``bash .ci/install-tools`` (tests/support/tools.py); the manifests are
built from a copy of deploy/ in a tmp folder, with test secrets, never the user's files.
"""

from __future__ import annotations

import base64
import copy
import json
import shutil
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path, PurePosixPath
from typing import Any

import click
import pytest
import yaml

from reconciler.cli import cli
from tests.support.tools import REPO, require_tool

DEPLOY = REPO / "deploy"
SECRET_FILES = {
    "base/webhook-secret": "test-webhook-secret\n",
    "ha/postgres-url": "postgresql://reconciler:test-password@postgres.test:5432/reconciler",
}
BUILDS = {"single": ".", "ha": "ha", "signed": "signed-commits"}
IMAGE = "registry.example.com/platform/reconciler"
# Pod Security "restricted" allows only these volume types.
RESTRICTED_VOLUMES = {
    "configMap", "csi", "downwardAPI", "emptyDir", "ephemeral", "persistentVolumeClaim",
    "projected", "secret",
}  # fmt: skip

Doc = dict[str, Any]


# -- building -----------------------------------------------------------------------------------


def _copy_deploy(target: Path, *, with_secrets: tuple[str, ...] = tuple(SECRET_FILES)) -> Path:
    """deploy/ copied without the user's secret files, then the test secrets named written."""
    shutil.copytree(DEPLOY, target, ignore=shutil.ignore_patterns("webhook-secret", "postgres-url"))
    for relative in with_secrets:
        (target / relative).write_text(SECRET_FILES[relative], encoding="utf-8")
    return target


def _kustomize(folder: Path) -> subprocess.CompletedProcess[str]:
    kubectl = require_tool("kubectl")
    return subprocess.run(
        [str(kubectl), "kustomize", str(folder)], capture_output=True, text=True, check=False
    )


def _build(folder: Path) -> list[Doc]:
    result = _kustomize(folder)
    assert result.returncode == 0, result.stderr
    return [doc for doc in yaml.safe_load_all(result.stdout) if doc]


@pytest.fixture(scope="module")
def built_yaml(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """Each build's YAML text: "single" (deploy/) and "ha" (deploy/ha/)."""
    root = _copy_deploy(tmp_path_factory.mktemp("deploy") / "deploy")
    texts = {}
    for name, folder in BUILDS.items():
        result = _kustomize(root / folder)
        assert result.returncode == 0, result.stderr
        texts[name] = result.stdout
    return texts


@pytest.fixture(scope="module")
def builds(built_yaml: dict[str, str]) -> dict[str, list[Doc]]:
    return {name: [d for d in yaml.safe_load_all(text) if d] for name, text in built_yaml.items()}


def _of_kind(docs: list[Doc], kind: str) -> list[Doc]:
    return [doc for doc in docs if doc["kind"] == kind]


def _one(docs: list[Doc], kind: str) -> Doc:
    found = _of_kind(docs, kind)
    assert len(found) == 1, f"{len(found)} {kind}"
    return found[0]


def _container(deployment: Doc) -> Doc:
    containers: list[Doc] = deployment["spec"]["template"]["spec"]["containers"]
    assert len(containers) == 1
    return containers[0]


def _env(container: Doc) -> dict[str, Doc]:
    return {entry["name"]: entry for entry in container.get("env", [])}


# -- Pod Security "restricted", as a plain check ---------------------------------------------


def restricted_violations(pod: Doc) -> list[str]:
    """What in a pod spec breaks Pod Security "restricted" or our production bar (resources,
    probes, read-only root); empty when nothing does."""
    problems: list[str] = []
    context = pod.get("securityContext") or {}
    for flag in ("hostNetwork", "hostPID", "hostIPC"):
        if pod.get(flag):
            problems.append(f"{flag} is set")
    for volume in pod.get("volumes", []):
        kinds = set(volume) - {"name"}
        if not kinds <= RESTRICTED_VOLUMES:
            problems.append(f"volume {volume['name']}: {sorted(kinds)} not allowed")
    containers = pod.get("initContainers", []) + pod.get("containers", [])
    for container in containers:
        problems += [f"{container['name']}: {p}" for p in _container_violations(container, context)]
    return problems


def _container_violations(container: Doc, pod_context: Doc) -> list[str]:
    context = container.get("securityContext") or {}

    def setting(name: str) -> Any:
        return context.get(name, pod_context.get(name))

    problems = []
    if setting("runAsNonRoot") is not True:
        problems.append("runAsNonRoot is not true")
    user = setting("runAsUser")
    if not isinstance(user, int) or user == 0:
        problems.append("runAsUser is not a numeric non-root user")
    if (setting("seccompProfile") or {}).get("type") not in ("RuntimeDefault", "Localhost"):
        problems.append("seccompProfile is not RuntimeDefault")
    if context.get("allowPrivilegeEscalation") is not False:
        problems.append("allowPrivilegeEscalation is not false")
    if context.get("privileged"):
        problems.append("privileged")
    capabilities = context.get("capabilities") or {}
    if "ALL" not in capabilities.get("drop", []):
        problems.append("capabilities are not all dropped")
    if set(capabilities.get("add", [])) - {"NET_BIND_SERVICE"}:
        problems.append(f"capabilities added: {capabilities['add']}")
    if context.get("readOnlyRootFilesystem") is not True:
        problems.append("the root filesystem is writable")
    resources = container.get("resources") or {}
    for bound in ("requests", "limits"):
        if not {"cpu", "memory"} <= set(resources.get(bound) or {}):
            problems.append(f"no cpu and memory {bound}")
    for probe in ("livenessProbe", "readinessProbe"):
        if probe not in container:
            problems.append(f"no {probe}")
    return problems


@pytest.mark.parametrize("build", BUILDS)
def test_every_pod_passes_pod_security_restricted(builds: dict[str, list[Doc]], build: str) -> None:
    workloads = [d for d in builds[build] if d["kind"] in ("Deployment", "StatefulSet", "Job")]
    assert workloads
    for workload in workloads:
        assert restricted_violations(workload["spec"]["template"]["spec"]) == []


def _parent(pod: Doc, path: str) -> tuple[Any, Any]:
    """The node holding the last key of a dotted ``path`` (numbers index lists), and that key."""
    *parents, last = path.split(".")
    node: Any = pod
    for key in parents:
        node = node[int(key)] if key.isdigit() else node[key]
    return node, int(last) if last.isdigit() else last


def _drop(*paths: str) -> Callable[[Doc], None]:
    def mutate(pod: Doc) -> None:
        for path in paths:
            node, key = _parent(pod, path)
            del node[key]

    return mutate


def _set(path: str, value: Any) -> Callable[[Doc], None]:
    def mutate(pod: Doc) -> None:
        node, key = _parent(pod, path)
        node[key] = value

    return mutate


C = "containers.0"
MUTATIONS = {
    # the pod's setting is the default of its containers: both levels go
    "runAsNonRoot": _drop("securityContext.runAsNonRoot", f"{C}.securityContext.runAsNonRoot"),
    "root user": _set(f"{C}.securityContext.runAsUser", 0),
    "no user": _drop("securityContext.runAsUser", f"{C}.securityContext.runAsUser"),
    "seccomp": _drop("securityContext.seccompProfile", f"{C}.securityContext.seccompProfile"),
    "unconfined": _set(f"{C}.securityContext.seccompProfile", {"type": "Unconfined"}),
    "escalation": _drop(f"{C}.securityContext.allowPrivilegeEscalation"),
    "capabilities": _set(f"{C}.securityContext.capabilities", {"drop": ["NET_RAW"]}),
    "added capability": _set(f"{C}.securityContext.capabilities.add", ["SYS_ADMIN"]),
    "read-only root": _set(f"{C}.securityContext.readOnlyRootFilesystem", False),
    "privileged": _set(f"{C}.securityContext.privileged", True),
    "limits": _drop(f"{C}.resources.limits"),
    "requests": _drop(f"{C}.resources.requests"),
    "liveness": _drop(f"{C}.livenessProbe"),
    "readiness": _drop(f"{C}.readinessProbe"),
    "hostPath": _set("volumes.0", {"name": "host", "hostPath": {"path": "/"}}),
    "hostNetwork": _set("hostNetwork", True),
}


@pytest.mark.parametrize("mutation", MUTATIONS)
def test_the_restricted_check_finds_each_violation(
    builds: dict[str, list[Doc]], mutation: str
) -> None:
    """The plain check is not vacuous: each field taken away from our pod is reported."""
    pod = copy.deepcopy(_one(builds["single"], "Deployment")["spec"]["template"]["spec"])
    MUTATIONS[mutation](pod)

    assert restricted_violations(pod) != []


# -- what the daemon needs --------------------------------------------------------------------


def _daemon_options() -> tuple[set[str], set[str]]:
    """The daemon command's environment variables and option names, with those of
    ``reconciler`` itself (the renderer's limits)."""
    command = cli.get_command(click.Context(cli), "daemon")
    assert command is not None
    options = [p for p in (*cli.params, *command.params) if isinstance(p, click.Option)]
    envvars = {p.envvar for p in options if isinstance(p.envvar, str)}
    return envvars, {name for p in options for name in p.opts}


@pytest.mark.parametrize("build", BUILDS)
def test_environment_and_arguments_are_the_daemons_options(
    builds: dict[str, list[Doc]], build: str
) -> None:
    container = _container(_one(builds[build], "Deployment"))
    envvars, option_names = _daemon_options()
    ours = {name for name in _env(container) if name.startswith("RECONCILER_")}

    assert ours <= envvars, ours - envvars
    assert container["args"][0] == "daemon"
    assert {arg for arg in container["args"][1:] if arg.startswith("-")} <= option_names


def _writable_mounts(deployment: Doc) -> list[PurePosixPath]:
    container = _container(deployment)
    return [
        PurePosixPath(m["mountPath"]) for m in container["volumeMounts"] if not m.get("readOnly")
    ]


def _written_paths(container: Doc) -> dict[str, PurePosixPath]:
    """Every place the daemon writes, from its environment: the git cache and the channels'
    cache beside it (``<cache>-channels``), the SQLite file's folder, $HOME and $TMPDIR."""
    env: dict[str, Any] = {name: entry.get("value") for name, entry in _env(container).items()}
    cache = PurePosixPath(env["RECONCILER_CACHE_DIR"])
    paths = {"git cache": cache, "channels cache": cache.with_name(cache.name + "-channels")}
    state = env.get("RECONCILER_STATE")
    if state is None:
        assert "valueFrom" in _env(container)["RECONCILER_STATE"]  # PostgreSQL, from a Secret
    else:
        assert state.startswith("sqlite:///")
        paths["state store"] = PurePosixPath(state.removeprefix("sqlite:///")).parent
    paths["HOME"] = PurePosixPath(env["HOME"])
    paths["TMPDIR"] = PurePosixPath(env.get("TMPDIR") or "/tmp")
    return paths


@pytest.mark.parametrize("build", BUILDS)
def test_every_path_the_daemon_writes_is_on_a_writable_volume(
    builds: dict[str, list[Doc]], build: str
) -> None:
    deployment = _one(builds[build], "Deployment")
    mounts = _writable_mounts(deployment)
    for what, path in _written_paths(_container(deployment)).items():
        assert any(path == m or m in path.parents for m in mounts), f"{what} {path}: read-only"


@pytest.mark.parametrize("build", BUILDS)
def test_probes_are_healthz_and_readyz_on_the_http_port(
    builds: dict[str, list[Doc]], build: str
) -> None:
    container = _container(_one(builds[build], "Deployment"))
    ports = {port["name"] for port in container["ports"]}

    assert container["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": "http"}
    assert container["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": "http"}
    assert ports == {"http"}


# -- secrets ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("build", "missing"), [("single", "webhook-secret"), ("ha", "postgres-url")]
)
def test_a_build_without_its_secret_file_fails_naming_it(
    tmp_path: Path, build: str, missing: str
) -> None:
    present = tuple(f for f in SECRET_FILES if not f.endswith(missing))
    root = _copy_deploy(tmp_path / "deploy", with_secrets=present)

    result = _kustomize(root / BUILDS[build])

    assert result.returncode != 0
    assert missing in result.stderr


def test_the_secret_files_are_ignored_by_git() -> None:
    if not (REPO / ".git").exists():
        pytest.skip("not a git checkout")
    paths = [f"deploy/{relative}" for relative in SECRET_FILES]
    result = subprocess.run(
        ["git", "check-ignore", *paths], cwd=REPO, capture_output=True, text=True, check=False
    )
    assert result.stdout.split() == paths


@pytest.mark.parametrize("build", BUILDS)
def test_the_secrets_are_the_files_content_and_rotate_the_pods(
    builds: dict[str, list[Doc]], build: str
) -> None:
    secrets = {s["metadata"]["name"]: s for s in _of_kind(builds[build], "Secret")}
    deployment = _one(builds[build], "Deployment")
    pod = deployment["spec"]["template"]["spec"]
    named = [v["secret"]["secretName"] for v in pod["volumes"] if "secret" in v]
    # the trusted keys (signed-commits/) are a Secret the user creates with kubectl, by name
    webhook = next(name for name in named if name != "reconciler-trusted-keys")

    # the name carries a hash of the content: a new secret rolls the pods
    assert webhook.startswith("reconciler-webhook-")
    assert webhook in secrets
    decoded = base64.b64decode(secrets[webhook]["data"]["secret"]).decode()
    assert decoded == SECRET_FILES["base/webhook-secret"]
    assert not any("stringData" in s for s in secrets.values())  # no placeholder shipped


# -- least privilege ----------------------------------------------------------------------------


@pytest.mark.parametrize("build", BUILDS)
def test_rbac_reads_secrets_by_name_in_its_namespace_only(
    builds: dict[str, list[Doc]], build: str
) -> None:
    docs = builds[build]
    role = _one(docs, "Role")
    account = _one(docs, "ServiceAccount")
    deployment = _one(docs, "Deployment")

    assert role["rules"] == [
        {"apiGroups": [""], "resources": ["secrets"], "verbs": ["get"]},
        # the notifications' Events (README, Notifications), counted up when repeated
        {"apiGroups": [""], "resources": ["events"], "verbs": ["create", "get", "patch"]},
    ]
    assert not [d for d in docs if d["kind"] in ("ClusterRole", "ClusterRoleBinding")]
    assert account["automountServiceAccountToken"] is False
    # the one pod that needs the token (to read the kubeconfig Secrets) asks for it
    assert deployment["spec"]["template"]["spec"]["automountServiceAccountToken"] is True
    assert deployment["spec"]["template"]["spec"]["serviceAccountName"] == "reconciler"


@pytest.mark.parametrize("build", BUILDS)
def test_everything_is_in_the_reconcilers_namespace(
    builds: dict[str, list[Doc]], build: str
) -> None:
    namespaced = [d for d in builds[build] if d["kind"] != "Namespace"]

    assert {d["metadata"].get("namespace") for d in namespaced} == {"reconciler-system"}


def test_the_namespace_enforces_pod_security_restricted(builds: dict[str, list[Doc]]) -> None:
    labels = _one(builds["single"], "Namespace")["metadata"]["labels"]

    assert labels["pod-security.kubernetes.io/enforce"] == "restricted"


@pytest.mark.parametrize("build", BUILDS)
def test_the_network_policy_admits_the_http_port_and_dns_git_and_api_servers(
    builds: dict[str, list[Doc]], build: str
) -> None:
    policy = _one(builds[build], "NetworkPolicy")["spec"]
    pods = _one(builds[build], "Deployment")["spec"]["template"]["metadata"]["labels"]
    egress_ports = {(p["port"], p["protocol"]) for rule in policy["egress"] for p in rule["ports"]}

    assert policy["podSelector"]["matchLabels"].items() <= pods.items()
    assert sorted(policy["policyTypes"]) == ["Egress", "Ingress"]
    assert [rule["ports"] for rule in policy["ingress"]] == [[{"port": "http", "protocol": "TCP"}]]
    assert {(53, "UDP"), (53, "TCP"), (443, "TCP"), (6443, "TCP"), (22, "TCP")} <= egress_ports
    assert ((5432, "TCP") in egress_ports) == (build == "ha")


# -- the two shapes -----------------------------------------------------------------------------


def test_single_replica_keeps_sqlite_on_a_volume_and_never_runs_two_pods(
    builds: dict[str, list[Doc]],
) -> None:
    deployment = _one(builds["single"], "Deployment")
    claim = _one(builds["single"], "PersistentVolumeClaim")
    volumes = deployment["spec"]["template"]["spec"]["volumes"]

    assert deployment["spec"]["replicas"] == 1
    assert deployment["spec"]["strategy"] == {"type": "Recreate"}
    assert {"name": "state", "persistentVolumeClaim": {"claimName": claim["metadata"]["name"]}} in (
        volumes
    )


def test_ha_runs_three_spread_replicas_under_a_disruption_budget(
    builds: dict[str, list[Doc]],
) -> None:
    docs = builds["ha"]
    deployment = _one(docs, "Deployment")
    budget = _one(docs, "PodDisruptionBudget")["spec"]
    pod = deployment["spec"]["template"]
    spread = {c["topologyKey"]: c for c in pod["spec"]["topologySpreadConstraints"]}

    assert deployment["spec"]["replicas"] == 3
    assert deployment["spec"]["strategy"]["rollingUpdate"]["maxUnavailable"] == 1
    assert budget.get("maxUnavailable") == 1 or budget.get("minAvailable") == 2
    assert budget["selector"]["matchLabels"].items() <= pod["metadata"]["labels"].items()
    assert spread["kubernetes.io/hostname"]["whenUnsatisfiable"] == "DoNotSchedule"
    assert "topology.kubernetes.io/zone" in spread
    assert _container(deployment)["readinessProbe"]["httpGet"]["path"] == "/readyz"


def test_ha_reads_the_postgresql_url_from_a_secret_and_has_no_state_volume(
    builds: dict[str, list[Doc]],
) -> None:
    docs = builds["ha"]
    deployment = _one(docs, "Deployment")
    state = _env(_container(deployment))["RECONCILER_STATE"]
    secrets = {s["metadata"]["name"]: s for s in _of_kind(docs, "Secret")}
    reference = state["valueFrom"]["secretKeyRef"]

    assert "value" not in state
    url = base64.b64decode(secrets[reference["name"]]["data"][reference["key"]]).decode()
    assert url == SECRET_FILES["ha/postgres-url"]
    assert _of_kind(docs, "PersistentVolumeClaim") == []
    volumes = deployment["spec"]["template"]["spec"]["volumes"]
    assert not [v for v in volumes if "persistentVolumeClaim" in v]


def test_the_image_pins_by_digest_as_the_readme_says(tmp_path: Path) -> None:
    root = _copy_deploy(tmp_path / "deploy")
    digest = "sha256:" + "ab" * 32
    overlay = tmp_path / "mine"
    overlay.mkdir()
    (overlay / "kustomization.yaml").write_text(
        yaml.safe_dump(
            {
                "resources": [f"../{root.name}/ha"],
                "images": [{"name": IMAGE, "digest": digest}],
            }
        )
    )

    deployment = _one(_build(overlay), "Deployment")

    assert _container(deployment)["image"] == f"{IMAGE}@{digest}"


# -- the scanner --------------------------------------------------------------------------------


def _checkov_results(report: Any) -> Iterator[Doc]:
    """The result sections of checkov's JSON report (one per framework)."""
    for section in report if isinstance(report, list) else [report]:
        yield section["results"]


def test_checkov_finds_nothing_that_is_not_skipped_with_a_reason(
    built_yaml: dict[str, str], tmp_path: Path
) -> None:
    checkov = require_tool("checkov")
    for name, text in built_yaml.items():
        (tmp_path / f"{name}.yaml").write_text(text, encoding="utf-8")

    result = subprocess.run(
        [str(checkov), "--directory", str(tmp_path), "--framework", "kubernetes",
         "--skip-download", "--output", "json", "--compact"],
        capture_output=True, text=True, check=False,
    )  # fmt: skip

    assert result.stdout.strip(), result.stderr
    sections = list(_checkov_results(json.loads(result.stdout)))
    failed = [r for s in sections for r in s["failed_checks"]]
    skipped = [r for s in sections for r in s["skipped_checks"]]
    passed = sum(len(s["passed_checks"]) for s in sections)
    assert [(r["check_id"], r["resource"], r["file_path"]) for r in failed] == []
    assert passed > 50
    for finding in skipped:
        assert len(finding["check_result"].get("suppress_comment", "")) > 40, finding["check_id"]


def test_the_in_cluster_grant_is_what_rbac_prints_and_cluster_admin_is_opt_in() -> None:
    from click.testing import CliRunner

    shipped = [d for d in yaml.safe_load_all((DEPLOY / "rbac-in-cluster.yaml").read_text()) if d]
    args = ["rbac", str(REPO / "sample-repo"), "--runtime", "control-plane",
            "--name", "reconciler-in-cluster", "--no-namespace"]  # fmt: skip
    printed = CliRunner().invoke(cli, args)
    admin = [d for d in yaml.safe_load_all((DEPLOY / "rbac-in-cluster-admin.yaml").read_text())]

    assert printed.exit_code == 0, printed.output
    assert shipped == [d for d in yaml.safe_load_all(printed.stdout) if d]  # made by the command
    role = _one(shipped, "ClusterRole")
    assert all("*" not in rule["verbs"] + rule["resources"] for rule in role["rules"])
    assert {s["name"] for d in shipped if "subjects" in d for s in d["subjects"]} == {"reconciler"}
    assert [d["roleRef"]["name"] for d in admin] == ["cluster-admin"]
    assert admin[0]["metadata"]["name"] != _one(shipped, "ClusterRoleBinding")["metadata"]["name"]


# -- the image ------------------------------------------------------------------------------------


def test_signed_commits_mount_the_trusted_keys_secret_read_only(
    builds: dict[str, list[Doc]],
) -> None:
    pod = _one(builds["signed"], "Deployment")["spec"]["template"]["spec"]
    container = _container(_one(builds["signed"], "Deployment"))
    folder = _env(container)["RECONCILER_TRUSTED_KEYS_DIR"]["value"]
    [mount] = [m for m in container["volumeMounts"] if m["mountPath"] == folder]
    [volume] = [v for v in pod["volumes"] if v["name"] == mount["name"]]

    assert mount["readOnly"] is True
    assert volume["secret"]["secretName"] == "reconciler-trusted-keys"
    assert restricted_violations(pod) == []


def test_dockerfile_installs_the_package_and_git_and_runs_as_the_manifests_user() -> None:
    dockerfile = (DEPLOY / "Dockerfile").read_text()
    # gpg and ssh-keygen check signed commits (README "Signed commits")
    assert "gnupg" in dockerfile
    assert "openssh-client" in dockerfile

    assert "COPY schemas ./schemas" in dockerfile
    assert "git" in dockerfile
    assert 'ENTRYPOINT ["reconciler"]' in dockerfile
    assert "USER 10001:10001" in dockerfile
    assert "PYTHONDONTWRITEBYTECODE=1" in dockerfile  # the root filesystem is read-only
