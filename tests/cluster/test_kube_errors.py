"""The real adapter translates the client's exceptions once, into our error hierarchy.

Built from the client's own exception types (no API server here); the contract suite covers the
adapter's behaviour against a real cluster when one is configured.
"""

from __future__ import annotations

import json
import logging
import socket
import threading
from pathlib import Path
from typing import Any

import pytest
from kubernetes.client.exceptions import ApiException
from kubernetes.dynamic import exceptions as dynamic_exceptions
from urllib3.exceptions import MaxRetryError

from reconciler.cluster.kube import connect
from reconciler.cluster.kube_errors import translated
from reconciler.core.model import ClusterAccess
from reconciler.errors import (
    AccessError,
    ConflictError,
    ForbiddenError,
    ImmutableFieldError,
    InvalidObjectError,
    NotFoundError,
    PermanentError,
    ReconcilerError,
    ServerError,
    ThrottledError,
    TransientError,
)


def _dynamic_error(
    status: int,
    message: str = "boom",
    headers: dict[str, str] | None = None,
    details: dict[str, Any] | None = None,
) -> Exception:
    error = ApiException(status=status, reason="Reason")
    details = {"x": "s3cr3t"} if details is None else details
    error.body = json.dumps({"kind": "Status", "message": message, "details": details})
    error.headers = headers or {}
    try:
        raise error
    except ApiException as raised:
        translate: Any = dynamic_exceptions.api_exception
        result: Exception = translate(raised)
        return result


@pytest.mark.parametrize(
    ("status", "expected", "transient"),
    [
        (404, NotFoundError, False),
        (409, ConflictError, True),
        (422, InvalidObjectError, False),
        (400, InvalidObjectError, False),
        (401, ForbiddenError, False),
        (403, ForbiddenError, False),
        (500, ServerError, True),
        (503, ServerError, True),
    ],
)
def test_status_codes_map_to_our_errors(
    status: int, expected: type[ReconcilerError], transient: bool
) -> None:
    with pytest.raises(expected) as raised, translated("apply Deployment/ns/x"):
        raise _dynamic_error(status, "the reason")

    assert isinstance(raised.value, TransientError) is transient
    assert isinstance(raised.value, PermanentError) is not transient
    assert str(raised.value).startswith(f"apply Deployment/ns/x: {status} the reason")
    assert "s3cr3t" not in str(raised.value)


def test_throttling_carries_the_servers_delay() -> None:
    with pytest.raises(ThrottledError) as raised, translated("list Pod"):
        raise _dynamic_error(429, "slow down", {"Retry-After": "17"})

    assert raised.value.retry_after == 17.0


def _invalid(message: str, causes: list[dict[str, str]]) -> Exception:
    details = {"name": "x", "group": "batch", "kind": "Job", "causes": causes}
    return _dynamic_error(422, message, details=details)


def test_a_long_refusal_keeps_each_causes_field_and_reason_after_a_dumped_value() -> None:
    dump = "{" + ", ".join(f'"Field{i}": null' for i in range(200)) + "}"
    causes = [
        {"reason": "FieldValueInvalid", "field": "spec.template.spec",
         "message": f"Invalid value: {dump}: field is immutable"},
        {"reason": "FieldValueRequired", "field": "spec.selector", "message": "Required value"},
    ]  # fmt: skip
    message = f'Job.batch "x" is invalid: [spec.template.spec: Invalid value: {dump}: ...]'

    with pytest.raises(ImmutableFieldError) as raised, translated("apply Job/ns/x"):
        raise _invalid(message, causes)

    text = str(raised.value)
    assert text.startswith('apply Job/ns/x: 422 Job.batch "x" is invalid: spec.template.spec: ')
    assert "field is immutable; spec.selector: Required value" in text
    assert " ... " in text
    assert len(text) < 400


def test_a_short_refusal_is_kept_whole_and_is_no_immutable_error() -> None:
    with pytest.raises(InvalidObjectError) as raised, translated("apply Job/ns/x"):
        raise _invalid('Job.batch "x" is invalid: spec.selector: Required value', [])

    assert not isinstance(raised.value, ImmutableFieldError)
    assert str(raised.value).endswith('Job.batch "x" is invalid: spec.selector: Required value')


def test_an_escalate_refusal_keeps_every_permission_on_one_line_and_says_what_grants_them() -> None:
    # the real API server's text (tests/e2e/test_least_privilege.py gets it from one), ten rules
    rules = [
        f'{{APIGroups:["g{i}.example.io"], Resources:["things{i}"], Verbs:["get" "list"]}}'
        for i in range(10)
    ]
    message = (
        'clusterroles.rbac.authorization.k8s.io "op" is forbidden: user '
        '"system:serviceaccount:ns:reconciler" (groups=["system:serviceaccounts" '
        '"system:serviceaccounts:ns" "system:authenticated"]) is attempting to grant RBAC '
        "permissions not currently held:\n" + "\n".join(rules)
    )

    with pytest.raises(ForbiddenError) as raised, translated("apply ClusterRole/op"):
        raise _dynamic_error(403, message, details={})

    text = str(raised.value)
    assert "\n" not in text
    assert text.startswith(
        'apply ClusterRole/op: 403 clusterroles.rbac.authorization.k8s.io "op" is forbidden: '
        'user "system:serviceaccount:ns:reconciler" is attempting to grant RBAC permissions not '
        f"currently held: {rules[0]}; {rules[1]}; "
    )
    assert f"{rules[7]} (and 2 more) (the identity may grant only what it holds: give it " in text
    assert rules[8] not in text


def test_network_failures_are_transient() -> None:
    with pytest.raises(ServerError, match="cannot reach the API server"), translated("get x"):
        raise MaxRetryError(pool=None, url="https://10.0.0.1", reason=None)  # type: ignore[arg-type]


def test_connect_without_credentials_is_an_access_error(tmp_path: object) -> None:
    with pytest.raises(AccessError, match="needs --kubeconfig-dir"):
        connect(ClusterAccess(kubeconfig_file="a.yaml"), name="rt")
    with pytest.raises(AccessError, match="rt: cannot use context nowhere"):
        connect(ClusterAccess(context="nowhere"), name="rt")


# -- a server that cannot be reached: its URL, the cause and a hint ----------


def _kubeconfig(tmp_path: Path, server: str) -> Path:
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "c", "cluster": {"server": server}}],
        "users": [{"name": "u", "user": {"token": "t0ps3cr3t-token"}}],
        "contexts": [{"name": "x", "context": {"cluster": "c", "user": "u"}}],
        "current-context": "x",
    }
    (tmp_path / "k.yaml").write_text(json.dumps(config))
    return tmp_path


def _unreachable(tmp_path: Path, server: str) -> str:
    folder = _kubeconfig(tmp_path, server)
    with pytest.raises(ServerError) as caught:
        connect(ClusterAccess(kubeconfig_file="k.yaml"), name="rt", kubeconfig_dir=folder)
    message = str(caught.value)
    assert "t0ps3cr3t" not in message
    assert isinstance(caught.value, TransientError)
    return message


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def test_a_refused_connection_names_the_server_and_what_to_check(tmp_path: Path) -> None:
    port = _free_port()

    message = _unreachable(tmp_path, f"https://127.0.0.1:{port}")

    assert f"cannot reach the API server https://127.0.0.1:{port}: connection refused" in message


def test_an_unreachable_server_is_tried_once_and_only_our_error_names_it(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """One unreachable runtime does not make the client log three urllib3 'Retrying' warnings per
    request (its own retries, under ours) and root-logger errors ('load cache error: ...'), none
    naming the runtime."""
    port = _free_port()

    with caplog.at_level(logging.DEBUG):
        message = _unreachable(tmp_path, f"https://127.0.0.1:{port}")

    assert message.startswith("rt: ")
    assert [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING] == []
    assert not [r for r in caplog.records if "Retrying" in r.getMessage()]


def test_no_kubeconfig_at_all_says_what_to_do(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A missing kubeconfig says what to do, not the client's 'Invalid kube-config file. No
    configuration found.' alone."""
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.delenv("KUBECONFIG", raising=False)  # naming no file: see test_kube_flags.py

    with pytest.raises(AccessError) as caught:
        connect(ClusterAccess(context="kind-dev"), name="dev")

    assert str(caught.value) == (
        "dev: cannot use context kind-dev: Invalid kube-config file. No configuration found. "
        "(no kubeconfig: set KUBECONFIG or write ~/.kube/config for this user, or give the "
        "runtime spec.cluster.kubeconfigFile with --kubeconfig-dir, or kubeconfigSecret)"
    )


def test_a_name_that_does_not_resolve_says_so(tmp_path: Path) -> None:
    message = _unreachable(tmp_path, "https://api.cluster.invalid:6443")

    assert "https://api.cluster.invalid:6443: the host name does not resolve" in message


def test_an_endpoint_that_does_not_speak_tls_says_so(tmp_path: Path) -> None:
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen(8)
        port = server.getsockname()[1]
        stop = threading.Event()

        def answer_in_plain_http() -> None:
            server.settimeout(0.2)
            while not stop.is_set():
                try:
                    peer, _ = server.accept()
                except OSError:
                    continue
                with peer:
                    peer.sendall(b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n")

        thread = threading.Thread(target=answer_in_plain_http, daemon=True)
        thread.start()
        try:
            message = _unreachable(tmp_path, f"https://127.0.0.1:{port}")
        finally:
            stop.set()
            thread.join(timeout=5)

    assert "the TLS handshake failed" in message


def test_refused_credentials_carry_a_hint() -> None:
    with pytest.raises(ForbiddenError) as caught, translated("list Pod"):
        raise _dynamic_error(401, "Unauthorized")

    assert "renew the token or client certificate" in str(caught.value)


def test_a_kubeconfig_that_cannot_be_used_says_why(tmp_path: Path) -> None:
    (tmp_path / "k.yaml").write_text("apiVersion: v1\nkind: Config\n")

    with pytest.raises(AccessError) as caught:
        connect(ClusterAccess(kubeconfig_file="k.yaml"), name="rt", kubeconfig_dir=tmp_path)

    assert "ConfigException" not in str(caught.value)
    assert str(caught.value).startswith("rt: cannot use kubeconfig file k.yaml: ")
