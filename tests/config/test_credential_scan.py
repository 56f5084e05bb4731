"""The credential scan (rule C6): the shapes it catches and the ones it lets pass (table-driven,
each located by file and place), and its time: patterns that cannot backtrack, long values searched
in windows with the time budget looked at before each one, and a scan stopped part way by a budget
with one located diagnostic.

Time is never measured here (``bench/credential_scan_bench.py`` does): that the scan is linear
is shown by the structure of every pattern and by the number of windows (budget looks) growing
with the value, not by a clock.
"""

from __future__ import annotations

import base64
import importlib
import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from reconciler.config import credential_names, credential_text, credentials
from reconciler.config.budget import TimeBudget
from reconciler.config.credential_text import OVERLAP, WINDOW, text_kind, windows
from reconciler.config.credentials import find_inline_credentials
from reconciler.config.yamlsafe import parse_yaml
from reconciler.core import redaction
from reconciler.errors import OverBudgetError
from reconciler.source.loader import ReadOptions, load_repo
from tests.support.clocks import StepClock
from tests.support.repos import RepoFactory, small_repo

#: A value that must never show up in any message.
SECRET = "Zq9-hunter2-s3cr3t"
PEM_RSA = (
    "-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEA7s3cr3t\n-----END RSA PRIVATE KEY-----\n"
)
PEM_SSH = (
    "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjE\n-----END OPENSSH PRIVATE KEY-----\n"
)
KUBECONFIG = {
    "apiVersion": "v1",
    "kind": "Config",
    "clusters": [{"name": "c", "cluster": {"server": "https://k.example.com"}}],
    "users": [{"name": "admin", "user": {"token": SECRET}}],
}
KUBECONFIG_YAML = (
    "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster: {server: 'https://k'}\n"
    f"users:\n- name: admin\n  user: {{token: {SECRET}}}\n"
)
JWT = "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJkZXBsb3kifQ.c2lnbmF0dXJlLW9mLXRoZS10b2tlbg"
LOGIN = base64.b64encode(f"robot:{SECRET}".encode()).decode()


def _b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


# -- documents with a value in one place ----------------------------------------------------------


def _quoted(value: str) -> str:
    return json.dumps(value)  # a JSON string is a YAML double-quoted scalar


def config_map(key: str, value: str) -> tuple[str, str]:
    """A ConfigMap holding ``value`` (a file, often) under ``data.<key>``."""
    head = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c}\ndata:\n"
    text = f"{head}  {key}: {_quoted(value)}\n"
    return text, f"/data/{key}"


def field(key: str, value: str) -> tuple[str, str]:
    """A custom resource (a default configuration) with ``spec.<key>: value``."""
    head = "apiVersion: example.io/v1\nkind: Backend\nmetadata: {name: b}\nspec:\n"
    text = f"{head}  {key}: {_quoted(value)}\n"
    return text, f"/spec/{key}"


def nested(path: str, value: str) -> tuple[str, str]:
    """A custom resource with ``value`` at ``spec.<a>.<b>`` (``path`` is ``a.b``)."""
    outer, inner = path.split(".")
    text = (
        "apiVersion: example.io/v1\nkind: Backend\nmetadata: {name: b}\nspec:\n"
        f"  {outer}:\n    {inner}: {_quoted(value)}\n"
    )
    return text, f"/spec/{outer}/{inner}"


_POD = "/spec/template/spec/containers/0"


def _deployment(container: str) -> str:
    return (
        "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: d}\nspec:\n  template:\n"
        "    spec:\n      containers:\n      - name: app\n        image: example.io/app:1\n"
        + container
    )


def env(name: str, value: str) -> tuple[str, str]:
    """A container with the environment variable ``name`` set to ``value``."""
    text = _deployment(f"        env:\n        - {{name: {name}, value: {_quoted(value)}}}\n")
    return text, f"{_POD}/env/0/value"


def args(*items: str, at: int = 0) -> tuple[str, str]:
    """A container with ``args`` (the finding expected at item ``at``)."""
    text = _deployment(f"        args: {json.dumps(list(items))}\n")
    return text, f"{_POD}/args/{at}"


def annotation(key: str, value: str) -> tuple[str, str]:
    head = "apiVersion: v1\nkind: Service\nmetadata:\n  name: s\n  annotations:\n"
    text = f"{head}    {key}: {_quoted(value)}\n"
    return text, "/metadata/annotations/" + key.replace("~", "~0").replace("/", "~1")


# -- the shapes caught -----------------------------------------------------------------------------

_INLINE = "inline credential"
_IN_TEXT = "' in the text"
CAUGHT: list[tuple[str, tuple[str, str], str]] = [
    # fields named like a credential
    ("db_password", field("db_password", SECRET), "inline credential 'db_password'"),
    (
        "aws_secret_access_key",
        field("aws_secret_access_key", SECRET),
        "inline credential 'aws_secret_access_key'",
    ),
    ("adminPassword", field("adminPassword", "changeme"), "inline credential 'adminPassword'"),
    ("auth.rootPassword", nested("auth.rootPassword", SECRET), "inline credential 'rootPassword'"),
    ("secretKey", field("secretKey", SECRET), "inline credential 'secretKey'"),
    ("privateKey", field("privateKey", SECRET), "inline credential 'privateKey'"),
    ("webhookSecret", field("webhookSecret", SECRET), "inline credential 'webhookSecret'"),
    ("authToken", field("authToken", SECRET), "inline credential 'authToken'"),
    ("X-API-Key", field("X-API-Key", SECRET), "inline credential 'X-API-Key'"),
    ("AccountKey", field("AccountKey", SECRET), "inline credential 'AccountKey'"),
    ("pgpassword", field("pgpassword", SECRET), "inline credential 'pgpassword'"),
    ("smtp.smtpPass", nested("smtp.smtpPass", SECRET), "inline credential 'smtpPass'"),
    # environment variables
    ("env DB_PASS", env("DB_PASS", SECRET), "an environment variable named like a secret"),
    ("env MYSQL_ROOT_PASSWORD", env("MYSQL_ROOT_PASSWORD", SECRET), "an environment variable"),
    ("env REDIS_PWD", env("REDIS_PWD", SECRET), "an environment variable"),
    ("env JWT_SECRET", env("JWT_SECRET", SECRET), "an environment variable"),
    (
        "env JAVA_OPTS -D...password=",
        env("JAVA_OPTS", f"-Xmx1g -Dspring.datasource.password={SECRET}"),
        "inline credential '-Dspring.datasource.password" + _IN_TEXT,
    ),
    # command lines
    ("arg --password=", args(f"--password={SECRET}"), "inline credential '--password" + _IN_TEXT),
    ("arg --db-token=", args("-v", f"--db-token={SECRET}", at=1), "inline credential '--db-token"),
    ("args --db-password x", args("--db-password", SECRET, at=1), "inline credential after"),
    (
        "sh -c mysql --password x",
        args("sh", "-c", f"mysql -u root --password {SECRET} app", at=2),
        "inline credential '--password" + _IN_TEXT,
    ),
    # embedded files
    (
        ".env",
        config_map(".env", f"DB_HOST=db\nDB_PASSWORD={SECRET}\n"),
        "inline credential 'DB_PASSWORD",
    ),
    (
        ".env export",
        config_map("app.env", f"export API_KEY={SECRET}\n"),
        "inline credential 'API_KEY",
    ),
    (
        ".properties =",
        config_map(
            "application.properties",
            f"spring.datasource.url=jdbc:h2:mem\nspring.datasource.password={SECRET}\n",
        ),
        "inline credential 'spring.datasource.password" + _IN_TEXT,
    ),
    (
        ".properties spaced",
        config_map("db.properties", f"db.user = app\ndb.password = {SECRET}\n"),
        "inline credential 'db.password" + _IN_TEXT,
    ),
    (
        ".properties colon",
        config_map("mail.properties", f"mail.smtp.host: smtp\nmail.smtp.password: {SECRET}\n"),
        "inline credential 'mail.smtp.password" + _IN_TEXT,
    ),
    (
        "embedded YAML",
        config_map("app.yaml", f"database:\n  host: db\n  password: {SECRET}\n"),
        "inline credential 'password" + _IN_TEXT,
    ),
    (
        "embedded JSON",
        config_map("config.json", json.dumps({"db": {"host": "db", "password": SECRET}})),
        "inline credential 'password" + _IN_TEXT,
    ),
    (
        "embedded JSON, indented",
        config_map("settings.json", json.dumps({"service": {"api_key": SECRET}}, indent=2)),
        "inline credential 'api_key" + _IN_TEXT,
    ),
    (
        "embedded INI",
        config_map("my.cnf", f"[client]\nuser=root\npassword={SECRET}\n"),
        "inline credential 'password" + _IN_TEXT,
    ),
    # kubeconfigs
    ("kubeconfig as YAML", config_map("config", KUBECONFIG_YAML), "a kubeconfig"),
    ("kubeconfig as JSON", config_map("config", json.dumps(KUBECONFIG)), "a kubeconfig"),
    (
        "kubeconfig as indented JSON",
        config_map("kubeconfig.json", json.dumps(KUBECONFIG, indent=2)),
        "a kubeconfig",
    ),
    (
        "kubeconfig in base64",
        config_map("config.b64", _b64(KUBECONFIG_YAML)),
        "a kubeconfig, base64-encoded",
    ),
    (
        "kubeconfig as JSON in base64",
        field("kubeconfig", _b64(json.dumps(KUBECONFIG))),
        "a kubeconfig, base64-encoded",
    ),
    # registry logins
    (
        ".dockerconfigjson in a ConfigMap",
        config_map(".dockerconfigjson", json.dumps({"auths": {"r.io": {"auth": LOGIN}}})),
        "inline credential '.dockerconfigjson'",
    ),
    (".dockercfg", config_map(".dockercfg", json.dumps({"r.io": {"auth": LOGIN}})), _INLINE),
    (
        "docker config.json auth",
        config_map("config.json", json.dumps({"auths": {"r.io": {"auth": LOGIN}}})),
        "a registry login",
    ),
    (
        "docker config.json password",
        config_map(
            "config.json", json.dumps({"auths": {"r.io": {"username": "u", "password": SECRET}}})
        ),
        "inline credential 'password" + _IN_TEXT,
    ),
    # connection strings and URLs
    (
        "connection string Password=",
        field("connectionString", f"Server=db;Database=app;User Id=sa;Password={SECRET};"),
        "inline credential 'Password" + _IN_TEXT,
    ),
    (
        "ODBC Pwd=",
        field("dsn", f"Driver={{ODBC Driver 18}};Server=db;Uid=sa;Pwd={SECRET};"),
        "inline credential 'Pwd" + _IN_TEXT,
    ),
    (
        "JDBC ?password=",
        field("jdbcUrl", f"jdbc:postgresql://db:5432/app?user=app&password={SECRET}"),
        "inline credential 'password" + _IN_TEXT,
    ),
    ("mongodb URL", field("uri", f"mongodb://app:{SECRET}@db:27017/app"), "a password in a URL"),
    ("redis URL", env("REDIS_URL", f"redis://:{SECRET}@cache:6379/0"), "a password in a URL"),
    # token shapes
    (
        "GitHub ghp_",
        field("note", "ghp_" + "Zq9Xw2Lm4Np6Rt8Vb0Cd3Fg5Hj7Kk1Mm2Ps4Uy"),
        "a GitHub token",
    ),
    ("GitHub gho_", field("note", "gho_" + "a1B2c3D4e5F6g7H8i9J0" * 2), "a GitHub token"),
    (
        "GitHub github_pat_",
        field("note", "github_pat_11ABCDEFG0123456789_abcdefghijklmnop"),
        "a GitHub token",
    ),
    ("GitLab glpat-", field("note", "glpat-Ab3dEf6hIj9lMn2pQr5t"), "a GitLab token"),
    ("Slack xoxb-", field("note", "xoxb-1234567890-0987654321-AbCdEfGhIjKl"), "a Slack token"),
    ("Slack xoxp-", field("note", "xoxp-1234567890-0987654321-AbCdEfGhIjKl"), "a Slack token"),
    ("AWS AKIA", field("note", "AKIAIOSFODNN7EXAMPLE"), "an AWS access key id"),
    ("AWS ASIA", field("note", "ASIAZ3EXAMPLEKEY1234"), "an AWS access key id"),
    (
        "Google AIza",
        field("note", "AIza" + "SyD-9tSrke72PouQMnMX-a7eZSW0jkFMBWY"),
        "a Google API key",
    ),
    ("Stripe sk_live_", field("note", "sk_live_" + "4eC39HqLyjWDarjtT1zdp7dc"), "a Stripe key"),
    ("Stripe rk_test_", field("note", "rk_test_" + "4eC39HqLyjWDarjtT1zdp7dc"), "a Stripe key"),
    ("npm npm_", field("note", "npm_" + "a1B2c3D4e5F6g7H8i9J0a1B2c3D4e5F6g7H8"), "an npm token"),
    ("PyPI pypi-", field("note", "pypi-AgEIcHlwaS5vcmc" + "x1" * 30), "a PyPI token"),
    ("SendGrid SG.", field("note", "SG." + "a" * 22 + "." + "b" * 43), "a SendGrid key"),
    ("Vault hvs.", field("note", "hvs." + "CAESIJ" + "x9" * 12), "a Vault token"),
    (
        "Docker Hub dckr_pat_",
        field("note", "dckr_pat_" + "Ab3dEf6hIj9lMn2pQr5tUv8xYz0"),
        "a Docker Hub token",
    ),
    (
        "Anthropic sk-ant-",
        field("note", "sk-ant-api03-" + "Ab3dEf6hIj" * 4),
        "an OpenAI or Anthropic key",
    ),
    ("JWT", field("note", JWT), "a JSON Web Token"),
    ("JWT after a dash flag", args(f"--id-token={JWT}"), "a JSON Web Token"),
    (
        "Bearer",
        annotation("example.com/header", "Authorization: Bearer 4f7a2c1e9b8d6f3a0c5e7b9d1f3a"),
        "a Bearer token",
    ),
    (
        "Basic",
        annotation("example.com/header", "Authorization: Basic " + LOGIN),
        "a Basic credential",
    ),
    # private keys
    ("PEM RSA private key", config_map("tls.key", PEM_RSA), "a PEM private key"),
    ("PEM OpenSSH private key", config_map("id_ed25519", PEM_SSH), "a PEM private key"),
    (
        "PEM private key in base64",
        config_map("key.b64", _b64(PEM_RSA)),
        "a PEM private key, base64-encoded",
    ),
    # basic auth
    (
        "htpasswd line",
        config_map("users", "admin:$apr1$H6uskkkW$IgXLP6ewTrSuBkTrqE8wj/"),
        "an htpasswd entry",
    ),
    (
        "auth annotation user:password",
        annotation("example.com/basic-auth", f"admin:{SECRET}"),
        "a user:password",
    ),
]

# -- look-alikes that are not credentials ----------------------------------------------------------

PASSED: list[tuple[str, tuple[str, str]]] = [
    ("${VAR} placeholder", field("password", "${DB_PASSWORD}")),
    ("$VAR placeholder", field("dbPassword", "$DB_PASSWORD")),
    ("Helm template", field("password", "{{ .Values.db.password }}")),
    ("<angle> placeholder", field("password", "<password>")),
    ("empty", field("password", "")),
    ("mask", field("password", "*****")),
    (
        "env from a Secret",
        (
            _deployment(
                "        env:\n        - name: DB_PASSWORD\n          valueFrom:\n"
                "            secretKeyRef: {name: db, key: password}\n"
            ),
            "",
        ),
    ),
    ("env $(VAR)", env("DB_PASSWORD", "$(DB_PASSWORD_FROM_SECRET)")),
    ("env PWD", env("PWD", "/app")),
    ("env DB_PASSWORD_FILE", env("DB_PASSWORD_FILE", "/run/secrets/db")),
    ("passwordFile", field("passwordFile", "/etc/pw")),
    ("existingSecret", field("existingSecret", "db-credentials")),
    ("tlsSecret", field("tlsSecret", "web-tls")),
    ("secretName", field("secretName", "web-tls")),
    ("tokenTTL", field("tokenTTL", "1h")),
    ("passwordKey", field("passwordKey", "password")),
    ("arg --password-file=", args("--password-file=/run/secrets/pw")),
    ("args --password $(VAR)", args("--password", "$(DB_PASSWORD)")),
    ("args --token --verbose", args("--token", "--verbose")),
    (".env with references", config_map(".env", "DB_PASSWORD=${DB_PASSWORD}\nAPI_KEY=\n")),
    (
        ".properties placeholder",
        config_map("app.properties", "spring.datasource.password=${DB_PASS}\n"),
    ),
    ("JSON empty password", config_map("config.json", json.dumps({"password": "", "user": "u"}))),
    ("JSON auth not a login", config_map("config.json", json.dumps({"auth": "oauth2"}))),
    ("embedded YAML reference", config_map("app.yaml", "db:\n  passwordFile: /run/secrets/db\n")),
    (
        "connection string without password",
        field("dsn", "Server=db;Database=app;Integrated Security=true;"),
    ),
    ("URL without password", field("url", "https://git.example.com/org/repo.git")),
    ("bypass=true", field("flags", "bypass=true;compass=north")),
    ("kubelet configuration", config_map("config", "kind: KubeletConfiguration\nusers: []\n")),
    (
        "caBundle",
        field(
            "caBundle", _b64("-----BEGIN CERTIFICATE-----\nMIIBpublic\n-----END CERTIFICATE-----\n")
        ),
    ),
    (
        "nginx.conf",
        config_map(
            "nginx.conf", "server {\n  listen 80;\n  location / { proxy_pass http://app; }\n}\n"
        ),
    ),
    ("a word in base64's alphabet", field("note", "ThisIsJustAVeryLongIdentifierName")),
    (
        "a schema's description",
        (
            "apiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\n"
            "metadata: {name: backends.example.io}\nspec:\n  versions:\n  - name: v1\n"
            "    schema:\n      openAPIV3Schema:\n        properties:\n          password:\n"
            "            type: string\n            description: |\n"
            "              password: the password to log in with. Pass it with\n"
            "              --password value or set token=abc in the file.\n",
            "",
        ),
    ),
]


def _scan(text: str) -> list[Any]:
    documents, problems = parse_yaml(text, "m.yaml")
    assert problems == []
    assert len(documents) == 1
    return list(find_inline_credentials(documents[0]))


@pytest.mark.parametrize(("document", "what"), [c[1:] for c in CAUGHT], ids=[c[0] for c in CAUGHT])
def test_a_credential_shape_is_caught_at_its_file_and_place(
    document: tuple[str, str], what: str
) -> None:
    text, pointer = document

    found = _scan(text)

    assert [(d.path, d.rule, d.pointer) for d in found] == [("m.yaml", "C6", pointer)]
    assert found[0].message.startswith(what)
    assert found[0].line > 1
    assert SECRET not in found[0].format()


@pytest.mark.parametrize("document", [p[1] for p in PASSED], ids=[p[0] for p in PASSED])
def test_a_look_alike_is_not_a_credential(document: tuple[str, str]) -> None:
    assert [d.format() for d in _scan(document[0])] == []


def test_the_tables_hold_the_shapes_of_the_finding() -> None:
    assert len(CAUGHT) >= 56
    assert len(PASSED) >= 25


# -- time: patterns that cannot backtrack ----------------------------------------------------------

_parser: Any = importlib.import_module("re._parser")
_constants: Any = importlib.import_module("re._constants")
#: The longest bounded repeat allowed to backtrack (``{36,255}``).
_BOUNDED = 1024
_REPEATS = ("MAX_REPEAT", "MIN_REPEAT", "POSSESSIVE_REPEAT")
#: Used with ``fullmatch`` or ``match`` only: one start, so a leading run is scanned once.
_ONE_START = ("_BASE64", "_VARIABLE")


def scan_patterns() -> Iterator[tuple[str, re.Pattern[str]]]:
    """Every pattern the credential scan and the masking run, by module and name."""
    for module in (redaction, credential_text, credential_names, credentials):
        for name, value in vars(module).items():
            if isinstance(value, re.Pattern):
                yield f"{module.__name__}.{name}", value
            elif isinstance(value, redaction.Shape):
                yield f"{module.__name__}.{name}", value.pattern
    for shape in redaction.SHAPES:
        yield f"{shape.what} ({shape.needles[0]})", shape.pattern


def _op(item: Any) -> str:
    return str(item[0])


def _unbounded(item: Any) -> bool:
    return _op(item) in _REPEATS and item[1][1] == _constants.MAXREPEAT


def _nodes(items: Any, inside_repeat: bool = False) -> Iterator[tuple[Any, bool]]:
    """Every (node, whether inside a repeat of more than one) of a parsed pattern."""
    for item in items:
        yield item, inside_repeat
        op, argument = _op(item), item[1]
        if op in _REPEATS:
            yield from _nodes(argument[2], inside_repeat or argument[1] > 1)
        elif op == "SUBPATTERN":
            yield from _nodes(argument[3], inside_repeat)
        elif op == "BRANCH":
            for branch in argument[1]:
                yield from _nodes(branch, inside_repeat)
        elif op in ("ASSERT", "ASSERT_NOT"):
            yield from _nodes(argument[1], inside_repeat)
        elif op == "ATOMIC_GROUP":
            yield from _nodes(argument, inside_repeat)


def _matches_char(item: Any, char: str) -> bool:
    """Whether the one-character node ``item`` (a class or literal) matches ``char``."""
    return re.fullmatch(_parser_source(item), char) is not None


def _parser_source(item: Any) -> str:
    op, argument = _op(item), item[1]
    if op == "LITERAL":
        return re.escape(chr(argument))
    if op == "ANY":
        return "."
    if op == "IN":
        parts = []
        negate = ""
        for kind, value in argument:
            if str(kind) == "NEGATE":
                negate = "^"
            elif str(kind) == "LITERAL":
                parts.append(re.escape(chr(value)))
            elif str(kind) == "RANGE":
                parts.append(f"{re.escape(chr(value[0]))}-{re.escape(chr(value[1]))}")
            else:  # CATEGORY
                parts.append(
                    {"CATEGORY_SPACE": r"\s", "CATEGORY_DIGIT": r"\d", "CATEGORY_WORD": r"\w"}[
                        str(value)
                    ]
                )
        return f"[{negate}{''.join(parts)}]"
    if op == "CATEGORY":
        return {"CATEGORY_SPACE": r"\s", "CATEGORY_DIGIT": r"\d", "CATEGORY_WORD": r"\w"}[
            str(argument)
        ]
    raise AssertionError(f"not one character: {item}")


def _pins_start(item: Any) -> bool:
    """``^`` (not ``\\b``) or a negative look-behind."""
    if _op(item) == "AT":
        return str(item[1]) in ("AT_BEGINNING", "AT_BEGINNING_LINE", "AT_BEGINNING_STRING")
    return _op(item) == "ASSERT_NOT" and item[1][0] == -1


def _start_guarded(items: Any) -> bool:
    """Whether no two starts of the pattern can scan the same run of its first unbounded
    repeat: that repeat ends the pattern (the first start to reach it matches), or something
    before it pins the start: ``^``, a look-behind refusing a start inside a run, or a literal
    the run cannot hold."""
    items = list(items)
    first = next((i for i, item in enumerate(items) if _unbounded(item)), None)
    if first is None or first == len(items) - 1:
        return True
    before = items[:first]
    if any(_pins_start(item) for item in before):
        return True
    body = list(items[first][1][2])
    if not before or len(body) != 1:
        return False
    last = before[-1]
    return _op(last) == "LITERAL" and not _matches_char(body[0], chr(last[1]))


@pytest.mark.parametrize(
    ("name", "pattern"), list(scan_patterns()), ids=[n for n, _ in scan_patterns()]
)
def test_no_scan_pattern_can_backtrack_over_a_long_run(name: str, pattern: re.Pattern[str]) -> None:
    """Every unbounded repeat is possessive, no repeat sits inside another, and the first
    unbounded run of a searched pattern is scanned from one start only: with these, each
    character is looked at a bounded number of times, whatever the text."""
    parsed = _parser.parse(pattern.pattern, pattern.flags).data

    for node, inside_repeat in _nodes(parsed):
        op = _op(node)
        if op in ("MAX_REPEAT", "MIN_REPEAT"):
            assert node[1][1] <= _BOUNDED, f"{name}: an unbounded repeat that backtracks"
        if op in _REPEATS and node[1][1] > 1:
            assert not inside_repeat, f"{name}: a repeat inside a repeat"
    if not name.endswith(_ONE_START):
        assert _start_guarded(parsed), f"{name}: several starts may scan one run"


def test_the_check_finds_the_backtracking_patterns_of_before() -> None:
    """The patterns the red team timed (finding 5) fail the check."""
    before = {
        "jwt": r"\beyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}",
        "url": r"\b[A-Za-z][A-Za-z0-9+.-]*://[^/\s:@]*:[^/\s@]+@",
        "kubeconfig": r"""(?m)^\s*["']?kind["']?\s*:\s*["']?Config["']?\s*,?\s*$""",
        "jwt, possessive only": r"\beyJ[A-Za-z0-9_-]{8,}+\.[A-Za-z0-9_-]{8,}+\.[A-Za-z0-9_-]{8,}+",
    }
    for name, source in before.items():
        pattern = re.compile(source)
        with pytest.raises(AssertionError):
            test_no_scan_pattern_can_backtrack_over_a_long_run(name, pattern)


# -- time: long values in windows, the budget looked at before each -------------------------------

#: Values the red team and this suite built to make a backtracking scan slow (finding 5).
ADVERSARIAL = {
    "eyJ-": "eyJ-",
    "a=": "a=",
    "base64 run": "QUJDRA+/",
    "ghp_": "ghp_",
    "newlines": " \n",
    "a.": "a.",
}
FIVE_MIB = 5 << 20


class CountingCheck:
    """The budget's check, counting the looks and the text scanned between two."""

    def __init__(self) -> None:
        self.looks = 0

    def __call__(self) -> None:
        self.looks += 1


@pytest.mark.parametrize("unit", ADVERSARIAL.values(), ids=ADVERSARIAL.keys())
def test_a_5_mib_adversarial_value_is_scanned_to_its_end_a_window_at_a_time(unit: str) -> None:
    value = unit * (FIVE_MIB // len(unit))
    pieces = list(windows(value))
    check = CountingCheck()

    assert text_kind(value, check=check) is None

    assert check.looks == len(pieces)  # one look per window: the scan reached the end
    assert all(len(piece) <= WINDOW for piece in pieces)
    assert sum(len(piece) for piece in pieces) <= len(value) * WINDOW // (WINDOW - OVERLAP) + 1
    assert len(pieces) >= len(value) // WINDOW


def test_windows_cover_the_text_and_cut_after_newlines_where_they_can() -> None:
    text = ("x" * 1000 + "\n") * 300
    glued = "y" * (3 * WINDOW)

    assert "".join(windows(text)) == text
    assert all(piece.endswith("\n") for piece in windows(text))
    pieces = list(windows(glued))
    assert [len(p) for p in pieces] == [WINDOW, WINDOW, WINDOW, 3 * OVERLAP]
    assert list(windows("short")) == ["short"]


def test_a_token_across_a_hard_cut_is_found_whole_in_the_next_window() -> None:
    token = "ghp_" + "Zq9Xw2Lm4Np6Rt8Vb0Cd3Fg5Hj7Kk1Mm2Ps4Uy"
    text = "y" * (WINDOW - 10) + " " + token + " " + "y" * WINDOW

    assert text_kind(text) == "a GitHub token"


def test_the_budget_stops_a_scan_part_way_with_one_located_line() -> None:
    value = "eyJ-" * (FIVE_MIB // 4 - 256)
    text = f"apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: c}}\ndata:\n  big: {value}\n"
    documents, _ = parse_yaml(text, "m.yaml")
    clock = StepClock()
    budget = TimeBudget(file_seconds=10, commit_seconds=1_000, clock=clock)

    with pytest.raises(OverBudgetError) as raised, budget.file("m.yaml"):
        find_inline_credentials(documents[0], budget)

    assert raised.value.diagnostic is not None
    assert raised.value.diagnostic.format() == (
        "m.yaml:5:8: C6 the credential scan stopped here: reading and checking this file took "
        "more than its 10 s budget (/data/big)"
    )
    assert clock.reads < len(list(windows(value))) // 4  # stopped well before the end


def test_a_commit_with_a_slow_value_is_refused_with_the_scan_s_line(
    make_repo: RepoFactory, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    files = small_repo()
    manifest = "modules/alpha/1.0.0/manifest.yaml"
    big = "a=" * (1 << 20)
    files[manifest] += (
        f"---\napiVersion: v1\nkind: ConfigMap\nmetadata: {{name: big}}\ndata:\n  x: {big}\n"
    )
    make_repo(files)
    monkeypatch.chdir(tmp_path)
    options = ReadOptions(file_time_budget=20, commit_time_budget=10**6, clock=StepClock())

    validation = load_repo("repo", options)

    scan = [d.format() for d in validation.diagnostics if "credential scan" in d.message]
    assert len(scan) == 1
    assert scan[0].startswith(f"repo/{manifest}:")
    assert scan[0].endswith(
        "C6 the credential scan stopped here: reading and checking this file took more than "
        "its 20 s budget (/data/x)"
    )
    assert validation.repo is None
