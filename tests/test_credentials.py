"""Inline credentials in the config repo (rules C6 and S4): reconciler.credentials."""

from __future__ import annotations

from pathlib import Path

import pytest

from reconciler.credentials import find_inline_credentials
from reconciler.diagnostics import Diagnostic
from reconciler.loader import load_repo
from reconciler.yamlsafe import parse_yaml
from tests.conftest import RepoFactory, small_repo

#: A value that must never show up in any message.
SECRET = "hunter2-s3cr3t-Zq9"
#: base64 of "hunter2" (what a Secret's data holds).
ENCODED = "aHVudGVyMg=="
PEM = (
    "-----BEGIN RSA PRIVATE KEY-----\\n"
    "MIIEowIBAAKCAQEA7s3cr3tk3yMaterial\\n"
    "-----END RSA PRIVATE KEY-----\\n"
)


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
