"""Real chart sources on 127.0.0.1 for the ``source`` module kind: an OCI registry (Debian's
``docker-registry``, the CNCF distribution registry, on a free port with a temporary config and
storage) and an HTTP chart repository (``index.yaml`` and ``.tgz`` files served by a small
``http.server``, with optional basic auth). Charts are packaged and pushed with Helm's own client.

A test that needs ``docker-registry`` is skipped without it, and fails under CI (``.ci/run``
installs it). The ``registry`` fixture is an empty registry for one test (import it into the test
module)."""

from __future__ import annotations

import base64
import hashlib
import subprocess
import tempfile
import threading
import urllib.error
import urllib.request
from collections.abc import Iterator
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import helm_python
import pytest
import yaml

from tests.support.daemons import free_port, until
from tests.support.tools import require_tool

REGISTRY_CONFIG = """version: 0.1
log:
  level: error
storage:
  filesystem:
    rootdirectory: {storage}
  delete:
    enabled: true
http:
  addr: 127.0.0.1:{port}
"""
HTPASSWD_AUTH = """auth:
  htpasswd:
    realm: charts
    path: {path}
"""


def bcrypt_hash(password: str) -> str:
    """The bcrypt hash htpasswd files hold (the registry takes no other), by the C library's
    crypt(3) (libxcrypt on Debian); Python's ``crypt`` module is deprecated, not gone in 3.11."""
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        import crypt

    return crypt.crypt(password, crypt.mksalt(crypt.METHOD_BLOWFISH))


def package_chart(folder: Path, name: str, version: str, templates: dict[str, str]) -> Path:
    """A chart ``name`` ``version`` with ``templates`` (path under the chart -> text),
    packaged as Helm packages it; returns the ``.tgz``."""
    chart = folder / f"{name}-{version}-src"
    (chart / "templates").mkdir(parents=True)
    meta = {"apiVersion": "v2", "name": name, "version": version, "appVersion": version}
    (chart / "Chart.yaml").write_text(yaml.safe_dump(meta))
    (chart / "values.yaml").write_text("greeting: hello\nsize: small\nreplicas: 1\n")
    for path, text in templates.items():
        (chart / path).parent.mkdir(parents=True, exist_ok=True)
        (chart / path).write_text(text)
    return Path(helm_python.package(chart, destination=folder))


class OciRegistry:
    """``docker-registry serve`` on 127.0.0.1, plain HTTP, storage under ``root``."""

    def __init__(self, root: Path, login: tuple[str, str] | None = None) -> None:
        self.program = require_tool("docker-registry")
        self.root = root
        self.port = free_port()
        self.login = login
        self.config = root / "registry.yml"
        config = REGISTRY_CONFIG.format(storage=root / "storage", port=self.port)
        if login is not None:
            users = root / "htpasswd"
            users.write_text(f"{login[0]}:{bcrypt_hash(login[1])}\n")
            config += HTPASSWD_AUTH.format(path=users)
        self.config.write_text(config)
        self.process: subprocess.Popen[bytes] | None = None
        self.log = root / "registry.log"

    @property
    def host(self) -> str:
        return f"127.0.0.1:{self.port}"

    def url(self, name: str) -> str:
        """The ``oci://`` URL of the chart ``name`` pushed under ``charts/``."""
        return f"oci://{self.host}/charts/{name}"

    def start(self) -> OciRegistry:
        with self.log.open("wb") as log:
            self.process = subprocess.Popen(
                [str(self.program), "serve", str(self.config)],
                stdout=subprocess.DEVNULL,
                stderr=log,
                start_new_session=True,
            )
        until(self._answers)
        return self

    def _answers(self) -> bool:
        assert self.process is not None
        assert self.process.poll() is None, self.log.read_text(errors="replace")[-2000:]
        try:
            with urllib.request.urlopen(f"http://{self.host}/v2/", timeout=2) as answer:
                return bool(answer.status == 200)
        except urllib.error.HTTPError as error:
            return error.code == 401 and self.login is not None  # up, and asks who is there
        except (urllib.error.URLError, ConnectionError):
            return False

    def push(self, archive: Path) -> str:
        """Push a chart archive; returns its manifest digest (what ``helm push`` prints)."""
        meta = _chart_meta(archive)
        with tempfile.TemporaryDirectory() as private:
            credentials = Path(private) / "registry.json"
            with helm_python.RegistryClient(
                plain_http=True, credentials_file=credentials
            ) as client:
                if self.login is not None:
                    client.login(self.host, *self.login, plain_http=True)
                client.push(archive, f"oci://{self.host}/charts", plain_http=True)
                found = client.resolve(f"{self.url(meta['name'])}:{meta['version']}")
        return str(found["digest"])

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            self.process.wait(timeout=30)


def _chart_meta(archive: Path) -> dict[str, Any]:
    import tarfile

    with tarfile.open(archive) as tar:
        member = next(m for m in tar.getmembers() if m.name.endswith("/Chart.yaml"))
        extracted = tar.extractfile(member)
        assert extracted is not None
        return dict(yaml.safe_load(extracted.read()))


class ChartRepository:
    """An HTTP chart repository on 127.0.0.1: ``index.yaml`` (as ``helm repo index`` writes
    it) and the ``.tgz`` files of ``folder``; with ``login``, basic auth is required. Every
    request is kept in :attr:`requests` as ``(path, Authorization header or None)``."""

    def __init__(self, folder: Path, login: tuple[str, str] | None = None) -> None:
        self.folder = folder
        folder.mkdir(parents=True, exist_ok=True)
        expected = "Basic " + base64.b64encode(":".join(login).encode()).decode() if login else ""
        self.requests: list[tuple[str, str | None]] = []
        requests = self.requests

        class Handler(SimpleHTTPRequestHandler):
            def __init__(self, *args: Any, **kwargs: Any) -> None:
                super().__init__(*args, directory=str(folder), **kwargs)

            def do_GET(self) -> None:
                requests.append((self.path, self.headers.get("Authorization")))
                if expected and self.headers.get("Authorization") != expected:
                    self.send_response(401)
                    self.send_header("WWW-Authenticate", 'Basic realm="charts"')
                    self.end_headers()
                    return
                super().do_GET()

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def publish(self, archive: Path) -> str:
        """Add a chart archive and re-index; returns its digest (sha256 of the ``.tgz``)."""
        target = self.folder / archive.name
        target.write_bytes(archive.read_bytes())
        helm_python.repo_index_generate(self.folder, base_url=self.url)
        return "sha256:" + hashlib.sha256(target.read_bytes()).hexdigest()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def registry(tmp_path: Path) -> Iterator[OciRegistry]:
    """An empty OCI registry of the test's own, stopped at its end."""
    (tmp_path / "registry").mkdir()
    started = OciRegistry(tmp_path / "registry").start()
    try:
        yield started
    finally:
        started.stop()
