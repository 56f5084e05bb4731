"""Talking to a running daemon over HTTP: ``POST /sync`` (``sync --daemon``, ``reconcile
--daemon``), ``GET /status`` (``reconcile --daemon --wait``), ``GET /rollouts`` and
``POST /rollout`` (``rollout --daemon``). Standard library only."""

from __future__ import annotations

import json
import socket
import ssl
import urllib.error
import urllib.parse
import urllib.request
from datetime import datetime
from pathlib import Path
from typing import Any

import click

from reconciler.errors import AccessError


def _check_url(url: str) -> str:
    if not url.startswith(("http://", "https://")):
        raise click.UsageError("--daemon needs an http:// or https:// URL")
    return url.rstrip("/")


def request_sync(url: str, secret_file: Path | None, runtime: str | None = None) -> datetime | None:
    """``POST /sync`` (``?runtime=NAME`` for one runtime): the daemon polls git, then
    reconciles; :class:`AccessError` naming the daemon's answer when it refuses (404 for a
    runtime it does not know). The daemon's time of the request (``None`` from an older one)."""
    query = {"runtime": runtime} if runtime else {}
    answer = post(url, "/sync", secret_file, query)
    what = f"reconcile of {runtime}" if runtime else "reconcile"
    click.echo(f"daemon at {url}: {what} requested ({answer.status})")
    try:
        return datetime.fromisoformat(str(answer.document.get("requested")))
    except ValueError:
        return None


class Answer:
    """A daemon's answer to a POST: its status and JSON document."""

    def __init__(self, status: int, document: dict[str, Any]) -> None:
        self.status = status
        self.document = document


def post(url: str, path: str, secret_file: Path | None, query: dict[str, str]) -> Answer:
    """``POST path?query`` with the webhook secret as Bearer token (from ``secret_file``);
    :class:`AccessError` naming the daemon's answer when it refuses."""
    headers = {}
    if secret_file is not None:
        headers["Authorization"] = "Bearer " + _secret(secret_file)
    encoded = "?" + urllib.parse.urlencode(query) if query else ""
    request = urllib.request.Request(  # noqa: S310 (http and https only, checked)
        _check_url(url) + path + encoded, data=b"", headers=headers, method="POST"
    )
    with _answer(url, request) as response:
        try:
            document = json.loads(response.read(1 << 16))
        except ValueError:
            document = {}
        return Answer(response.status, document if isinstance(document, dict) else {})


def _secret(secret_file: Path) -> str:
    try:
        return secret_file.read_text().strip()
    except OSError as error:
        raise AccessError(f"cannot read the secret file {secret_file}: {error.strerror}") from error


def get_json(url: str, path: str) -> dict[str, Any]:
    """The daemon's JSON answer to ``GET path`` (``/rollouts``)."""
    request = urllib.request.Request(_check_url(url) + path)  # noqa: S310 (checked)
    with _answer(url, request) as response:
        document = json.loads(response.read())
    return document if isinstance(document, dict) else {}


def runtime_status(url: str, runtime: str) -> dict[str, Any] | None:
    """The daemon's ``/status`` entry of ``runtime`` (``None`` while it has none)."""
    request = urllib.request.Request(_check_url(url) + "/status")  # noqa: S310 (checked)
    with _answer(url, request) as response:
        document = json.loads(response.read())
    found: dict[str, Any] | None = next(
        (r for r in document.get("runtimes") or [] if r.get("runtime") == runtime), None
    )
    return found


def _answer(url: str, request: urllib.request.Request) -> Any:
    try:
        return urllib.request.urlopen(request, timeout=30)  # noqa: S310 (http and https only)
    except urllib.error.HTTPError as error:
        raise AccessError(f"the daemon at {url} refused: {_refusal(error)}") from error
    except urllib.error.URLError as error:
        raise AccessError(f"cannot reach the daemon at {url}: {_why(error.reason)}") from error
    except OSError as error:
        raise AccessError(f"cannot reach the daemon at {url}: {_why(error)}") from error


def _why(reason: object) -> str:
    """Why a connection failed, in words (``connection refused: is the daemon running ...``)."""
    if isinstance(reason, ConnectionRefusedError):
        return "connection refused (is the daemon running, and is that its --listen port?)"
    if isinstance(reason, socket.gaierror):
        return "the host name does not resolve (check the URL)"
    if isinstance(reason, TimeoutError | socket.timeout):
        return "no answer in time (a firewall, the wrong host or port, or a daemon stuck?)"
    if isinstance(reason, ssl.SSLError):
        return f"the TLS handshake failed ({reason.reason or 'is it https?'})"
    if isinstance(reason, OSError):
        return reason.strerror or type(reason).__name__
    return str(reason)


def _refusal(error: Any) -> str:
    """An HTTP error answer of the daemon as ``403 <its error message>``."""
    try:
        message = str(json.loads(error.read(4096))["error"])
    except (OSError, ValueError, KeyError, TypeError):
        message = str(error.reason)
    return f"{error.code} {message}"
