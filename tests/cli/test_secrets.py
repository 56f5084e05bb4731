"""No secret echoed (S4): a fake token and a password planted in every place a commit can put them,
and every output read back.

The places: a runtime's name, labels, channel and module list, a module's name, a channel's
version, a Settings field, a manifest's environment variable, a kubeconfig in a ConfigMap, an
annotation, a URL in a manifest, a default configuration, and ``channelsFrom.git``. Each variant
of the repo is refused; the outputs read are ``validate`` (text and JSON), ``render``, ``diff``
(one runtime on snapshot clusters, and ``--base HEAD``), ``sync`` on snapshot clusters,
``status`` and ``operations list`` from the state store, and a real daemon process following the
commits through ``git daemon``: its log lines, ``/status`` and ``/metrics``; then the bytes of
both state stores and of every snapshot file. None may hold the token or the password, nor a
piece of either.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from click.testing import CliRunner

from reconciler.cli import cli
from tests.support.daemons import Fleet, GitServer, free_port, http_get, http_post, reachable, until
from tests.support.fleet_history import BASE_FILES, runtime_yaml

TOKEN = "ghp_" + "Zq9Xw2Lm4Np6Rt8Vb0Cd3Fg5Hj7Kk1Mm2Ps4Uy"
PASSWORD = "Hunter2!Pa55-Zq9w"
#: The values and pieces of them that must never come out.
NEEDLES = (TOKEN, TOKEN[4:20], TOKEN[-16:], PASSWORD, "Pa55-Zq9w")
HOOK_SECRET = "hook-secret-for-tests"

WIDGET = "fleet/modules/widget/1.0.0/manifest.yaml"
PLANTED_OBJECTS = f"""\
---
apiVersion: apps/v1
kind: Deployment
metadata: {{name: widget-helper}}
spec:
  replicas: 1
  template:
    spec:
      containers:
      - name: helper
        image: example.io/helper:1
        env:
        - {{name: DB_PASSWORD, value: "{PASSWORD}"}}
        - {{name: GITHUB_TOKEN, value: {TOKEN}}}
---
apiVersion: v1
kind: ConfigMap
metadata: {{name: widget-kubeconfig}}
data:
  config: |
    apiVersion: v1
    kind: Config
    clusters: [{{name: c, cluster: {{server: "https://k.example.com"}}}}]
    users: [{{name: admin, user: {{token: {TOKEN}, password: "{PASSWORD}"}}}}]
---
apiVersion: networking.k8s.io/v1
kind: Ingress
metadata:
  name: widget
  annotations:
    nginx.ingress.kubernetes.io/auth-basic: "admin:{PASSWORD}"
    example.com/deploy-note: "pushed with {TOKEN}"
spec: {{rules: []}}
---
apiVersion: v1
kind: ConfigMap
metadata: {{name: widget-sources}}
data:
  repo: "https://deploy:{PASSWORD}@git.example.com/widget.git"
  mirror: "https://x-access-token:{TOKEN}@github.com/example/widget.git"
"""


def _config_files() -> dict[str, str | None]:
    """Tokens and passwords in the config files: names, labels, channels, settings."""
    modules = "[{name: widget}, {name: gadget}]"
    return {
        "fleet/runtimes/a.yaml": runtime_yaml("a", "regular", modules).replace(
            "metadata: {name: a}", f"metadata: {{name: {TOKEN}}}"
        ),
        "fleet/runtimes/b.yaml": runtime_yaml("b", "regular", modules).replace(
            "metadata: {name: b}",
            f"metadata: {{name: b, labels: {{team: {TOKEN}, password: '{PASSWORD}'}}}}",
        ),
        "fleet/runtimes/c.yaml": runtime_yaml("c", f"'{PASSWORD}'", f"[{{name: {TOKEN}}}]"),
        "fleet/modules/gadget/module.yaml": BASE_FILES["fleet/modules/gadget/module.yaml"].replace(
            "name: gadget}", f"name: {TOKEN}}}"
        ),
        "channels/fast.yaml": BASE_FILES["channels/fast.yaml"].replace(
            "widget: 2.0.0", f"widget: {TOKEN}"
        ),
        "fleet/reconciler.yaml": BASE_FILES["fleet/reconciler.yaml"].replace(
            "spec: {", f"spec: {{systemNamespace: '{PASSWORD}', "
        ),
    }


def _manifest_files() -> dict[str, str | None]:
    """Tokens and passwords in a module's objects and default configuration."""
    return {
        WIDGET: BASE_FILES[WIDGET] + PLANTED_OBJECTS,
        "fleet/modules/widget/1.0.0/default.yaml": (
            "apiVersion: example.io/v1\nkind: Widget\nmetadata: {name: default}\n"
            f"spec: {{apiKey: {TOKEN}, clientSecret: '{PASSWORD}'}}\n"
        ),
    }


def _channels_url_files(port: int) -> dict[str, str | None]:
    """A token in the channels repository's URL (nothing listens on ``port``)."""
    url = f"https://x-access-token:{TOKEN}@127.0.0.1:{port}/channels.git"
    settings = (
        "apiVersion: reconciler.dev/v1alpha1\nkind: Settings\nmetadata: {name: fleet}\n"
        f"spec: {{channelsFrom: {{git: '{url}', ref: main, subPath: channels}}}}\n"
    )
    return {"fleet/reconciler.yaml": settings}


#: (file, JSON pointer) of each planted place that validation must refuse.
CONFIG_PLACES = {
    ("fleet/runtimes/a.yaml", "/metadata/name"),
    ("fleet/runtimes/b.yaml", "/metadata/labels/team"),
    ("fleet/runtimes/b.yaml", "/metadata/labels/password"),
    ("fleet/runtimes/c.yaml", "/spec/channel"),
    ("fleet/runtimes/c.yaml", "/spec/modules/0/name"),
    ("fleet/modules/gadget/module.yaml", "/metadata/name"),
    ("channels/fast.yaml", "/spec/modules/widget"),
    ("fleet/reconciler.yaml", "/spec/systemNamespace"),
}
MANIFEST_PLACES = {
    (WIDGET, "/spec/template/spec/containers/0/env/0/value"),
    (WIDGET, "/spec/template/spec/containers/0/env/1/value"),
    (WIDGET, "/data/config"),
    (WIDGET, "/metadata/annotations/nginx.ingress.kubernetes.io~1auth-basic"),
    (WIDGET, "/metadata/annotations/example.com~1deploy-note"),
    (WIDGET, "/data/repo"),
    (WIDGET, "/data/mirror"),
    ("fleet/modules/widget/1.0.0/default.yaml", "/spec/apiKey"),
    ("fleet/modules/widget/1.0.0/default.yaml", "/spec/clientSecret"),
}


@dataclass
class Outputs:
    """Everything read back, by where it came from."""

    texts: dict[str, str] = field(default_factory=dict)

    def add(self, where: str, text: str | bytes) -> None:
        if isinstance(text, bytes):
            text = text.decode("utf-8", "replace")
        self.texts[where] = self.texts.get(where, "") + text

    def hits(self) -> list[tuple[str, str]]:
        return [(w, n) for w, t in self.texts.items() for n in NEEDLES if n in t]


class DaemonProcess:
    """``reconciler daemon`` following the fleet's remote, on snapshot clusters."""

    def __init__(self, root: Path, url: str) -> None:
        self.port = free_port()
        self.base = f"http://127.0.0.1:{self.port}"
        self.clusters = root / "daemon-clusters"
        self.state = root / "daemon-state" / "state.db"
        secret = root / "hook-secret"
        secret.write_text(HOOK_SECRET)
        env = {
            **os.environ,
            "RECONCILER_REPO": url,
            "RECONCILER_PATH": "fleet",
            "RECONCILER_STATE": f"sqlite:///{self.state}",
        }
        self.process = subprocess.Popen(
            [
                *(sys.executable, "-m", "reconciler", "daemon", "--interval", "1s"),
                *("--listen", f"127.0.0.1:{self.port}", "--snapshot", f"{self.clusters}/"),
                "--snapshot-create",
                *("--webhook-secret-file", str(secret), "--log-format", "json"),
            ],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )

    def status(self) -> dict[str, object]:
        document: dict[str, object] = json.loads(http_get(self.base + "/status")[1])
        return document

    def poll_now(self) -> None:
        http_post(self.base + "/sync", b"", {"Authorization": f"Bearer {HOOK_SECRET}"})

    def wait_refused(self, commit: str) -> None:
        """Until the daemon has refused ``commit`` (or failed to read it, for a source it
        cannot reach)."""

        def done() -> bool:
            source = self.status()["source"]
            assert isinstance(source, dict)
            refused = source.get("refused") or {}
            return str(refused.get("commit", "")).startswith(commit) or bool(source.get("error"))

        self.poll_now()
        until(done)

    def stop(self) -> tuple[str, str]:
        self.process.send_signal(signal.SIGTERM)
        return self.process.communicate(timeout=60)


@pytest.fixture
def world(tmp_path: Path) -> Iterator[tuple[Fleet, GitServer, DaemonProcess]]:
    fleet = Fleet(tmp_path)
    server = GitServer(tmp_path)
    server.start()
    daemon = DaemonProcess(tmp_path, server.url)
    try:
        yield fleet, server, daemon
    finally:
        if daemon.process.poll() is None:
            daemon.process.kill()
            daemon.process.communicate(timeout=60)
        server.stop()


def _cli(outputs: Outputs, where: str, *args: str) -> int:
    result = CliRunner().invoke(cli, list(args))
    outputs.add(where, result.stdout + result.stderr)
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        outputs.add(where, repr(result.exception))
    return result.exit_code


def _every_command(outputs: Outputs, fleet: Path, clusters: Path, variant: str) -> list[int]:
    repo, snapshot = str(fleet), str(clusters)
    return [
        _cli(outputs, f"{variant}: validate", "validate", repo),
        _cli(outputs, f"{variant}: validate json", "validate", repo, "--format", "json"),
        _cli(
            outputs, f"{variant}: validate --channels", "validate", repo, "--channels", "channels"
        ),
        _cli(outputs, f"{variant}: render", "render", repo, "--runtime", "a"),
        _cli(outputs, f"{variant}: diff", "diff", repo, "--runtime", "a", "--snapshot", snapshot),
        _cli(outputs, f"{variant}: diff --base", "diff", repo, "--base", "HEAD"),
        _cli(outputs, f"{variant}: sync", "sync", repo, "--runtime", "a", "--snapshot", snapshot),
        _cli(outputs, f"{variant}: status", "status"),
        _cli(outputs, f"{variant}: operations", "operations", "list"),
    ]


def _refused_places(repo: str) -> set[tuple[str, str]]:
    result = CliRunner().invoke(cli, ["validate", repo, "--format", "json"])
    return {(e["path"], e["pointer"]) for e in json.loads(result.stdout)["errors"]}


def test_a_planted_token_and_password_never_come_out(
    world: tuple[Fleet, GitServer, DaemonProcess],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Slow by nature (about 4 s, more on a loaded machine): every variant is committed and read
    by a real daemon process and by each command of the command line, and every output, log,
    snapshot and store file is read back."""
    fleet, _, daemon = world
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.chdir(fleet.work)
    clusters = tmp_path / "cli-clusters"
    clusters.mkdir()
    outputs = Outputs()
    # a valid start: clusters, snapshots and both state stores hold real records
    synced = _cli(outputs, "base", "sync", "fleet", "--runtime", "a", "--snapshot", str(clusters))
    assert synced == 0, outputs.texts["base"]
    until(lambda: reachable(daemon.base) and http_get(daemon.base + "/readyz")[0] == 200)
    until(lambda: (daemon.clusters / "a.yaml").is_file())

    variants = [
        ("config", _config_files(), CONFIG_PLACES),
        ("manifests", _manifest_files(), MANIFEST_PLACES),
        ("channels url", _channels_url_files(free_port()), set()),
    ]
    for name, files, places in variants:
        _write_variant(fleet, {**BASE_FILES, **files})
        if places:  # (the channels URL makes the repo unreadable: nothing to list)
            assert places <= _refused_places("fleet"), name
        codes = _every_command(outputs, Path("fleet"), clusters, name)
        assert 0 not in codes[:2], f"{name}: validate accepted the planted secrets"
        commit = fleet.commit(name)
        daemon.wait_refused(commit)
        outputs.add(f"{name}: /status", http_get(daemon.base + "/status")[1])
        outputs.add(f"{name}: /metrics", http_get(daemon.base + "/metrics")[1])

    stdout, stderr = daemon.stop()
    outputs.add("daemon stdout", stdout)
    outputs.add("daemon log", stderr)
    for path in sorted([*clusters.rglob("*"), *daemon.clusters.rglob("*")]):
        if path.is_file():
            outputs.add(f"snapshot {path.name}", path.read_bytes())
    for store in (tmp_path / "state", daemon.state.parent):
        for path in sorted(store.glob("state.db*")):
            outputs.add(f"store {path}", path.read_bytes())

    assert outputs.hits() == []
    # the refusals did happen and were reported, naming places, not values
    log = outputs.texts["daemon log"]
    assert log.count("refused") >= len(CONFIG_PLACES) + len(MANIFEST_PLACES)
    assert "C6 a kubeconfig" in outputs.texts["manifests: validate"]
    assert "does not match the pattern of a DNS-1123 label" in outputs.texts["config: validate"]
    assert "C6 a GitHub token" in outputs.texts["channels url: validate --channels"]
    last = json.loads(outputs.texts["channels url: /status"])["source"]
    assert last["error"] or last["refused"]


def _write_variant(fleet: Fleet, files: dict[str, str | None]) -> None:
    for relative, text in files.items():
        path = fleet.work / relative
        if text is None:
            continue
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
