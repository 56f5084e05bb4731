"""Inline credentials in the config repo (rules C6 and S4): reconciler.config.credentials."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from reconciler.config.credentials import find_inline_credentials
from reconciler.config.file_credentials import credential_scans
from reconciler.config.validate import Validation
from reconciler.config.yamlsafe import parse_yaml
from reconciler.core.diagnostics import Diagnostic
from reconciler.source.loader import ReadOptions, load_repo
from tests.support.charts import chart_module_files
from tests.support.credentials import GITHUB, PEM, TOKENS
from tests.support.render_modules import overlay_files
from tests.support.repos import RepoFactory, channel_file, runtime_file, small_repo
from tests.support.tools import require_shared

#: A value that must never show up in any message.
SECRET = "hunter2-s3cr3t-Zq9"
#: base64 of "hunter2" (what a Secret's data holds).
ENCODED = "aHVudGVyMg=="


def _find(text: str) -> list[Diagnostic]:
    documents, problems = parse_yaml(text, "m.yaml")
    assert problems == []
    assert len(documents) == 1
    found = find_inline_credentials(documents[0])
    for diagnostic in found:
        assert diagnostic.rule == "C6"
        assert diagnostic.path == "m.yaml"
        for value in (SECRET, ENCODED, "MIIEowIBAAKCAQEA7s3cr3tk3yMaterial"):
            assert value not in diagnostic.format()
    return found


def _places(found: list[Diagnostic]) -> list[tuple[int, int, str]]:
    return [(d.line, d.column, d.pointer) for d in found]


# -- Secrets -------------------------------------------------------------------------------------


def test_secret_with_data_is_flagged_at_its_data() -> None:
    text = f"apiVersion: v1\nkind: Secret\nmetadata:\n  name: s\ndata:\n  password: {ENCODED}\n"

    found = _find(text)

    assert _places(found) == [(6, 3, "/data")]
    assert "Secret with inline data" in found[0].message


def test_secret_with_string_data_is_flagged() -> None:
    text = f"apiVersion: v1\nkind: Secret\nmetadata: {{name: s}}\nstringData: {{key: {SECRET}}}\n"

    found = _find(text)

    assert _places(found) == [(4, 13, "/stringData")]
    assert "Secret with inline stringData" in found[0].message


def test_secret_with_both_is_flagged_twice() -> None:
    text = (
        "kind: Secret\nmetadata: {name: s}\n"
        f"data: {{a: {ENCODED}}}\nstringData: {{b: {SECRET}}}\n"
    )

    assert [d.pointer for d in _find(text)] == ["/data", "/stringData"]


@pytest.mark.parametrize(
    "body",
    ["type: Opaque\n", "data: {}\n", "stringData: {}\ndata: {}\n", "data:\n"],
    ids=["no-data", "empty-data", "both-empty", "null-data"],
)
def test_secret_without_values_is_fine(body: str) -> None:
    assert _find(f"apiVersion: v1\nkind: Secret\nmetadata: {{name: pull}}\n{body}") == []


def test_data_of_a_config_map_is_not_a_secret() -> None:
    assert _find("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c}\ndata: {a: b}\n") == []


def test_secret_inside_a_list_is_flagged() -> None:
    text = (
        "apiVersion: v1\nkind: List\nmetadata: {name: bundle}\nitems:\n"
        "  - apiVersion: v1\n    kind: Secret\n    metadata: {name: s}\n"
        f"    data: {{db-url: {ENCODED}}}\n"
    )

    assert [d.pointer for d in _find(text)] == ["/items/0/data"]


# -- kubeconfigs and credential fields -----------------------------------------------------------


def test_a_kubeconfig_is_one_finding_for_the_whole_document() -> None:
    text = (
        "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster: {server: https://k}\n"
        f"users:\n- name: admin\n  user:\n    token: {SECRET}\n    password: {SECRET}\n"
    )

    found = _find(text)

    assert _places(found) == [(1, 1, "")]
    assert "kubeconfig" in found[0].message


@pytest.mark.parametrize(
    "key", ["token", "password", "client-key-data", "id-token", "refresh-token"]
)
def test_credential_keys_with_string_values_are_flagged_where_they_are(key: str) -> None:
    text = (
        "apiVersion: example.io/v1\nkind: Backend\nmetadata: {name: b}\nspec:\n"
        f"  endpoints:\n  - url: https://x\n    {key}: {SECRET}\n"
    )

    found = _find(text)

    # the value, after "    <key>: "
    assert _places(found) == [(7, 4 + len(key) + 2 + 1, f"/spec/endpoints/0/{key}")]
    assert f"'{key}'" in found[0].message


def test_an_inline_credential_is_one_line_saying_what_to_do_instead() -> None:
    found = _find("env:\n  - {name: X, password: hunter2}\n")

    assert [d.format() for d in found] == [
        "m.yaml:2:25: C6 inline credential 'password': credentials never go in the config repo; "
        "create them in the cluster and refer to them (/env/0/password)"
    ]


def test_credential_keys_with_mapping_values_are_schemas_not_credentials() -> None:
    text = (
        "apiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\n"
        "metadata: {name: backends.example.io}\nspec:\n  versions:\n  - name: v1\n"
        "    schema:\n      openAPIV3Schema:\n        properties:\n"
        "          password: {type: string, description: the password}\n"
        "          token:\n            type: object\n            properties:\n"
        "              refresh-token: {type: string}\n"
        "          id-token: [a, b]\n"
    )

    assert _find(text) == []


@pytest.mark.parametrize("value", ['""', "'   '", "~", "true"])
def test_credential_keys_without_a_string_value_are_fine(value: str) -> None:
    assert _find(f"kind: Backend\nmetadata: {{name: b}}\nspec:\n  password: {value}\n") == []


def test_a_numeric_password_is_flagged() -> None:
    found = _find("kind: Backend\nmetadata: {name: b}\nspec:\n  password: 84736251\n")

    assert [d.pointer for d in found] == ["/spec/password"]


def test_credential_key_names_are_matched_exactly() -> None:
    text = "kind: Backend\nmetadata: {name: b}\nspec:\n  tokenSecretRef: x\n  passwordKey: y\n"

    assert _find(text) == []


# -- private keys --------------------------------------------------------------------------------


def test_a_pem_private_key_anywhere_is_flagged() -> None:
    text = f'kind: ConfigMap\nmetadata: {{name: c}}\ndata:\n  tls.key: "{PEM}"\n'

    found = _find(text)

    assert _places(found) == [(4, 12, "/data/tls.key")]
    assert "private key" in found[0].message


def test_a_pem_private_key_in_a_block_scalar_is_flagged() -> None:
    pem = "data:\n  tls.key: |\n    -----BEGIN RSA PRIVATE KEY-----\n    MIIB\n"

    found = _find(pem)

    assert len(found) == 1
    assert "a PEM private key" in found[0].message
    assert "MIIB" not in found[0].format()


def test_a_pem_private_key_in_a_list_is_flagged() -> None:
    text = f'kind: X\nmetadata: {{name: c}}\nkeys:\n  - "{PEM}"\n'

    assert [d.pointer for d in _find(text)] == ["/keys/0"]


def test_a_certificate_is_not_a_private_key() -> None:
    pem = "-----BEGIN CERTIFICATE-----\\nMIIBpublic\\n-----END CERTIFICATE-----\\n"
    text = f'kind: ConfigMap\nmetadata: {{name: c}}\ndata:\n  ca.crt: "{pem}"\n'

    assert _find(text) == []


# -- through the validator -----------------------------------------------------------------------


def test_a_secret_in_a_manifest_refuses_the_repo_without_showing_its_value(
    make_repo: RepoFactory, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    files = small_repo()
    manifest = "modules/alpha/1.0.0/manifest.yaml"
    secret = (
        f"apiVersion: v1\nkind: Secret\nmetadata:\n  name: creds\nstringData:\n  pw: {SECRET}\n"
    )
    make_repo({**files, manifest: secret + "---\n" + files[manifest]})
    monkeypatch.chdir(tmp_path)

    validation = load_repo("repo")

    assert [d.format() for d in validation.diagnostics] == [
        f"repo/{manifest}:6:3: C6 Secret with inline stringData: credentials never go in the "
        "config repo; create them in the cluster and refer to them (/stringData)"
    ]
    assert validation.repo is None


def test_a_token_in_a_runtime_is_a_credential_error_not_an_unknown_field(
    make_repo: RepoFactory, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    files = small_repo()
    runtime = files["runtimes/one.yaml"].replace(
        "  channel: regular\n", f"  channel: regular\n  token: {SECRET}\n"
    )
    assert runtime != files["runtimes/one.yaml"]
    make_repo({**files, "runtimes/one.yaml": runtime})
    monkeypatch.chdir(tmp_path)

    validation = load_repo("repo")

    assert [(d.rule, d.pointer) for d in validation.diagnostics] == [("C6", "/spec/token")]
    assert all(SECRET not in d.format() for d in validation.diagnostics)


# -- token shapes: each flagged where it is, and a look-alike that is not ------------------------


def _one(value: str) -> str:
    """A custom resource with ``value`` as a double-quoted string at ``/spec/note``."""
    quoted = value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
    return f'kind: Backend\nmetadata: {{name: b}}\nspec:\n  note: "{quoted}"\n'


@pytest.mark.parametrize(("what", "token", "look_alike"), TOKENS, ids=[t[0] for t in TOKENS])
def test_a_token_shape_is_flagged_and_its_look_alike_is_not(
    what: str, token: str, look_alike: str
) -> None:
    found = _find(_one(token))

    assert [(d.pointer, d.message.split(":")[0]) for d in found] == [("/spec/note", what)]
    assert token not in found[0].format()
    assert _find(_one(look_alike)) == []


def test_a_token_as_a_key_is_flagged_without_showing_it() -> None:
    text = f"kind: ConfigMap\nmetadata: {{name: c}}\ndata:\n  {GITHUB}: x\n"

    found = _find(text)

    assert [(d.line, d.column, d.pointer) for d in found] == [(4, 3, "/data/***")]
    assert GITHUB not in found[0].format()


# -- fields named like credentials --------------------------------------------------------------


@pytest.mark.parametrize(
    "key", ["PASSWORD", "Password", "apiKey", "api_key", "clientSecret", "client-secret"]
)
def test_more_credential_keys_are_flagged(key: str) -> None:
    found = _find(f"kind: Backend\nmetadata: {{name: b}}\nspec:\n  {key}: {SECRET}\n")

    assert [d.pointer for d in found] == [f"/spec/{key}"]


@pytest.mark.parametrize(
    "field",
    ["apiKeySecretRef: {name: s, key: k}", "clientSecret: {name: s, key: k}", "apiKeys: [a]"],
)
def test_references_to_credentials_are_fine(field: str) -> None:
    assert _find(f"kind: Backend\nmetadata: {{name: b}}\nspec:\n  {field}\n") == []


# -- environment variables ----------------------------------------------------------------------


def _container_env(entries: str) -> str:
    return (
        "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: d}\nspec:\n  template:\n"
        f"    spec:\n      containers:\n      - name: app\n        env:\n{entries}"
    )


@pytest.mark.parametrize(
    "name", ["DB_PASSWORD", "GITHUB_TOKEN", "CLIENT_SECRET", "API_KEY", "x-api-key", "passwd"]
)
def test_an_env_var_named_like_a_secret_with_a_literal_value_is_flagged(name: str) -> None:
    found = _find(_container_env(f"        - {{name: {name}, value: {SECRET}}}\n"))

    assert [d.pointer for d in found] == ["/spec/template/spec/containers/0/env/0/value"]
    assert "environment variable" in found[0].message
    assert name not in found[0].message


@pytest.mark.parametrize(
    "entry",
    [
        "{name: DB_PASSWORD, valueFrom: {secretKeyRef: {name: db, key: password}}}",
        "{name: DB_PASSWORD_FILE, value: /run/secrets/db}",
        "{name: TOKEN_URL, value: 'https://auth.example.com/token'}",
        "{name: LOG_LEVEL, value: debug}",
        "{name: TOKEN_TTL, value: 1h}",
        "{name: DB_PASSWORD, value: ''}",
    ],
)
def test_other_env_vars_are_fine(entry: str) -> None:
    assert _find(_container_env(f"        - {entry}\n")) == []


# -- kubeconfigs in strings, basic auth ----------------------------------------------------------


def test_a_kubeconfig_in_a_config_map_is_flagged() -> None:
    kubeconfig = (
        "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster: {server: 'https://k'}\n"
        f"users:\n- name: admin\n  user: {{token: {SECRET}}}\n"
    )
    text = f"kind: ConfigMap\nmetadata: {{name: c}}\ndata:\n  config: {json.dumps(kubeconfig)}\n"

    found = _find(text)

    assert [(d.pointer, d.message.split(":")[0]) for d in found] == [
        ("/data/config", "a kubeconfig")
    ]


def test_other_configuration_in_a_config_map_is_fine() -> None:
    config = "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\nusers: []\n"
    text = f"kind: ConfigMap\nmetadata: {{name: c}}\ndata:\n  config: {json.dumps(config)}\n"

    assert _find(text) == []


@pytest.mark.parametrize(
    "annotation",
    [
        f"example.com/basic-auth: 'admin:{SECRET}'",
        "nginx.ingress.kubernetes.io/configuration-snippet: "
        "'proxy_set_header Authorization \"Basic YWRtaW46aHVudGVyMg==\";'",
        "traefik.example/auth-users: 'admin:$apr1$H6uskkkW$IgXLP6ewTrSuBkTrqE8wj/'",
    ],
)
def test_a_basic_auth_annotation_is_flagged(annotation: str) -> None:
    text = f"kind: Ingress\nmetadata:\n  name: i\n  annotations:\n    {annotation}\n"

    found = _find(text)

    assert len(found) == 1
    assert found[0].pointer.startswith("/metadata/annotations/")


@pytest.mark.parametrize(
    "annotation",
    [
        "nginx.ingress.kubernetes.io/auth-type: basic",
        "nginx.ingress.kubernetes.io/auth-secret: basic-auth",
        "nginx.ingress.kubernetes.io/auth-realm: 'Authentication Required - foo'",
        "nginx.ingress.kubernetes.io/auth-url: 'http://oauth2-proxy.auth.svc:4180/oauth2/auth'",
        "example.com/authority: 'api.example.com:8443'",
    ],
)
def test_ordinary_auth_annotations_are_fine(annotation: str) -> None:
    assert _find(f"kind: Ingress\nmetadata:\n  name: i\n  annotations:\n    {annotation}\n") == []


# -- real manifests -------------------------------------------------------------------------------

CORPUS = ("corpus", "prometheus-operator")


def test_the_prometheus_operator_manifests_hold_no_credential() -> None:
    documents = [
        document
        for path in sorted(require_shared(*CORPUS).glob("*/*.yaml"))
        for document in parse_yaml(path.read_text(), str(path))[0]
    ]

    assert len(documents) >= 15
    assert [d.format() for doc in documents for d in find_inline_credentials(doc)] == []


def test_a_module_of_the_prometheus_operator_manifests_validates_clean(
    make_repo: RepoFactory, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    texts = [p.read_text() for p in sorted(require_shared(*CORPUS).glob("*/*.yaml"))]
    readable = [t for t in texts if parse_yaml(t, "x.yaml")[1] == []]  # see the note above
    module = (
        "apiVersion: reconciler.dev/v1alpha1\nkind: Module\nmetadata: {name: prometheus}\n"
        "spec: {namespace: default, operator: {kind: Deployment, name: prometheus-operator}}\n"
    )
    files = {
        **small_repo(),
        "modules/prometheus/module.yaml": module,
        "modules/prometheus/0.93.0/manifest.yaml": "\n---\n".join(readable),
    }
    files["channels/regular.yaml"] += "    prometheus: 0.93.0\n"
    make_repo(files)
    monkeypatch.chdir(tmp_path)

    # the corpus is large: time budgets are not what this tests (a loaded machine must not fail it)
    validation = load_repo("repo", ReadOptions(file_time_budget=600, commit_time_budget=1200))

    assert len(readable) >= len(texts) - 1
    assert [d.format() for d in validation.diagnostics] == []
    assert validation.repo is not None
    assert len(validation.repo.modules["prometheus"].versions["0.93.0"].objects) >= 15


def test_a_password_in_the_channels_url_is_refused_at_its_place_without_showing_it(
    make_repo: RepoFactory, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    url = f"https://deploy:{SECRET}@git.example.com/channels.git"
    settings = (
        "apiVersion: reconciler.dev/v1alpha1\nkind: Settings\nmetadata: {name: s}\n"
        f"spec:\n  channelsFrom: {{git: '{url}'}}\n"
    )
    make_repo({**small_repo(), "reconciler.yaml": settings})
    monkeypatch.chdir(tmp_path)

    validation = load_repo("repo", ReadOptions(channels_dir=Path("repo/channels")))

    assert [(d.rule, d.pointer) for d in validation.diagnostics] == [
        ("C6", "/spec/channelsFrom/git")
    ]
    assert "a password in a URL" in validation.diagnostics[0].message
    assert SECRET not in validation.diagnostics[0].format()


# -- the files a chart or an overlay renders from ------------------------------------------------

#: A Secret as a chart template writes it: ``{{ }}`` makes it no YAML before the render.
_TEMPLATED_SECRET = (
    "apiVersion: v1\nkind: Secret\nmetadata:\n  name: {{ .Release.Name }}-db\n"
    "stringData:\n  db-password: " + SECRET + "\n  user: {{ .Values.user | quote }}\n"
)
_PLAIN_SECRET = "apiVersion: v1\nkind: Secret\nmetadata:\n  name: db\nstringData:\n  token: x\n"


@pytest.mark.parametrize(
    ("path", "text", "line", "pointer"),
    [
        ("modules/web/1.0.0/chart/templates/secret.yaml", _TEMPLATED_SECRET, 6, ""),
        (
            "modules/web/1.0.0/chart/values.yaml",
            f"replicas: 1\nadminPassword: {SECRET}\n",
            2,
            "/adminPassword",
        ),
        (
            "modules/web/1.0.0/chart/charts/db/values.yaml",
            f"auth:\n  password: {SECRET}\n",
            2,
            "/auth/password",
        ),
        (
            "modules/web/1.0.0/chart/files/app.properties",
            f"name=web\ndb.password={SECRET}\n",
            2,
            "",
        ),
        (
            "modules/web/1.0.0/chart/templates/_helpers.tpl",
            f'{{{{- define "t" -}}}}\n{GITHUB}\n{{{{- end }}}}\n',
            2,
            "",
        ),
        ("modules/web/1.0.0/chart/crds/secret.yaml", _PLAIN_SECRET, 6, "/stringData"),
    ],
)
def test_a_chart_file_holding_a_credential_is_refused_at_its_line(
    make_repo: RepoFactory, path: str, text: str, line: int, pointer: str
) -> None:
    tree = {**chart_module_files("web"), **_runtime_taking("web"), path: text}

    found = _c6(load_repo(make_repo(tree)))

    (diagnostic,) = found
    assert (diagnostic.path.split("/repo/", 1)[1], diagnostic.line) == (path, line)
    assert diagnostic.pointer == pointer
    assert SECRET not in diagnostic.format()


@pytest.mark.parametrize(
    ("path", "text", "line", "overlay"),
    [
        (
            "modules/board/1.0.0/db.env",
            f"HOST=db\nDB_PASSWORD={SECRET}\n",
            2,
            {"resources": ["base"], "configMapGenerator": [{"name": "db", "envs": ["db.env"]}]},
        ),
        (
            "modules/board/1.0.0/base/secret.yaml",
            _PLAIN_SECRET,
            6,
            {"resources": ["base"]},
        ),
        (
            "modules/board/1.0.0/kustomization.yaml",
            "",
            6,
            {
                "resources": ["base"],
                "secretGenerator": [{"name": "s", "literals": [f"password={SECRET}"]}],
            },
        ),
    ],
)
def test_an_overlay_file_holding_a_credential_is_refused_at_its_line(
    make_repo: RepoFactory, path: str, text: str, line: int, overlay: dict[str, object]
) -> None:
    tree = {**overlay_files(overlay), **_runtime_taking("board")}
    if text:
        tree[path] = text

    found = _c6(load_repo(make_repo(tree)))

    (diagnostic,) = found
    assert (diagnostic.path.split("/repo/", 1)[1], diagnostic.line) == (path, line)
    assert SECRET not in diagnostic.format()


def test_the_same_secret_is_refused_as_a_manifest_and_as_a_chart_template(
    make_repo: RepoFactory,
) -> None:
    secret = _TEMPLATED_SECRET.replace("{{ .Release.Name }}", "web").replace(
        "{{ .Values.user | quote }}", "app"
    )
    plain = small_repo()
    plain["modules/alpha/1.0.0/manifest.yaml"] += "---\n" + secret
    templated = {
        **chart_module_files("web"),
        **_runtime_taking("web"),
        "modules/web/1.0.0/chart/templates/s.yaml": _TEMPLATED_SECRET,
    }

    manifest = load_repo(make_repo(plain))
    chart = load_repo(make_repo(templated, "charted"))

    assert {d.message.split(":")[0] for d in _c6(manifest)} >= {"Secret with inline stringData"}
    assert [(d.line, d.path.rsplit("/", 1)[1]) for d in _c6(chart)] == [(6, "s.yaml")]


def test_the_corpus_charts_files_hold_no_credential(make_repo: RepoFactory) -> None:
    """Real charts (references, booleans such as automountServiceAccountToken, schemas and
    helm-unittest files) pass the scan."""
    for name in ("cert-manager", "ingress-nginx"):
        folder = require_shared("corpus", "charts", name)
        top = next(folder.rglob("Chart.yaml")).parent
        files = {str(p.relative_to(top)): p.read_bytes() for p in top.rglob("*") if p.is_file()}
        found = [d for _, scan in credential_scans(files, name, chart=True) for d in scan(None)]
        assert found == [], [d.format() for d in found]


def _runtime_taking(module: str) -> dict[str, str]:
    return {
        **channel_file("regular", {module: "1.0.0"}),
        **runtime_file("one", "regular", [{"name": module}]),
    }


def _c6(validation: Validation) -> list[Diagnostic]:
    return [d for d in validation.diagnostics if d.rule == "C6"]
