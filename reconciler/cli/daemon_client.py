"""Talking to a running daemon over HTTP: ``POST /sync`` (``sync --daemon``, ``reconcile
--daemon``) and ``GET /status`` (``reconcile --daemon --wait``). Standard library only."""

from __future__ import annotations

import json
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any

import click

from reconciler.errors import AccessError


def _check_url(url: str) -> str:
    if not url.startswith(("http://", "https://")):
        raise click.UsageError("--daemon needs an http:// or https:// URL")
    return url.rstrip("/")


def request_sync(url: str, secret_file: Path | None, runtime: str | None = None) -> None:
    """``POST /sync`` (``?runtime=NAME`` for one runtime): the daemon polls git, then
    reconciles; :class:`AccessError` naming the daemon's answer when it refuses."""
    headers = {}
    if secret_file is not None:
        headers["Authorization"] = "Bearer " + secret_file.read_text().strip()
    query = "?" + urllib.parse.urlencode({"runtime": runtime}) if runtime else ""
    request = urllib.request.Request(  # noqa: S310 (http and https only, checked)
        _check_url(url) + "/sync" + query, data=b"", headers=headers, method="POST"
    )
    with _answer(url, request) as response:
        what = f"reconcile of {runtime}" if runtime else "reconcile"
        click.echo(f"daemon at {url}: {what} requested ({response.status})")


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
    except (urllib.error.URLError, OSError) as error:
        raise AccessError(f"cannot reach the daemon at {url}: {error}") from error


def _refusal(error: Any) -> str:
    """An HTTP error answer of the daemon as ``403 <its error message>``."""
    try:
        message = str(json.loads(error.read(4096))["error"])
    except (OSError, ValueError, KeyError, TypeError):
        message = str(error.reason)
    return f"{error.code} {message}"
