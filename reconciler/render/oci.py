"""Pulls of chart archives from OCI registries and HTTP chart repositories (edge: network).

The client is Helm's own (Helm v4's registry client and chart downloader, through the pinned
``helm-python-sdk``, the engine :mod:`reconciler.render.helm` renders with): the ORAS-based OCI
client Helm uses for ``helm pull oci://...``, and its HTTP repository downloader, which reads
``index.yaml``. An OCI artifact is resolved by its tag first (a tag whose digest differs from the
pinned one is refused, naming both), then pulled **by digest**, so the registry can only hand
over that content. Credentials are given to a client of this pull only: an OCI login is kept in
a private, temporary credentials file (never Helm's own), an HTTP repository gets them with the
request; neither is ever logged or put in a message. Callers: :mod:`reconciler.render.sources`.
"""

from __future__ import annotations

import re
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from reconciler.errors import RenderError, TransientError

#: Helm's messages for a registry or repository that cannot be reached now (may pass).
_UNREACHABLE = re.compile(
    r"dial tcp|connection refused|connection reset|no such host|timeout|EOF|"
    r"server misbehaving|status code 50\d|: 50\d "
)
#: Helm's messages for a registry or repository that wants other (or any) credentials.
_REFUSED_LOGIN = re.compile(r"unauthori[sz]ed|credential|denied|forbidden|\b40[13]\b", re.I)
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
    import helm_python

    helm_python.pull(
        artifact.chart,
        repo_url=artifact.url,
        version=artifact.version,
        destination=into,
        username=login.username if login is not None else None,
        password=login.password if login is not None else None,
    )


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
