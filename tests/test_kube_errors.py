"""The real adapter translates the client's exceptions once, into our error hierarchy.

Built from the client's own exception types (no API server here); the contract suite covers the
adapter's behaviour against a real cluster when one is configured.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from kubernetes.client.exceptions import ApiException
from kubernetes.dynamic import exceptions as dynamic_exceptions
from urllib3.exceptions import MaxRetryError

from reconciler.cluster.kube import _translated, connect
from reconciler.core.model import ClusterAccess
from reconciler.errors import (
    AccessError,
    ConflictError,
    ForbiddenError,
    InvalidObjectError,
    NotFoundError,
    PermanentError,
    ReconcilerError,
    ServerError,
    ThrottledError,
    TransientError,
)


def _dynamic_error(
    status: int, message: str = "boom", headers: dict[str, str] | None = None
) -> Exception:
    error = ApiException(status=status, reason="Reason")
    error.body = json.dumps({"kind": "Status", "message": message, "details": {"x": "s3cr3t"}})
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
    with pytest.raises(expected) as raised, _translated("apply Deployment/ns/x"):
        raise _dynamic_error(status, "the reason")

    assert isinstance(raised.value, TransientError) is transient
    assert isinstance(raised.value, PermanentError) is not transient
    assert str(raised.value) == f"apply Deployment/ns/x: {status} the reason"
    assert "s3cr3t" not in str(raised.value)


def test_throttling_carries_the_servers_delay() -> None:
    with pytest.raises(ThrottledError) as raised, _translated("list Pod"):
        raise _dynamic_error(429, "slow down", {"Retry-After": "17"})

    assert raised.value.retry_after == 17.0


def test_network_failures_are_transient() -> None:
    with pytest.raises(ServerError, match="cannot reach the API server"), _translated("get x"):
        raise MaxRetryError(pool=None, url="https://10.0.0.1", reason=None)  # type: ignore[arg-type]


def test_connect_without_credentials_is_an_access_error(tmp_path: object) -> None:
    with pytest.raises(AccessError, match="needs --kubeconfig-dir"):
        connect(ClusterAccess(kubeconfig_file="a.yaml"), name="rt")
    with pytest.raises(AccessError, match="rt: cannot use context nowhere"):
        connect(ClusterAccess(context="nowhere"), name="rt")
