"""The daemon's HTTP port, one answer at a time: every status code it gives, each a JSON document
and one log line (never a traceback), on a real server bound to 127.0.0.1 in front of a real
daemon that follows a local git repository (it is never polled unless a test says so)."""

from __future__ import annotations

import hashlib
import hmac
import http.client
import json
import logging
import socket
import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from reconciler.cli import cli
from reconciler.daemon.http import HttpLimits, verify_webhook
from reconciler.operations.store import SqliteStore
from tests.support.daemon_http import (
    SECRET,
    Serve,
    daemon_command,
    exchange,
    port_of,
    read_response,
    start,
)
from tests.support.daemons import free_port

__all__ = ["start"]  # the fixture

BODY = json.dumps({"ref": "refs/heads/main"}).encode()


def _post(port: int, path: str, body: bytes = b"", headers: dict[str, str] | None = None) -> Any:
    lines = [f"POST {path} HTTP/1.1", "Host: test", f"Content-Length: {len(body)}"]
    lines += [f"{name}: {value}" for name, value in (headers or {}).items()]
    return exchange(port, ("\r\n".join(lines) + "\r\n\r\n").encode() + body)


def _error(answer: tuple[int, dict[str, str], bytes], status: int) -> str:
    """The answer is ``status`` with a JSON error document; its message."""
    assert answer[0] == status, answer
    assert answer[1]["Content-Type"] == "application/json"
    document = json.loads(answer[2])
    assert set(document) == {"error"}
    return str(document["error"])


def _logged(caplog: pytest.LogCaptureFixture, status: int) -> list[str]:
    """Lines the HTTP port logged about ``status``; no record carries a traceback."""
    assert not [r for r in caplog.records if r.exc_info or r.exc_text]
    return [
        r.getMessage()
        for r in caplog.records
        if r.name == "reconciler.http" and f": {status} " in r.getMessage()
    ]


@pytest.mark.parametrize(
    ("head", "status", "message"),
    [
        ("POST /hooks/git HTTP/1.1\r\nHost: t\r\n\r\n", 411, "needs a Content-Length"),
        ("POST /sync HTTP/1.1\r\nHost: t\r\n\r\n", 411, "needs a Content-Length"),
        ("POST /hooks/git HTTP/1.1\r\nContent-Length: -1\r\n\r\n", 400, "Content-Length"),
        ("POST /hooks/git HTTP/1.1\r\nContent-Length: abc\r\n\r\n", 400, "Content-Length"),
        ("POST /sync HTTP/1.1\r\nContent-Length: 1e3\r\n\r\n", 400, "Content-Length"),
        ("POST /hooks/git HTTP/1.1\r\nContent-Length: 314572800\r\n\r\n", 413, "too large"),
        ("POST /hooks/git HTTP/1.1\r\nContent-Length: 1048577\r\n\r\n", 413, "1048576 bytes"),
        ("POST /sync HTTP/1.1\r\nTransfer-Encoding: gzip\r\n\r\n", 501, "Transfer-Encoding"),
        ("GET /healthz HTTP/1.1\r\nX-Big: " + "x" * 70_000 + "\r\n\r\n", 431, "headers"),
        ("GET /status HTTP/1.1\r\nBad Header\r\n\r\n", 400, "bad request"),
    ],
)
def test_a_bad_request_is_refused_from_its_headers_before_any_body(
    start: Serve, caplog: pytest.LogCaptureFixture, head: str, status: int, message: str
) -> None:
    caplog.set_level(logging.INFO)
    server, daemon = start()
    answer = exchange(port_of(server), head.encode())  # no body sent: decided from the headers
    assert message in _error(answer, status)
    assert len(_logged(caplog, status)) == 1
    assert daemon.state.last_poll is None


def test_a_body_of_exactly_the_limit_is_read(start: Serve) -> None:
    server, _ = start()
    assert "signature" in _error(_post(port_of(server), "/hooks/git", b"x" * (1 << 20)), 403)


def test_a_chunked_body_is_refused_once_past_the_limit(
    start: Serve, caplog: pytest.LogCaptureFixture
) -> None:
    server, _ = start()
    chunk = b"10000\r\n" + b"x" * 0x10000 + b"\r\n"  # 64 KiB chunks, never a last chunk
    with socket.create_connection(("127.0.0.1", port_of(server)), timeout=10) as sock:
        sock.sendall(b"POST /hooks/git HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n")
        for _ in range(17):  # 1 MiB + 64 KiB
            sock.sendall(chunk)
        assert "too large" in _error(read_response(sock), 413)
    assert len(_logged(caplog, 413)) == 1


def test_a_small_chunked_body_is_accepted_and_checked(start: Serve) -> None:
    server, _ = start()
    request = b"POST /sync HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n2\r\n{}\r\n0\r\n\r\n"
    assert _error(exchange(port_of(server), request), 403) == "missing or wrong token"


def test_unknown_endpoints_and_wrong_methods(
    start: Serve, caplog: pytest.LogCaptureFixture
) -> None:
    server, _ = start()
    port = port_of(server)
    assert _error(exchange(port, b"GET /nope HTTP/1.1\r\n\r\n"), 404) == "no such endpoint: /nope"
    answer = exchange(port, b"GET /sync HTTP/1.1\r\n\r\n")
    assert _error(answer, 405) == "/sync answers POST only"
    assert answer[1]["Allow"] == "POST"
    assert "GET and HEAD only" in _error(_post(port, "/status"), 405)
    assert len(_logged(caplog, 404)) == 1
    assert len(_logged(caplog, 405)) == 2


def test_without_a_secret_hooks_and_sync_are_refused(
    start: Serve, caplog: pytest.LogCaptureFixture
) -> None:
    server, daemon = start(secret=None)
    port = port_of(server)
    signature = "sha256=" + hmac.new(b"", BODY, hashlib.sha256).hexdigest()
    hook = _post(port, "/hooks/git", BODY, {"X-Hub-Signature-256": signature})
    assert "--webhook-secret-file" in _error(hook, 403)
    sync = _post(port, "/sync", b"", {"Authorization": "Bearer "})
    assert "--api-token-file" in _error(sync, 403)
    assert "--allow-unauthenticated-sync" in _error(sync, 403)
    assert len(_logged(caplog, 403)) == 2
    assert daemon.state.last_poll is None


def test_wrong_signatures_and_tokens_are_refused_and_never_logged(
    start: Serve, caplog: pytest.LogCaptureFixture
) -> None:
    server, daemon = start()
    port = port_of(server)
    wrong = "sha256=" + hmac.new(b"guessed-secret", BODY, hashlib.sha256).hexdigest()
    answers = [
        _post(port, "/hooks/git", BODY),
        _post(port, "/hooks/git", BODY, {"X-Hub-Signature-256": wrong}),
        _post(port, "/hooks/git", BODY, {"X-Gitlab-Token": "guessed-token"}),
        _post(port, "/sync"),
        _post(port, "/sync", b"", {"Authorization": "Bearer guessed-token"}),
        _post(port, "/sync", b"", {"Authorization": "Bearer " + SECRET.decode() + "x"}),
    ]
    assert [_error(a, 403).split()[-1] for a in answers] == ["signature"] * 3 + ["token"] * 3
    assert len(_logged(caplog, 403)) == 6
    assert "guessed" not in caplog.text
    assert daemon.state.last_poll is None


def test_an_api_token_of_their_own_keeps_the_commands_apart_from_the_webhook_secret(
    start: Serve,
) -> None:
    """With ``--api-token-file``, the webhook secret (which the git host holds too) opens no
    command, and the API token opens no webhook."""
    token = b"api-token-for-tests"
    server, daemon = start(api_token=token)
    port = port_of(server)
    as_secret = {"Authorization": "Bearer " + SECRET.decode()}
    as_token = {"Authorization": "Bearer " + token.decode()}
    for path in ("/sync", "/suspend?runtime=a", "/resume?runtime=a", "/rollout?id=r&command=pause"):
        assert _error(_post(port, path, b"", as_secret), 403) == "missing or wrong token"
    assert "signature" in _error(
        _post(port, "/hooks/git", BODY, {"X-Gitlab-Token": token.decode()}), 403
    )
    assert daemon.state.last_poll is None
    assert _post(port, "/sync", b"", as_token)[0] == 202
    signature = "sha256=" + hmac.new(SECRET, BODY, hashlib.sha256).hexdigest()
    assert _post(port, "/hooks/git", BODY, {"X-Hub-Signature-256": signature})[0] == 202


def test_a_signed_hook_and_a_token_start_a_poll(start: Serve) -> None:
    server, daemon = start()
    port = port_of(server)
    signature = "sha256=" + hmac.new(SECRET, BODY, hashlib.sha256).hexdigest()
    answer = _post(port, "/hooks/git", BODY, {"X-Hub-Signature-256": signature})
    assert (answer[0], json.loads(answer[2])) == (202, {"accepted": True})
    _until(lambda: daemon.ready)
    sync = _post(port, "/sync", b"", {"Authorization": "Bearer " + SECRET.decode()})
    answered = json.loads(sync[2])
    assert (sync[0], answered["accepted"], answered["runtime"]) == (202, True, None)
    assert datetime.fromisoformat(answered["requested"]) <= datetime.now(UTC)


def test_the_flag_opens_sync_without_a_secret_but_never_the_hook(start: Serve) -> None:
    server, daemon = start(secret=None, allow_unauthenticated_sync=True)
    port = port_of(server)
    assert _post(port, "/sync")[0] == 202
    _until(lambda: daemon.ready)
    assert "--webhook-secret-file" in _error(_post(port, "/hooks/git", BODY), 403)


@pytest.mark.parametrize(
    "partial",
    [
        b"",  # connects and says nothing
        b"GET /healthz HTTP/1.1\r\nHost: t\r\n",  # headers never finished
        b"POST /hooks/git HTTP/1.1\r\nContent-Length: 1000\r\n\r\n{}",  # body never finished
    ],
)
def test_a_request_not_received_in_time_gets_408_and_is_closed(
    start: Serve, caplog: pytest.LogCaptureFixture, partial: bytes
) -> None:
    server, _ = start(limits=HttpLimits(read_timeout=1))
    with socket.create_connection(("127.0.0.1", port_of(server)), timeout=10) as sock:
        sock.sendall(partial)
        assert "in time" in _error(read_response(sock), 408)
        assert sock.recv(1) == b""  # closed
    assert len(_logged(caplog, 408)) == 1


def test_a_trickling_client_is_cut_off_at_the_deadline(start: Serve) -> None:
    server, _ = start(limits=HttpLimits(read_timeout=1))
    with socket.create_connection(("127.0.0.1", port_of(server)), timeout=10) as sock:
        sock.sendall(b"GET /healthz HTTP/1.1\r\n")
        answer: tuple[int, dict[str, str], bytes] | None = None
        while answer is None:  # one header byte at a time: never idle, never finished
            sock.sendall(b"X")
            if _readable(sock, 0.1):
                answer = read_response(sock)
        assert answer[0] == 408  # never idle, yet cut off: the deadline is the request's


def _readable(sock: socket.socket, seconds: float) -> bool:
    import select

    return bool(select.select([sock], [], [], seconds)[0])


def test_connections_never_add_threads(start: Serve) -> None:
    server, _ = start()
    threads = threading.active_count()
    idle = [socket.create_connection(("127.0.0.1", port_of(server))) for _ in range(40)]
    try:
        for sock in idle[::2]:
            sock.sendall(b"GET /healthz HTTP/1.1\r\n")  # half a request
        assert exchange(port_of(server), b"GET /healthz HTTP/1.1\r\n\r\n")[0] == 200
        assert threading.active_count() == threads
    finally:
        for sock in idle:
            sock.close()


def _half_open(port: int, count: int, source: str = "127.0.0.1") -> list[socket.socket]:
    """``count`` connections from ``source``, each with half a request line sent."""
    held = []
    for _ in range(count):
        sock = socket.create_connection(("127.0.0.1", port), timeout=10, source_address=(source, 0))
        sock.sendall(b"GET /status HTTP/1.1\r\nHost: t\r\n")
        held.append(sock)
    return held


def _closed_by_the_server(sock: socket.socket, deadline: float) -> bool:
    """Whether the server closed ``sock`` (after a 408, or at once) before ``deadline``."""
    while time.monotonic() < deadline:
        if _readable(sock, 0.05):
            try:
                while sock.recv(4096):
                    pass
            except OSError:
                pass
            return True
    return False


def test_a_new_connection_at_the_limit_closes_the_oldest_unfinished_one(start: Serve) -> None:
    server, _ = start(limits=HttpLimits(max_connections=3, read_timeout=60))
    held = _half_open(port_of(server), 3)
    try:
        # the limit is reached: waitress alone left the probe queued until a read timeout
        answer = exchange(port_of(server), b"GET /healthz HTTP/1.1\r\n\r\n", timeout=10)
        assert answer[0] == 200
        deadline = time.monotonic() + 10
        assert _closed_by_the_server(held[0], deadline)  # the oldest made room
        assert not _readable(held[2], 0)  # the newest stays
    finally:
        for sock in held:
            sock.close()


def test_a_client_past_its_share_loses_its_own_oldest_connections(start: Serve) -> None:
    server, _ = start(limits=HttpLimits(max_per_client=5, read_timeout=60))
    port = port_of(server)
    other = _half_open(port, 2, source="127.0.0.1")
    try:
        flood = _half_open(port, 8, source="127.0.0.2")
    except OSError:  # pragma: no cover (loopback without 127.0.0.2)
        pytest.skip("no second loopback address")
    try:
        deadline = time.monotonic() + 10
        assert all(_closed_by_the_server(sock, deadline) for sock in flood[:3])
        assert not any(_readable(sock, 0) for sock in flood[3:] + other)
        assert exchange(port, b"GET /readyz HTTP/1.1\r\n\r\n")[0] == 503  # answered
    finally:
        for sock in flood + other:
            sock.close()


def test_200_half_open_connections_starve_no_probe(start: Serve) -> None:
    server, _ = start(limits=HttpLimits(read_timeout=60))
    hostile = _half_open(port_of(server), 200)
    try:
        for _ in range(3):  # each on a fresh connection, with a generous timeout
            assert exchange(port_of(server), b"GET /healthz HTTP/1.1\r\n\r\n", timeout=10)[0] == 200
        deadline = time.monotonic() + 10
        closed = sum(_closed_by_the_server(sock, deadline) for sock in hostile[:100])
        assert closed >= 100  # at most 100 open (of one client: 20), the oldest went first
    finally:
        for sock in hostile:
            sock.close()


def test_hostile_connections_are_closed_after_the_read_timeout(start: Serve) -> None:
    server, _ = start(limits=HttpLimits(read_timeout=1, max_per_client=200, max_connections=200))
    hostile = _half_open(port_of(server), 200)
    try:
        deadline = time.monotonic() + 30
        assert all(_closed_by_the_server(sock, deadline) for sock in hostile)
    finally:
        for sock in hostile:
            sock.close()


def test_probes_are_answered_while_every_handler_thread_is_busy(start: Serve) -> None:
    server, daemon = start()
    release = threading.Event()
    busy = threading.Semaphore(0)

    def slow_status() -> dict[str, Any]:
        busy.release()
        release.wait(timeout=30)
        return {}

    daemon.status = slow_status  # type: ignore[method-assign]
    requests: list[socket.socket] = []
    try:
        for _ in range(6):  # 4 handler threads, all held, and 2 more queued
            sock = socket.create_connection(("127.0.0.1", port_of(server)), timeout=10)
            sock.sendall(b"GET /status HTTP/1.1\r\n\r\n")
            requests.append(sock)
        for _ in range(4):
            assert busy.acquire(timeout=10)
        assert exchange(port_of(server), b"GET /healthz HTTP/1.1\r\n\r\n", timeout=10)[0] == 200
        assert exchange(port_of(server), b"GET /readyz HTTP/1.1\r\n\r\n", timeout=10)[0] == 503
    finally:
        release.set()
        for sock in requests:
            sock.close()


@pytest.mark.parametrize("path", ["/healthz", "/readyz", "/metrics", "/status"])
def test_head_answers_like_get_without_a_body(start: Serve, path: str) -> None:
    server, _ = start()
    port = port_of(server)
    got = exchange(port, f"GET {path} HTTP/1.1\r\n\r\n".encode())
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall(f"HEAD {path} HTTP/1.1\r\n\r\n".encode())
        response = http.client.HTTPResponse(sock, method="HEAD")
        response.begin()
        assert response.status == got[0]
        assert response.getheader("Content-Type") == got[1]["Content-Type"]
        assert int(response.getheader("Content-Length") or -1) > 0
        assert response.read() == b""
        assert not _readable(sock, 0.2)  # no body bytes follow the headers


def test_a_failing_handler_is_a_500_document_and_one_line(
    start: Serve, caplog: pytest.LogCaptureFixture
) -> None:
    server, daemon = start()
    store = daemon.store
    assert isinstance(store, SqliteStore)
    store.close()  # /status now raises inside the handler
    answer = exchange(port_of(server), b"GET /status HTTP/1.1\r\n\r\n")
    assert "daemon's log" in _error(answer, 500)
    lines = _logged(caplog, 500)
    assert len(lines) == 1
    assert "ProgrammingError" in lines[0]
    assert exchange(port_of(server), b"GET /healthz HTTP/1.1\r\n\r\n")[0] == 200


def test_read_endpoints_keep_their_documents(start: Serve) -> None:
    server, _ = start()
    port = port_of(server)
    assert json.loads(exchange(port, b"GET /healthz HTTP/1.1\r\n\r\n")[2]) == {"status": "ok"}
    ready = exchange(port, b"GET /readyz HTTP/1.1\r\n\r\n")
    assert (ready[0], json.loads(ready[2])) == (503, {"ready": False, "commit": ""})
    metrics = exchange(port, b"GET /metrics?x=1 HTTP/1.1\r\n\r\n")
    assert metrics[1]["Content-Type"].startswith("text/plain")
    assert json.loads(exchange(port, b"GET /status HTTP/1.1\r\n\r\n")[2])["ready"] is False


def test_verify_webhook_compares_github_and_gitlab_secrets() -> None:
    signature = "sha256=" + hmac.new(SECRET, BODY, hashlib.sha256).hexdigest()
    assert verify_webhook(SECRET, {"X-Hub-Signature-256": signature}, BODY)
    assert not verify_webhook(SECRET, {"X-Hub-Signature-256": signature}, BODY + b" ")
    assert not verify_webhook(SECRET, {"X-Hub-Signature-256": "sha256=é"}, BODY)
    assert verify_webhook(SECRET, {"X-Gitlab-Token": SECRET.decode()}, BODY)
    assert not verify_webhook(SECRET, {"X-Gitlab-Token": "nope"}, BODY)
    assert not verify_webhook(SECRET, {}, BODY)


def test_a_daemon_that_cannot_be_reached_is_named_with_the_cause_in_words() -> None:
    url = f"http://127.0.0.1:{free_port()}"  # nothing listens there
    result = CliRunner().invoke(cli, ["sync", "--daemon", url])
    assert result.exit_code != 0
    assert f"cannot reach the daemon at {url}: connection refused (is the daemon running" in (
        result.output
    )
    assert "urlopen" not in result.output
    assert "Errno" not in result.output


def test_sync_against_a_daemon_that_refuses_says_why(start: Serve, tmp_path: Path) -> None:
    server, _ = start()
    wrong = tmp_path / "wrong"
    wrong.write_text("not-the-secret\n")
    url = f"http://127.0.0.1:{port_of(server)}"
    result = CliRunner().invoke(cli, ["sync", "--daemon", url, "--secret-file", str(wrong)])
    assert result.exit_code == 2
    assert f"the daemon at {url} refused: 403 missing or wrong token" in result.output
    assert "not-the-secret" not in result.output


@pytest.mark.parametrize("flag", ["--webhook-secret-file", "--api-token-file"])
def test_the_daemon_refuses_an_empty_secret_file(tmp_path: Path, flag: str) -> None:
    empty = tmp_path / "secret"
    empty.write_text("\n")
    result = daemon_command(tmp_path, flag, str(empty))
    assert result.exit_code == 2
    assert flag in result.output
    assert "the file is empty" in result.output


def _until(condition: Callable[[], bool], seconds: float = 30) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, "condition not met in time"
        time.sleep(0.05)


def test_suspend_and_resume_go_through_the_authenticated_port_and_names_are_checked(
    start: Serve, tmp_path: Path
) -> None:
    """A typo of a runtime is a 404 with the closest name, never a silent success."""
    server, daemon = start()
    port = port_of(server)
    token = {"Authorization": "Bearer " + SECRET.decode()}
    assert daemon.poll()
    url = f"http://127.0.0.1:{port}"
    secret = tmp_path / "secret"
    secret.write_bytes(SECRET)

    assert "wrong token" in _error(_post(port, "/suspend?runtime=a"), 403)
    typo = _error(_post(port, "/sync?runtime=aa", b"", token), 404)
    assert (
        typo
        == "runtime 'aa' is not in the commit in force nor in the state store; did you mean 'a'?"
    )
    assert "is not in" in _error(_post(port, "/suspend?runtime=nope", b"", token), 404)
    assert daemon.store.suspensions() == {}
    suspended = CliRunner().invoke(
        cli,
        ["suspend", "b", "--reason", "incident 5", "--daemon", url, "--secret-file", str(secret)],
    )
    assert suspended.exit_code == 0, suspended.output
    assert suspended.stdout.startswith("runtime b: suspended; ")
    assert daemon.store.suspensions()["b"].reason == "incident 5"
    mistyped = CliRunner().invoke(
        cli, ["resume", "bb", "--daemon", url, "--secret-file", str(secret)]
    )
    assert mistyped.exit_code == 2
    assert "refused: 404 runtime 'bb' is not in" in mistyped.output
    resumed = CliRunner().invoke(
        cli, ["resume", "b", "--daemon", url, "--secret-file", str(secret)]
    )
    assert (resumed.exit_code, resumed.stdout.split(";")[0]) == (0, "runtime b: resumed")
    assert daemon.store.suspensions() == {}
