"""Module versions of kind ``source`` pulled by digest from a real OCI registry (docker-registry on
127.0.0.1) and a real HTTP chart repository, cached on disk by digest (reconciler.render.sources).
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import json
import logging
import threading
from collections.abc import Mapping
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from reconciler.config.validate import Validation
from reconciler.core.model import ConfigRepo, ModuleKind
from reconciler.core.render import Renderer
from reconciler.core.resolve import resolve_runtime
from reconciler.errors import TransientError
from reconciler.render.engines import KindRenderer
from reconciler.render.helm import chart_archive
from reconciler.render.sandbox import RenderLimits, Sandbox
from reconciler.render.sources import SourceRenderer, default_cache_dir, write_cached
from reconciler.source.loader import load_repo
from tests.support.charts import CHART_TEMPLATES
from tests.support.registries import ChartRepository, OciRegistry, package_chart, registry
from tests.support.render_modules import source_module_files
from tests.support.repos import RepoFactory, channel_file, runtime_file

__all__ = ["registry"]  # the fixture

OTHER = "sha256:" + "0" * 64


@pytest.fixture(autouse=True)
def _no_user_settings(monkeypatch: pytest.MonkeyPatch) -> None:
    """The tests name their cache folders and credentials; the caller's environment does not."""
    monkeypatch.delenv("RECONCILER_SOURCE_CACHE", raising=False)
    monkeypatch.delenv("RECONCILER_REGISTRY_CREDENTIALS", raising=False)


def _load(
    make_repo: RepoFactory, spec: Mapping[str, Any], engine: SourceRenderer, **more: str
) -> Validation:
    tree = {
        **source_module_files(spec, values={"greeting": "from the version"}),
        **channel_file("regular", {"web": "1.0.0"}),
        **runtime_file("one", "regular", [{"name": "web", "values": {"size": "large"}}]),
        **more,
    }
    return load_repo(make_repo(tree), renderer=KindRenderer({ModuleKind.SOURCE: engine}))


def _objects(repo: ConfigRepo, runtime: str) -> dict[str, Mapping[str, Any]]:
    resolution = resolve_runtime(repo, repo.runtimes[runtime])
    return {o.body["kind"]: o.body for o in Renderer(repo).render(resolution)}


def _oci_spec(registry: OciRegistry, digest: str, version: str = "1.0.0") -> dict[str, Any]:
    return {"url": registry.url("web"), "version": version, "digest": digest, "plainHttp": True}


def test_a_chart_in_a_real_registry_is_pulled_by_digest_and_rendered_with_values(
    make_repo: RepoFactory, registry: OciRegistry, tmp_path: Path
) -> None:
    digest = registry.push(package_chart(tmp_path, "web", "1.0.0", CHART_TEMPLATES))
    engine = SourceRenderer(cache_dir=tmp_path / "cache")

    validation = _load(make_repo, _oci_spec(registry, digest), engine)

    repo = validation.repo
    assert repo is not None, [d.format() for d in validation.diagnostics]
    assert repo.modules["web"].versions["1.0.0"].kind is ModuleKind.SOURCE
    objects = _objects(repo, "one")
    assert objects["ConfigMap"]["data"]["greeting"] == "from the version"  # values.yaml
    assert objects["ConfigMap"]["data"]["size"] == "large"  # the runtime's values
    assert objects["Deployment"]["metadata"]["namespace"] == "web-system"
    assert engine.pulls == 1
    assert (tmp_path / "cache" / "sha256" / f"{digest.split(':')[1]}.tgz").is_file()


def test_a_digest_the_registry_does_not_hold_for_the_version_is_refused_naming_both(
    make_repo: RepoFactory, registry: OciRegistry, tmp_path: Path
) -> None:
    digest = registry.push(package_chart(tmp_path, "web", "1.0.0", CHART_TEMPLATES))
    engine = SourceRenderer(cache_dir=tmp_path / "cache")

    validation = _load(make_repo, _oci_spec(registry, OTHER), engine)

    (error,) = validation.diagnostics
    assert error.rule == "C9"
    assert error.path.endswith("modules/web/1.0.0/source.yaml")
    assert f"the registry holds digest {digest}, source.yaml pins {OTHER}; refused" in error.message
    assert registry.url("web") in error.message
    assert not (tmp_path / "cache" / "sha256").exists()  # nothing kept


def test_a_cached_digest_renders_with_the_registry_down_and_an_uncached_one_waits(
    make_repo: RepoFactory, registry: OciRegistry, tmp_path: Path
) -> None:
    first = registry.push(package_chart(tmp_path, "web", "1.0.0", CHART_TEMPLATES))
    second = registry.push(package_chart(tmp_path, "web", "1.1.0", CHART_TEMPLATES))
    assert _load(make_repo, _oci_spec(registry, first), SourceRenderer(tmp_path / "c")).repo
    registry.stop()

    engine = SourceRenderer(cache_dir=tmp_path / "c")  # a new process: only the disk remembers
    assert _load(make_repo, _oci_spec(registry, first), engine).repo is not None
    assert engine.pulls == 0

    bump = {**_oci_spec(registry, second, "1.1.0")}
    with pytest.raises(TransientError, match="cannot be fetched now") as waited:
        load_repo(
            make_repo(
                {
                    **source_module_files(bump, "1.1.0"),
                    **channel_file("regular", {"web": "1.1.0"}),
                    **runtime_file("one", "regular", [{"name": "web"}]),
                }
            ),
            renderer=KindRenderer({ModuleKind.SOURCE: engine}),
        )
    assert "a daemon keeps the last good render in force" in str(waited.value)
    assert f"modules/web/1.1.0/source.yaml: oci://{registry.host}/charts/web 1.1.0 cannot" in str(
        waited.value
    )
    assert waited.value.retry_after > 0


def test_a_torn_cache_file_is_pulled_again(
    make_repo: RepoFactory, registry: OciRegistry, tmp_path: Path
) -> None:
    digest = registry.push(package_chart(tmp_path, "web", "1.0.0", CHART_TEMPLATES))
    assert _load(make_repo, _oci_spec(registry, digest), SourceRenderer(tmp_path / "c")).repo
    cached = tmp_path / "c" / "sha256" / f"{digest.split(':')[1]}.tgz"
    cached.write_bytes(cached.read_bytes()[:100])

    engine = SourceRenderer(cache_dir=tmp_path / "c")
    assert _load(make_repo, _oci_spec(registry, digest), engine).repo is not None
    assert engine.pulls == 1


def test_a_bundle_of_plain_manifests_in_the_registry(
    make_repo: RepoFactory, registry: OciRegistry, tmp_path: Path
) -> None:
    operator = CHART_TEMPLATES["templates/operator.yaml"].replace("{{ .Release.Name }}", "web")
    operator = operator.replace("{{ .Chart.AppVersion | quote }}", "'1.0.0'")
    operator = operator.replace("{{ .Values.replicas }}", "2")
    bundle = package_chart(tmp_path, "web", "1.0.0", {"manifests/operator.yaml": operator})
    digest = registry.push(bundle)
    spec = {**_oci_spec(registry, digest), "type": "manifests"}

    validation = _load(make_repo, spec, SourceRenderer(cache_dir=tmp_path / "cache"))

    assert validation.repo is not None, [d.format() for d in validation.diagnostics]
    assert _objects(validation.repo, "one")["Deployment"]["spec"]["replicas"] == 2


def _credentials_for(
    repository: ChartRepository, password: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> str:
    """A credentials file giving ``reader:password`` for ``repository``'s host, named by the
    environment; the ``auth`` it holds."""
    host = repository.url.split("://", 1)[1]
    auth = base64.b64encode(f"reader:{password}".encode()).decode()
    credentials = tmp_path / "config.json"
    credentials.write_text(json.dumps({"auths": {host: {"auth": auth}}}))
    monkeypatch.setenv("RECONCILER_REGISTRY_CREDENTIALS", str(credentials))
    return auth


def test_an_http_chart_repository_with_basic_auth_and_credentials_from_a_file(
    make_repo: RepoFactory,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG)
    password = "s3cr3t-Token-4711"
    repository = ChartRepository(tmp_path / "served", login=("reader", password))
    try:
        digest = repository.publish(package_chart(tmp_path, "web", "1.0.0", CHART_TEMPLATES))
        _credentials_for(repository, password, tmp_path, monkeypatch)
        spec = {"url": repository.url, "chart": "web", "version": "1.0.0", "digest": digest}

        good = _load(make_repo, spec, SourceRenderer(cache_dir=tmp_path / "cache"))
        assert good.repo is not None, [d.format() for d in good.diagnostics]
        assert _objects(good.repo, "one")["ConfigMap"]["data"]["size"] == "large"

        wrong = _load(make_repo, {**spec, "digest": OTHER}, SourceRenderer(tmp_path / "other"))
        (error,) = wrong.diagnostics
        assert f"archive has digest {digest}, source.yaml pins {OTHER}; refused" in error.message

        monkeypatch.delenv("RECONCILER_REGISTRY_CREDENTIALS")
        refused = _load(make_repo, spec, SourceRenderer(cache_dir=tmp_path / "third"))
        (error,) = refused.diagnostics
        assert "cannot be pulled" in error.message
        assert "$RECONCILER_REGISTRY_CREDENTIALS" in error.message
    finally:
        repository.close()
    shown = [d.format() for d in (*good.diagnostics, *wrong.diagnostics, *refused.diagnostics)]
    assert password not in "\n".join([*shown, caplog.text])


def test_http_repository_credentials_go_only_to_its_own_scheme_host_and_port(
    make_repo: RepoFactory, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The repository's index names the archive on another server (another port of the same
    host): the archive is fetched without the repository's credentials (Helm's default, without
    --pass-credentials)."""
    password = "s3cr3t-Token-4711"
    elsewhere = ChartRepository(tmp_path / "elsewhere")
    repository = ChartRepository(tmp_path / "served", login=("reader", password))
    try:
        digest = elsewhere.publish(package_chart(tmp_path, "web", "1.0.0", CHART_TEMPLATES))
        (repository.folder / "index.yaml").write_bytes(
            (elsewhere.folder / "index.yaml").read_bytes()
        )
        auth = _credentials_for(repository, password, tmp_path, monkeypatch)
        spec = {"url": repository.url, "chart": "web", "version": "1.0.0", "digest": digest}

        validation = _load(make_repo, spec, SourceRenderer(cache_dir=tmp_path / "cache"))
    finally:
        repository.close()
        elsewhere.close()

    assert validation.repo is not None, [d.format() for d in validation.diagnostics]
    assert repository.requests == [("/index.yaml", f"Basic {auth}")]
    assert elsewhere.requests == [("/web-1.0.0.tgz", None)]


def test_an_http_repository_needs_the_charts_name(make_repo: RepoFactory) -> None:
    spec = {"url": "https://charts.example.com", "version": "1.0.0", "digest": OTHER}
    validation = _load(make_repo, spec, SourceRenderer())
    (error,) = validation.diagnostics
    assert (error.rule, error.path.rsplit("/", 1)[1]) == ("C1", "source.yaml")
    assert "needs spec.chart" in error.message


def test_credentials_in_the_url_are_refused(make_repo: RepoFactory) -> None:
    spec = {"url": "oci://me:pw@registry.example.com/web", "version": "1.0.0", "digest": OTHER}
    validation = _load(make_repo, spec, SourceRenderer())
    assert validation.repo is None
    assert all(d.path.endswith("source.yaml") for d in validation.diagnostics)


def test_the_cache_folder_is_the_environments_else_the_daemons_else_the_users(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert default_cache_dir() == tmp_path / "xdg" / "reconciler" / "sources"
    assert default_cache_dir(tmp_path / "daemon") == tmp_path / "daemon"
    monkeypatch.setenv("RECONCILER_SOURCE_CACHE", str(tmp_path / "named"))
    assert default_cache_dir(tmp_path / "daemon") == tmp_path / "named"


def test_a_registry_that_asks_for_a_login_gets_it_from_the_credentials_file(
    make_repo: RepoFactory,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG)
    password = "0ci-Pa55word-1234"
    (tmp_path / "registry").mkdir()
    registry = OciRegistry(tmp_path / "registry", login=("puller", password)).start()
    try:
        digest = registry.push(package_chart(tmp_path, "web", "1.0.0", CHART_TEMPLATES))
        refused = _load(make_repo, _oci_spec(registry, digest), SourceRenderer(tmp_path / "a"))
        credentials = tmp_path / "dockerconfig.json"
        entry = {"username": "puller", "password": password}
        credentials.write_text(json.dumps({"auths": {registry.host: entry}}))
        monkeypatch.setenv("RECONCILER_REGISTRY_CREDENTIALS", str(credentials))
        good = _load(make_repo, _oci_spec(registry, digest), SourceRenderer(tmp_path / "b"))
    finally:
        registry.stop()

    (error,) = refused.diagnostics
    assert "cannot be pulled" in error.message
    assert "$RECONCILER_REGISTRY_CREDENTIALS" in error.message  # where to put them
    assert good.repo is not None, [d.format() for d in good.diagnostics]
    assert _objects(good.repo, "one")["ConfigMap"]["data"]["size"] == "large"
    assert password not in "\n".join([error.format(), caplog.text])


def test_a_broken_credentials_file_is_one_line_naming_it(
    make_repo: RepoFactory, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    credentials = tmp_path / "config.json"
    credentials.write_text(json.dumps({"auths": {"registry.example.com": {"auth": "%%%"}}}))
    monkeypatch.setenv("RECONCILER_REGISTRY_CREDENTIALS", str(credentials))
    spec = {"url": "oci://registry.example.com/web", "version": "1.0.0", "digest": OTHER}

    validation = _load(make_repo, spec, SourceRenderer(cache_dir=tmp_path / "cache"))

    (error,) = validation.diagnostics
    assert f"{credentials}: the 'auth' of registry.example.com is not base64" in error.message


def test_a_pulled_charts_values_schema_is_checked_at_render(
    make_repo: RepoFactory, registry: OciRegistry, tmp_path: Path
) -> None:
    schema = {"type": "object", "properties": {"size": {"enum": ["small", "large"]}}}
    templates = {**CHART_TEMPLATES, "values.schema.json": json.dumps(schema)}
    digest = registry.push(package_chart(tmp_path, "web", "1.0.0", templates))
    tree = {
        **source_module_files(_oci_spec(registry, digest)),
        **channel_file("regular", {"web": "1.0.0"}),
        **runtime_file("one", "regular", [{"name": "web", "values": {"size": "huge"}}]),
    }

    validation = load_repo(
        make_repo(tree),
        renderer=KindRenderer({ModuleKind.SOURCE: SourceRenderer(tmp_path / "cache")}),
    )

    (error,) = validation.diagnostics
    assert error.rule == "C9"
    assert "does not render for runtime one" in error.message
    assert "/size" in error.message
    assert "\n" not in error.message


CHART_YAML = b"apiVersion: v2\nname: web\nversion: 1.0.0\n"


@pytest.mark.parametrize(
    ("files", "refusal"),
    [
        (
            {"Chart.yaml": CHART_YAML, "files/zeros.bin": bytes(50 << 20)},
            "its file web/files/zeros.bin unpacks to 52428800 bytes, over the 5242880-byte "
            "limit (--chart-file-limit); refused before unpacking",
        ),
        (
            {"Chart.yaml": CHART_YAML, **{f"files/{n}.bin": bytes(4 << 20) for n in range(30)}},
            "its files unpack to over 104857600 bytes (--chart-size-limit); refused before "
            "unpacking",
        ),
    ],
    ids=["one-big-file", "many-files"],
)
def test_an_archive_bomb_is_refused_from_its_headers(
    make_repo: RepoFactory, tmp_path: Path, files: Mapping[str, bytes], refusal: str
) -> None:
    archive = chart_archive(files, "web")  # a bomb Helm would not package
    assert len(archive) < 1 << 20  # small on the wire, 50-120 MiB unpacked
    digest = "sha256:" + hashlib.sha256(archive).hexdigest()
    write_cached(tmp_path / "cache", digest, archive)  # as a pull would have left it
    spec = {"url": "oci://127.0.0.1:1/charts/web", "version": "1.0.0", "digest": digest}
    validation = _load(make_repo, spec, SourceRenderer(cache_dir=tmp_path / "cache"))
    (error,) = validation.diagnostics
    assert error.path.endswith("modules/web/1.0.0/source.yaml")
    assert refusal in error.message


class _EndlessIndex(BaseHTTPRequestHandler):
    """A chart repository whose ``index.yaml`` never ends (a YAML comment, line after line)."""

    def do_GET(self) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/yaml")
        self.end_headers()
        line = b"# " + b"x" * 1022 + b"\n"
        with contextlib.suppress(OSError):  # the reader stops: the connection is closed
            while True:
                self.wfile.write(line * 1024)

    def log_message(self, *args: object) -> None:
        pass


def test_a_huge_repository_index_is_refused_at_the_memory_limit(
    make_repo: RepoFactory, tmp_path: Path
) -> None:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _EndlessIndex)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    pulls = Sandbox(RenderLimits(memory=384 << 20), network=True)
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}"
        spec = {"url": url, "chart": "web", "version": "1.0.0", "digest": OTHER}
        engine = SourceRenderer(cache_dir=tmp_path / "cache", pull_sandbox=pulls)
        validation = _load(make_repo, spec, engine)
    finally:
        pulls.close()
        server.shutdown()
        server.server_close()
    (error,) = validation.diagnostics
    assert "the render needed over 384 MiB of memory and was stopped" in error.message
