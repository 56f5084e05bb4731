"""An HTTPS server on 127.0.0.1 with a certificate of a test CA made by the ``openssl`` CLI, which
records the ``Authorization`` header of every request and answers 401 (a remote that wants
credentials). git trusts the CA through ``GIT_SSL_CAINFO``."""

from __future__ import annotations

import ssl
import subprocess
import threading
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


class HttpsRecorder:
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

        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(certificate, key)
        self.http = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.http.socket = context.wrap_socket(self.http.socket, server_side=True)
        self.port = int(self.http.server_port)
        threading.Thread(target=self.http.serve_forever, daemon=True).start()

    def url(self, name: str = "channels.git") -> str:
        return f"https://127.0.0.1:{self.port}/{name}"

    def authorizations(self) -> set[str]:
        """Every ``Authorization`` value received (``""`` for a request without one)."""
        return {header for _, header in self.seen}

    def close(self) -> None:
        self.http.shutdown()
        self.http.server_close()
