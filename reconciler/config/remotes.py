"""Which git remotes may be fetched, and which refs asked for (pure).

A URL that comes from a commit (``channelsFrom.git``) may only be ``https://``, ``ssh://``,
``git://`` or scp-like ``user@host:path``. One the user gave on the command line
(``reconciler daemon --repo``) may also be a local path or a ``file://`` URL. Never: a value
starting with ``-`` (git would read it as an option), a remote helper (``ext::...``), any other
transport (``http://``, ``file://`` from a commit), or credentials inside the URL (give the
daemon ``--token-file`` or ``--ssh-key-file`` instead).

:func:`remote_problem` says why a URL is refused without repeating it (it may hold a password
or a payload); the validator reports it with its place (C6), the git source refuses to run git
on it, and :func:`allowed_protocols` names the transports git itself is limited to, so a
redirect or a submodule cannot reach ``ext::`` or ``file://`` either. Callers: validation,
the loader, ``reconciler.source.git``.

Credentials (the daemon's ``--token-file`` and ``--ssh-key-file``) go only to the hosts the
operator named: the host of ``--repo`` and each ``--credential-host``, never to a host only a
commit names. :func:`credential_origin` is where a credential for a URL would go (an https or
ssh host and port), :func:`parse_credential_host` reads the flag and :func:`may_get_credentials`
decides.
"""

from __future__ import annotations

import re

#: Transports git may use for a remote from a commit (git's own protocol names).
NETWORK_PROTOCOLS = ("https", "ssh", "git")

_FORMS = "use https://, ssh://, git:// or user@host:path"
_ONLY_COMMAND_LINE = " (only a remote given on the command line may be local)"
_CREDENTIALS = "has credentials inside the URL; give the daemon --token-file or --ssh-key-file"
_URL = re.compile(r"([A-Za-z][A-Za-z0-9+.-]*)://(.*)", re.DOTALL)
_HELPER = re.compile(r"[A-Za-z0-9][A-Za-z0-9+.-]*::")
_HOST = re.compile(r"(\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9][A-Za-z0-9._-]*)(:[0-9]{1,5})?")
_SCP = re.compile(r"(?:([A-Za-z0-9_][A-Za-z0-9._-]*)@)?([A-Za-z0-9][A-Za-z0-9._-]*):(.+)")
_REF = re.compile(r"[A-Za-z0-9_][A-Za-z0-9._/+-]*")

#: The transports a credential may go over, with their default ports.
CREDENTIAL_PORTS = {"https": 443, "ssh": 22}

#: A ``--credential-host``: a host name (lower-case) and a port (``None``: the default port of
#: https for the token, of ssh for the key).
CredentialHost = tuple[str, int | None]


def remote_problem(url: str, *, local: bool = False) -> str | None:
    """Why git may not fetch ``url`` (``None`` when it may). ``local`` allows local paths and
    ``file://`` URLs: only for a URL the user gave on the command line."""
    if not url:
        return "is empty"
    if any(ord(c) < 0x20 or ord(c) == 0x7F for c in url):
        return "has control characters"
    if url.startswith("-"):
        return "starts with '-' (git would read it as an option)"
    found = _URL.fullmatch(url)
    if found is not None:
        return _url_problem(found.group(1).lower(), found.group(2), local)
    if _HELPER.match(url):
        return f"names a git remote helper (such as ext::), which is refused; {_FORMS}"
    if not _is_scp_like(url):
        return None if local else f"is a local path{_ONLY_COMMAND_LINE}; {_FORMS}"
    if re.search(r"\s", url):
        return "has spaces"
    if _has_password(url):
        return _CREDENTIALS
    scp = _SCP.fullmatch(url)
    if scp is None:
        return f"is not a valid user@host:path; {_FORMS}"
    if scp.group(3).startswith("-"):
        return "has a path starting with '-'"
    return None


def is_local(url: str) -> bool:
    """Whether git reads ``url`` as a local path (no ``scheme://``, no ``host:path``, no
    ``helper::``)."""
    return _URL.fullmatch(url) is None and not _HELPER.match(url) and not _is_scp_like(url)


def allowed_protocols(local: bool) -> tuple[str, ...]:
    """The transports git may use for a remote (``file`` only for a command-line path)."""
    return (*NETWORK_PROTOCOLS, "file") if local else NETWORK_PROTOCOLS


def ref_problem(ref: str) -> str | None:
    """Why ``ref`` is not a plain branch, tag or commit id (``None`` when it is)."""
    if (
        _REF.fullmatch(ref) is None
        or ".." in ref
        or "//" in ref
        or ref.endswith(("/", ".", ".lock"))
    ):
        return "must be a branch, tag or commit id (letters, digits and . _ / + -)"
    return None


def _url_problem(scheme: str, rest: str, local: bool) -> str | None:
    if scheme == "file":
        return None if local else f"is a local file:// URL{_ONLY_COMMAND_LINE}; {_FORMS}"
    if scheme not in NETWORK_PROTOCOLS:
        return f"uses a transport other than https, ssh and git; {_FORMS}"
    if re.search(r"\s", rest):
        return "has spaces"
    authority = re.split(r"[/?#]", rest, maxsplit=1)[0]
    user, at, host = authority.rpartition("@")
    if at and (scheme != "ssh" or ":" in user):
        return _CREDENTIALS
    if at and not re.fullmatch(r"[A-Za-z0-9_][A-Za-z0-9._-]*", user):
        return "has an invalid user name"
    if _HOST.fullmatch(host) is None:
        return "has no valid host name"
    return None


def _is_scp_like(url: str) -> bool:
    """git's rule: a colon before any slash makes ``host:path`` (ssh)."""
    colon, slash = url.find(":"), url.find("/")
    return colon > 0 and (slash < 0 or colon < slash)


def _has_password(url: str) -> bool:
    head = url.split("/", 1)[0]
    return "@" in head and ":" in head.rsplit("@", 1)[0]


def credential_origin(url: str) -> tuple[str, str, int] | None:
    """The transport (``https`` or ``ssh``), host (lower-case) and port a credential for
    ``url`` would go to; ``None`` for a remote no credential goes to (``git://``, a local
    path, a URL git may not fetch)."""
    if remote_problem(url, local=True) is not None:
        return None
    found = _URL.fullmatch(url)
    if found is not None:
        scheme = found.group(1).lower()
        if scheme not in CREDENTIAL_PORTS:
            return None
        authority = re.split(r"[/?#]", found.group(2), maxsplit=1)[0].rpartition("@")[2]
        host = _HOST.fullmatch(authority)
        if host is None:
            return None
        port = int(host.group(2)[1:]) if host.group(2) else CREDENTIAL_PORTS[scheme]
        return scheme, host.group(1).lower(), port
    scp = _SCP.fullmatch(url) if _is_scp_like(url) else None
    return None if scp is None else ("ssh", scp.group(2).lower(), CREDENTIAL_PORTS["ssh"])


def parse_credential_host(text: str) -> CredentialHost:
    """``HOST`` or ``HOST:PORT`` (``--credential-host``); raises :class:`ValueError` saying
    what is wrong (the value is not secret: it is repeated)."""
    host = _HOST.fullmatch(text.strip())
    if host is None:
        raise ValueError(f"'{text}' is not HOST or HOST:PORT (no scheme, user or path)")
    return host.group(1).lower(), int(host.group(2)[1:]) if host.group(2) else None


def repo_credential_host(url: str) -> CredentialHost | None:
    """The host and port of the followed repository (``--repo``): its credentials' own place."""
    origin = credential_origin(url)
    return None if origin is None else (origin[1], origin[2])


def may_get_credentials(url: str, hosts: tuple[CredentialHost, ...]) -> bool:
    """Whether a credential may go to ``url``: its host is one of ``hosts``, on the port given
    there or, when none is, on the transport's default port."""
    origin = credential_origin(url)
    if origin is None:
        return False
    scheme, host, port = origin
    return any(
        name == host and (wanted if wanted is not None else CREDENTIAL_PORTS[scheme]) == port
        for name, wanted in hosts
    )
