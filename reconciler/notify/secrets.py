"""Endpoint secrets (a webhook URL that is a credential, an API token), read where the daemon's
operator put them and never from the config repo (C6): a file in ``--notification-secrets-dir``
(a mounted Secret, say) or a key of a Secret in the daemon's namespace that carries the label
:data:`SECRET_LABEL`. The label is the operator's consent: without it, a commit could name any
Secret of the namespace (a runtime's kubeconfig) and have it sent to a URL of its choosing.

A token goes only to the hosts the operator named (:class:`TokenHosts`: ``api.github.com``,
``gitlab.com`` and each ``--notification-token-host``), over https (http only to a loopback
host): a commit may change an endpoint's ``url``, and must not be able to send a token
elsewhere with it.

Values are read at each delivery (a rotated Secret is used at once), kept in memory for that
delivery only, and never logged: errors name where a value is kept, never the value.
Callers: :mod:`reconciler.notify.delivery`, the daemon's command (which builds a reader).
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol
from urllib.parse import urlsplit

from reconciler.core.endpoints import SecretRef
from reconciler.core.objects import Body, ObjectRef
from reconciler.errors import AccessError

#: The label a Secret needs before a notification endpoint may read it.
SECRET_LABEL = "reconciler.dev/notifications"  # noqa: S105 (a label name)
#: The largest secret value read (a URL or a token).
MAX_SECRET = 16 * 1024

#: A host (lower-case) and a port (``None``: the scheme's default).
TokenHost = tuple[str, int | None]
#: Where a token may always go: the commit status APIs' default hosts.
DEFAULT_TOKEN_HOSTS: tuple[TokenHost, ...] = (("api.github.com", None), ("gitlab.com", None))
_LOOPBACK = frozenset({"127.0.0.1", "::1", "localhost"})
_PORTS = {"https": 443, "http": 80}


@dataclass(frozen=True, slots=True)
class TokenHosts:
    """The hosts an endpoint's token may go to: :data:`DEFAULT_TOKEN_HOSTS` and ``named``."""

    named: tuple[TokenHost, ...] = ()

    def allows(self, url: str) -> bool:
        """Whether a token may go to ``url``: https to one of the hosts (on the port named,
        else 443), or http to a loopback one."""
        try:
            parts = urlsplit(url)
        except ValueError:  # a bracket that is no IPv6 host: no host a token may go to
            return False
        scheme, host = parts.scheme.lower(), (parts.hostname or "").lower()
        if scheme not in _PORTS or (scheme == "http" and host not in _LOOPBACK):
            return False
        try:
            port = parts.port or _PORTS[scheme]
        except ValueError:
            return False
        return any(
            name == host and (wanted or _PORTS[scheme]) == port
            for name, wanted in (*DEFAULT_TOKEN_HOSTS, *self.named)
        )


#: Reads one key of a Secret by (name, key).
FetchSecret = Callable[[str, str], str]


class Reads(Protocol):
    """What reads Secrets: a cluster (:class:`reconciler.notify.home.HomeCluster`)."""

    def get(self, ref: ObjectRef) -> Body | None:
        """The object, or ``None`` when it does not exist."""


class SecretReader:
    """Reads :class:`SecretRef` values from ``folder`` (``--notification-secrets-dir``) and
    through ``fetch_secret`` (a Secret of the daemon's namespace); either may be absent."""

    def __init__(self, folder: Path | None = None, fetch_secret: FetchSecret | None = None):
        self.folder = folder
        self.fetch_secret = fetch_secret

    def read_value(self, ref: SecretRef) -> str:
        """The value ``ref`` names, without surrounding whitespace; :class:`AccessError`
        naming the place (never the value) when it cannot be read."""
        if ref.file is not None:
            return self._read_file(ref.file)
        if self.fetch_secret is None:
            raise AccessError(f"{ref.describe()}: this daemon reaches no cluster to read it from")
        return self.fetch_secret(ref.secret or "", ref.key).strip()

    def _read_file(self, name: str) -> str:
        if self.folder is None:
            raise AccessError(f"file {name}: the daemon was given no --notification-secrets-dir")
        path = self.folder / name
        if "/" in name or name.startswith(".") or not path.is_file():
            raise AccessError(f"file {name}: no such file in --notification-secrets-dir")
        try:
            with path.open("rb") as handle:
                data = handle.read(MAX_SECRET + 1)
            if len(data) > MAX_SECRET:
                raise AccessError(f"file {name}: larger than {MAX_SECRET} bytes")
            return data.decode("utf-8").strip()
        except (OSError, UnicodeDecodeError) as error:
            raise AccessError(f"file {name}: cannot be read ({type(error).__name__})") from error


def secrets_of(cluster: Reads, namespace: str) -> FetchSecret:
    """Reads keys of labelled Secrets of ``namespace`` in ``cluster`` (the daemon's own)."""

    def fetch_secret(name: str, key: str) -> str:
        where = f"Secret {namespace}/{name}"
        secret = cluster.get(ObjectRef("v1", "Secret", namespace, name))
        if secret is None:
            raise AccessError(f"{where}: not found")
        labels = (secret.get("metadata") or {}).get("labels") or {}
        if labels.get(SECRET_LABEL) != "true":
            raise AccessError(
                f'{where}: lacks the label {SECRET_LABEL}: "true" that lets notifications read it'
            )
        encoded = (secret.get("data") or {}).get(key)
        if encoded is None:
            raise AccessError(f"{where}: has no key '{key}'")
        try:
            return base64.b64decode(encoded, validate=True).decode("utf-8")
        except (binascii.Error, UnicodeDecodeError) as error:
            raise AccessError(f"{where}: key '{key}' is not base64 of UTF-8 text") from error

    return fetch_secret
