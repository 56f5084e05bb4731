"""Which names name a credential, and which values only refer to one (rule C6) (pure).

One rule for every name the credential scan meets: a YAML key (``dbPassword``), an environment
variable (``DB_PASS``), a name set inside embedded text (``spring.datasource.password=``,
``"api_key": ...``, ``--password=``). A name is split into words (``-``, ``_``, ``.``, spaces and
camelCase) and names a credential when its **last** word says so: ``password``, ``passwd``,
``passphrase``, ``token``, ``secret``, ``apikey``, ``secretkey``, ``privatekey``; ``pass`` or
``pwd`` after another word (``DB_PASS``; ``PWD`` alone is the working directory); ``key`` after
``api``, ``secret``, ``private``, ``signing``, ``encryption``, ``master``, ``hmac`` or
``account`` (``aws_secret_access_key``, ``AccountKey``); or a name run together in lower case
ending so (``pgpassword``, ``xapikey``). So ``passwordFile``, ``tokenSecretRef``,
``passwordKey``, ``secretName`` and ``tokenTTL`` only point at or describe one, and
``existingSecret``, ``tlsSecret``, ``caSecret``, ``imagePullSecret``, ``auth-secret`` (nginx's
annotation) name a Secret.
``client-key-data`` (a kubeconfig's) and ``.dockerconfigjson`` (a registry login) are
credentials by name.

A value that a program substitutes is a reference, not a credential: ``${VAR}``, ``$VAR``,
``$(VAR)`` (Kubernetes' own), ``{{ .Values.x }}``, ``<password>``, and an empty value or a mask
(``***``). A literal such as ``changeme`` is not a reference: what is committed is what the
cluster gets, and everyone who reads the repo knows it. Callers: the credential scan
(:mod:`reconciler.config.credentials`, :mod:`reconciler.config.credential_text`).
"""

from __future__ import annotations

import functools
import re

#: Last words that make a name a credential's.
_LAST_WORDS = frozenset(
    {"password", "passwd", "passphrase", "token", "secret", "apikey", "secretkey", "privatekey"}
)
#: Last words that do so after another word only.
_SHORT_LAST_WORDS = frozenset({"pass", "pwd"})
#: Words that make a last word ``key`` a secret key.
_KEY_KINDS = frozenset(
    {"api", "secret", "private", "signing", "encryption", "master", "hmac", "account"}
)
#: Endings of a name run together in lower case (``pgpassword``).
_RUN_TOGETHER = ("password", "passwd", "apikey", "secretkey", "privatekey", "token")
#: Names that are credentials whatever their words (without ``-``, ``_``, ``.``).
_WHOLE_NAMES = frozenset({"clientkeydata", "dockerconfigjson", "dockercfg"})
#: Words before a last word ``secret`` that make the name a Secret's (``tlsSecret: web-tls``).
_SECRET_KINDS = frozenset(
    {"existing", "tls", "ssl", "ca", "cert", "certificate", "pull", "kubeconfig", "name", "auth"}
)
#: Names longer than this are not names (a 5 MiB key is not looked at word by word).
_LONGEST = 256

_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])")
_SEPARATORS = re.compile(r"[-_.\s/]++")
_VARIABLE = re.compile(r"\$[A-Za-z_][A-Za-z0-9_]{0,127}+")


@functools.lru_cache(maxsize=1 << 14)
def is_credential_name(name: str) -> bool:
    """Whether ``name`` names a credential (see the module docstring)."""
    words = name_words(name)
    if not words:
        return False
    last = words[-1]
    if last == "secret":
        return _SECRET_KINDS.isdisjoint(words)
    if "".join(words) in _WHOLE_NAMES or last in _LAST_WORDS:
        return True
    if last in _SHORT_LAST_WORDS:
        return len(words) > 1
    if last == "key":
        return not _KEY_KINDS.isdisjoint(words[:-1])
    return len(words) == 1 and last.endswith(_RUN_TOGETHER)


def name_words(name: str) -> list[str]:
    """``name`` split into lower-case words (``aws_secret_access_key``, ``adminPassword``,
    ``X-API-Key``); none for a name too long to be one."""
    if len(name) > _LONGEST:
        return []
    spaced = _CAMEL.sub("_", name)
    return [word.lower() for word in _SEPARATORS.split(spaced) if word]


def is_reference(value: str) -> bool:
    """Whether ``value`` is no credential: empty, a mask or a placeholder that a program fills
    in (see the module docstring); only its start is looked at, for long values too."""
    text = value.strip().strip("\"'")
    if not text or text.lower() in ("null", "none", "~") or set(text) == {"*"}:
        return True
    if text.startswith(("${", "$(", "{{", "<")):
        return True
    return text.startswith("$") and _VARIABLE.fullmatch(text) is not None
