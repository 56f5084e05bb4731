"""An HTTPS server on 127.0.0.1 with a certificate of a test CA made by the ``openssl`` CLI, which
records the ``Authorization`` header of every request and answers 401 (a remote that wants
credentials), and a real git server over HTTPS (``git http-backend``) that records the same, or
redirects. git trusts the CA through ``GIT_SSL_CAINFO``."""

from __future__ import annotations

import os
import ssl
import subprocess
import threading
from collections.abc import Mapping
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path


def make_test_ca(folder: Path) -> tuple[Path, Path, Path]:
    """A CA and a certificate for 127.0.0.1 signed by it: (ca.pem, server.pem, server.key)."""
    folder.mkdir(parents=True, exist_ok=True)
    ca, ca_key = folder / "ca.pem", folder / "ca.key"
    server, server_key, request = folder / "server.pem", folder / "server.key", folder / "s.csr"
    extensions = folder / "server.ext"
    extensions.write_text("subjectAltName=IP:127.0.0.1\nextendedKeyUsage=serverAuth\n")
    ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]
    for command in (
        ["req", "-x509", *ec, "-keyout", ca_key, "-out", ca, "-days", "2", "-subj", "/CN=test"],
        ["req", *ec, "-keyout", server_key, "-out", request, "-subj", "/CN=127.0.0.1"],
        [
            *("x509", "-req", "-in", request, "-CA", ca, "-CAkey", ca_key, "-CAcreateserial"),
            *("-out", server, "-days", "2", "-extfile", extensions),
        ],
    ):
        subprocess.run(["openssl", *map(str, command)], capture_output=True, check=True)
    return ca, server, server_key


class _TlsServer:
    """An HTTPS server on 127.0.0.1 serving ``handler`` in a thread until :meth:`close`."""

    def __init__(self, certificate: Path, key: Path, handler: type[BaseHTTPRequestHandler]) -> None:
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(certificate, key)
        self.http = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self.http.socket = context.wrap_socket(self.http.socket, server_side=True)
        self.port = int(self.http.server_port)
        threading.Thread(target=self.http.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.http.shutdown()
        self.http.server_close()


class HttpsRecorder(_TlsServer):
    """Serves until :meth:`close`; :attr:`seen` holds ``(path, Authorization or "")`` of every
    request."""

    def __init__(self, certificate: Path, key: Path) -> None:
        self.seen: list[tuple[str, str]] = []
        recorder = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                recorder.seen.append((self.path, self.headers.get("Authorization", "")))
                self.send_response(401)
                self.send_header("WWW-Authenticate", 'Basic realm="git"')
                self.send_header("Content-Length", "0")
                self.end_headers()

            do_POST = do_GET  # noqa: N815

            def log_message(self, *args: object) -> None:
                pass

        super().__init__(certificate, key, Handler)

    def url(self, name: str = "channels.git") -> str:
        return f"https://127.0.0.1:{self.port}/{name}"

    def authorizations(self) -> set[str]:
        """Every ``Authorization`` value received (``""`` for a request without one)."""
        return {header for _, header in self.seen}


class HttpsGitBackend(_TlsServer):
    """A real git server over HTTPS on 127.0.0.1: ``git http-backend`` (CGI) serving the bare
    repositories below ``root``, recording ``(method, path, Authorization or "")`` of every
    request in :attr:`seen`. With ``redirect_to``, every request is answered with a 302 to the
    same path on that base URL instead (a remote that moved, or one that sends its callers on).
    """

    def __init__(
        self, certificate: Path, key: Path, root: Path, redirect_to: str | None = None
    ) -> None:
        self.seen: list[tuple[str, str, str]] = []
        backend = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                backend.seen.append(
                    (self.command, self.path, self.headers.get("Authorization", ""))
                )
                if redirect_to is not None:
                    self.send_response(302)
                    self.send_header("Location", redirect_to + self.path)
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
                length = int(self.headers.get("Content-Length") or 0)
                status, headers, body = _http_backend(
                    root, self.command, self.path, dict(self.headers), self.rfile.read(length)
                )
                self.send_response(status)
                for name, value in headers:
                    self.send_header(name, value)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            do_POST = do_GET  # noqa: N815

            def log_message(self, *args: object) -> None:
                pass

        super().__init__(certificate, key, Handler)

    def url(self, name: str = "fleet.git") -> str:
        return f"https://127.0.0.1:{self.port}/{name}"

    def authorizations(self) -> set[str]:
        """Every ``Authorization`` value received (``""`` for a request without one)."""
        return {header for _, _, header in self.seen}


def _http_backend(
    root: Path, method: str, path: str, headers: Mapping[str, str], body: bytes
) -> tuple[int, list[tuple[str, str]], bytes]:
    """One request answered by ``git http-backend``: (status, headers, body)."""
    path_info, _, query = path.partition("?")
    env = {
        "PATH": os.environ.get("PATH", os.defpath),
        "GIT_PROJECT_ROOT": str(root),
        "GIT_HTTP_EXPORT_ALL": "1",
        "REQUEST_METHOD": method,
        "PATH_INFO": path_info,
        "QUERY_STRING": query,
        "CONTENT_TYPE": headers.get("Content-Type") or "",
        "CONTENT_LENGTH": str(len(body)),
        "GIT_CONFIG_NOSYSTEM": "1",
        "HOME": str(root),
    }
    if headers.get("Git-Protocol"):
        env["GIT_PROTOCOL"] = str(headers.get("Git-Protocol"))
    done = subprocess.run(
        ["git", "http-backend"], input=body, env=env, capture_output=True, check=False
    )
    head, _, content = done.stdout.partition(b"\r\n\r\n")
    status, answer = 200, []
    for line in head.decode("latin-1").split("\r\n"):
        name, _, value = line.partition(":")
        if name.lower() == "status":
            status = int(value.split()[0])
        elif name:
            answer.append((name, value.strip()))
    return status, answer, content
