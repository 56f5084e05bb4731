"""Pulls of chart archives from OCI registries and HTTP chart repositories (edge: network).

The client is Helm's own (Helm v4's registry client and chart downloader, through the pinned
``helm-python-sdk``, the engine :mod:`reconciler.render.helm` renders with): the ORAS-based OCI
client Helm uses for ``helm pull oci://...``, and its HTTP repository downloader, which reads
``index.yaml``. An OCI artifact is resolved by its tag first (a tag whose digest differs from the
pinned one is refused, naming both), then pulled **by digest**, so the registry can only hand
over that content. Credentials are given to a client of this pull only: an OCI login is kept in
a private, temporary credentials file (never Helm's own); an HTTP repository gets them with the
request for its ``index.yaml``, and with the archive's only when the index puts the archive on
the repository's own scheme, host and port (an index may name any host; Helm's rule without
``--pass-credentials``); neither is ever logged or put in a message. Callers:
:mod:`reconciler.render.sources`.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from reconciler.errors import RenderError, TransientError

#: Helm's messages for a registry or repository that cannot be reached now (may pass).
_UNREACHABLE = re.compile(
    r"dial tcp|connection refused|connection reset|no such host|timeout|EOF|"
    r"server misbehaving|status code 50\d|: 50\d "
)
#: Helm's messages for a registry or repository that wants other (or any) credentials.
_REFUSED_LOGIN = re.compile(r"unauthori[sz]ed|credential|denied|forbidden|\b40[13]\b", re.I)
#: The port of each scheme when a URL names none.
_DEFAULT_PORTS = {"http": 80, "https": 443}
#: How long a pull that failed because the registry could not be reached waits to be retried.
RETRY_SECONDS = 60.0


@dataclass(frozen=True, slots=True)
class Login:
    """A user name and password (or token) for one registry host; the password is not shown."""

    username: str
    password: str = field(repr=False)


@dataclass(frozen=True, slots=True)
class Artifact:
    """What to pull: ``url`` (``oci://host/path/name`` or an HTTP repository), ``chart`` (the
    name in an HTTP repository's index), ``version`` and the pinned ``digest``."""

    url: str
    version: str
    digest: str
    chart: str = ""
    plain_http: bool = False

    @property
    def oci(self) -> bool:
        """Whether the artifact is in an OCI registry (else an HTTP chart repository)."""
        return self.url.startswith("oci://")

    @property
    def host(self) -> str:
        """The registry's or repository's host (and port), for its credentials."""
        return self.url.split("://", 1)[1].split("/", 1)[0]

    @property
    def shown(self) -> str:
        """The artifact for messages: its URL (and chart) and version."""
        name = f"{self.url} chart {self.chart}" if self.chart else self.url
        return f"{name} {self.version}"


class DigestMismatchError(RenderError):
    """The registry's artifact for the pinned version has another digest than the pin."""


def pull_archive(artifact: Artifact, login: Login | None, into: Path) -> Path:
    """The chart archive of ``artifact``, pulled into the folder ``into``. Raises
    :class:`DigestMismatchError`, :class:`RenderError` (not found, refused) or
    :class:`TransientError` (the registry cannot be reached now)."""
    import helm_python  # the engine (85 MB, ~50 ms to load): only when a chart is pulled

    try:
        if artifact.oci:
            _pull_oci(artifact, login, into)
        else:
            _pull_http(artifact, login, into)
    except helm_python.HelmError as error:
        raise _pull_error(artifact, str(error), login) from None
    archives = sorted(into.glob("*.tgz"))
    if len(archives) != 1:
        raise RenderError(f"{artifact.shown}: the pull gave {len(archives)} chart archives")
    return archives[0]


def _pull_oci(artifact: Artifact, login: Login | None, into: Path) -> None:
    import tempfile  # only when something is pulled (startup time of every command)

    import helm_python

    plain = artifact.plain_http
    with tempfile.TemporaryDirectory(prefix="reconciler-registry-") as private:
        credentials = Path(private) / "registry.json"
        with helm_python.RegistryClient(plain_http=plain, credentials_file=credentials) as client:
            if login is not None:
                client.login(artifact.host, login.username, login.password, plain_http=plain)
            found = client.resolve(f"{artifact.url}:{artifact.version}")["digest"]
            if found != artifact.digest:
                raise DigestMismatchError(
                    f"{artifact.shown}: the registry holds digest {found}, "
                    f"source.yaml pins {artifact.digest}; refused (pin the digest you reviewed)"
                )
            reference = f"{artifact.url}@{artifact.digest}"
            client.pull(reference, destination=into, plain_http=plain)


def _pull_http(artifact: Artifact, login: Login | None, into: Path) -> None:
    """The archive the repository's ``index.yaml`` lists for the pinned version, fetched with
    the credentials only when it is on the repository's own scheme, host and port (Helm's
    rule without ``--pass-credentials``: an index may name any host for an archive)."""
    import helm_python

    user, password = (login.username, login.password) if login is not None else (None, None)
    index = helm_python.repo_index(artifact.url, username=user, password=password)
    archive = archive_url(index, artifact)
    if not same_origin(archive, artifact.url):
        user = password = None
    helm_python.pull(archive, destination=into, username=user, password=password)


def archive_url(index: Mapping[str, Any], artifact: Artifact) -> str:
    """Where ``index`` (a repository's ``index.yaml``) puts the archive of the pinned chart
    version: its first URL, resolved against the repository's URL as Helm resolves it."""
    entries = index.get("entries") if isinstance(index, Mapping) else None
    versions = entries.get(artifact.chart) if isinstance(entries, Mapping) else None
    listed = [
        v
        for v in versions or ()
        if isinstance(v, Mapping) and str(v.get("version")) == artifact.version
    ]
    urls = listed[0].get("urls") if listed else None
    if not isinstance(urls, list) or not urls or not isinstance(urls[0], str):
        message = (
            f"{artifact.shown} cannot be pulled: the repository's index.yaml lists no archive of it"
        )
        raise RenderError(message)
    from urllib.parse import urljoin

    found = urljoin(artifact.url.rstrip("/") + "/", urls[0])
    if not found.lower().startswith(("http://", "https://")):
        raise RenderError(
            f"{artifact.shown}: the repository's index.yaml names its archive at a URL "
            "other than http(s); refused"
        )
    return found


def same_origin(url: str, other: str) -> bool:
    """Whether ``url`` and ``other`` have the same scheme, host and port (default ports
    filled in): where a repository's credentials may go."""
    return _origin(url) == _origin(other)


def _origin(url: str) -> tuple[str, str, int | None]:
    from urllib.parse import urlsplit

    parts = urlsplit(url)
    scheme = parts.scheme.lower()
    try:
        port = parts.port or _DEFAULT_PORTS.get(scheme)
    except ValueError:  # not a port number: never equal to a real origin
        return scheme, "", -1
    return scheme, (parts.hostname or "").lower(), port


def _pull_error(artifact: Artifact, text: str, login: Login | None) -> RenderError | TransientError:
    message = " ".join(text.split())
    if login is not None and login.password:
        message = message.replace(login.password, "***")
    if _UNREACHABLE.search(message):
        return TransientError(
            f"{artifact.shown} cannot be fetched now ({message}); retried later, and a daemon "
            "keeps the last good render in force until it can",
            RETRY_SECONDS,
        )
    hint = ""
    if _REFUSED_LOGIN.search(message):
        hint = (
            " (its credentials: the file $RECONCILER_REGISTRY_CREDENTIALS names; docs/sources.md)"
        )
    return RenderError(f"{artifact.shown} cannot be pulled: {message}{hint}")
