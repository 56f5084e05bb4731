"""Safe reading (rule C6): the YAML parser, the file reader and the credential scan."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from reconciler.config import yamlsafe
from reconciler.config.credentials import find_inline_credentials
from reconciler.config.yamlsafe import parse_yaml
from reconciler.errors import SourceError
from reconciler.source.loader import ReadOptions, load_repo, read_repo

ROOT = Path(__file__).parent.parent


def _one(text: str) -> object:
    documents, problems = parse_yaml(text, "f.yaml")
    assert problems == []
    assert len(documents) == 1
    return documents[0].data


def _problem(text: str) -> str:
    _, problems = parse_yaml(text, "f.yaml")
    assert len(problems) == 1
    return problems[0].format()


# -- the parser ----------------------------------------------------------------------------------


def test_duplicate_key_names_the_first_line() -> None:
    assert _problem("a: 1\nb: 2\na: 3\n") == (
        "f.yaml:3:1: C6 duplicate key 'a' (first defined on line 1)"
    )


def test_nested_duplicate_key() -> None:
    assert _problem("spec:\n  x: 1\n  x: 2\n").startswith("f.yaml:3:3: C6 duplicate key 'x'")


def test_recursive_alias_is_refused() -> None:
    assert "nesting deeper than" in _problem("a: &a [*a]\n")


def test_alias_expansion_is_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(yamlsafe, "MAX_EXPANDED_NODES", 1000)
    text = "a: &a [1, 2, 3, 4, 5, 6, 7, 8, 9, 10]\nb: &b [*a, *a, *a, *a, *a, *a, *a, *a, *a, *a]\n"
    text += "c: [*b, *b, *b, *b, *b, *b, *b, *b, *b, *b]\n"

    assert _problem(text) == (
        "f.yaml:3:1: C6 document expands to more than 1,000 nodes (alias bomb?)"
    )


def test_small_aliases_and_merge_keys_work() -> None:
    data = _one("base: &base {a: 1, b: 2}\nderived:\n  <<: *base\n  b: 3\n")

    assert data == {"base": {"a": 1, "b": 2}, "derived": {"a": 1, "b": 3}}


@pytest.mark.parametrize(
    "text", ["a: !!python/object:os.system {}\n", "a: !custom 1\n", "a: !!binary aGk=\n"]
)
def test_unsupported_tags_are_refused(text: str) -> None:
    assert "unsupported tag" in _problem(text)


def test_non_scalar_keys_are_refused() -> None:
    assert "mapping keys must be plain scalars" in _problem("? [a, b]\n: 1\n")


def test_scalars_keep_their_yaml_types_and_timestamps_stay_strings() -> None:
    data = _one("a: 1\nb: 1.5\nc: true\nd: null\ne: 2024-01-01\nf: '1'\ng: 1.0.0\n")

    assert data == {
        "a": 1,
        "b": 1.5,
        "c": True,
        "d": None,
        "e": "2024-01-01",
        "f": "1",
        "g": "1.0.0",
    }


def test_empty_documents_are_skipped_and_indexes_kept() -> None:
    documents, problems = parse_yaml("---\n---\na: 1\n---\n", "f.yaml")

    assert problems == []
    assert [d.data for d in documents] == [{"a": 1}]
    assert documents[0].position(("a",)).line == 3


def test_positions_of_values_and_keys() -> None:
    documents, _ = parse_yaml("x: 0\n---\nspec:\n  modules:\n    - name: a\n    - {name: b}\n", "f")
    document = documents[1]

    assert document.position(("spec", "modules", 1, "name")) == yamlsafe.Position(6, 14)
    assert document.position(("spec", "modules", 1, "name"), key=True) == yamlsafe.Position(6, 8)
    assert document.position(("spec", "nothing", 3)) == yamlsafe.Position(4, 3)


def test_node_trees_are_composed_only_when_a_position_is_asked() -> None:
    documents, _ = parse_yaml("a: 1\n", "f.yaml")
    source = documents[0].source
    assert source is not None

    assert source._nodes is None
    documents[0].position(("a",))
    assert source._nodes is not None


def test_broken_yaml_points_at_the_problem() -> None:
    assert _problem("a: [1, 2\nb: 3\n").startswith("f.yaml:2:")


# -- the file reader -----------------------------------------------------------------------------

RUNTIME = """\
apiVersion: reconciler.dev/v1alpha1
kind: Runtime
metadata: {name: NAME}
spec: {channel: regular, cluster: {context: c}}
"""
CHANNEL = """\
apiVersion: reconciler.dev/v1alpha1
kind: Channel
metadata: {name: regular}
spec: {modules: {}}
"""


def _repo(root: Path, files: dict[str, str]) -> Path:
    for relative, text in files.items():
        path = root / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    return root


def _messages(root: Path, options: ReadOptions | None = None) -> list[str]:
    return [d.format() for d in load_repo(root, options).diagnostics]


def test_a_small_repo_is_valid(tmp_path: Path) -> None:
    root = _repo(
        tmp_path,
        {"runtimes/a.yaml": RUNTIME.replace("NAME", "a"), "channels/regular.yaml": CHANNEL},
    )

    assert _messages(root) == []


def test_size_limit(tmp_path: Path) -> None:
    root = _repo(tmp_path, {"runtimes/a.yaml": RUNTIME.replace("NAME", "a") + "#" * 2000 + "\n"})

    messages = _messages(root, ReadOptions(max_file_size=1024))

    assert messages == [
        f"{root}/runtimes/a.yaml:1:1: C6 file is 2.1 KiB, over the 1.0 KiB limit (--max-file-size)"
    ]


def test_symlink_inside_the_repo_is_followed_outside_refused(tmp_path: Path) -> None:
    root = _repo(
        tmp_path / "repo",
        {"shared/a.yaml": RUNTIME.replace("NAME", "a"), "channels/regular.yaml": CHANNEL},
    )
    (root / "runtimes").mkdir()
    (root / "runtimes" / "a.yaml").symlink_to(root / "shared" / "a.yaml")
    outside = _repo(tmp_path / "outside", {"b.yaml": RUNTIME.replace("NAME", "b")})
    (root / "runtimes" / "b.yaml").symlink_to(outside / "b.yaml")

    assert _messages(root) == [
        f"{root}/runtimes/b.yaml:1:1: C6 symbolic link pointing outside the repo"
    ]


def test_yml_files_are_reported(tmp_path: Path) -> None:
    root = _repo(tmp_path, {"runtimes/a.yml": RUNTIME.replace("NAME", "a")})

    assert _messages(root) == [
        f"{root}/runtimes/a.yml:1:1: C4 runtime files are named <name>.yaml, not .yml"
    ]


def test_missing_repo_is_a_source_error(tmp_path: Path) -> None:
    with pytest.raises(SourceError, match="not a directory"):
        load_repo(tmp_path / "nothing")


def test_channels_from_a_missing_folder(tmp_path: Path) -> None:
    settings = (
        "apiVersion: reconciler.dev/v1alpha1\nkind: Settings\nmetadata: {name: s}\n"
        "spec:\n  channelsFrom: {path: ../nowhere}\n"
    )
    root = _repo(tmp_path, {"reconciler.yaml": settings})
    (root / "runtimes").mkdir()

    assert _messages(root) == [
        f"{root}/reconciler.yaml:5:24: C2 channels folder '../nowhere' does not exist "
        "(/spec/channelsFrom/path)"
    ]


def test_channels_from_git_needs_a_checkout(tmp_path: Path) -> None:
    settings = (
        "apiVersion: reconciler.dev/v1alpha1\nkind: Settings\nmetadata: {name: s}\n"
        "spec:\n  channelsFrom: {git: 'https://example.invalid/channels.git'}\n"
    )
    root = _repo(tmp_path / "repo", {"reconciler.yaml": settings})
    (root / "runtimes").mkdir()
    channels = _repo(tmp_path / "checkout", {"regular.yaml": CHANNEL})

    with pytest.raises(SourceError, match="--channels"):
        load_repo(root)
    raw = read_repo(root, ReadOptions(channels_dir=channels))
    assert [f.stem for f in raw.channels] == ["regular"]


def test_paths_are_shown_as_the_user_named_the_repo(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _repo(tmp_path / "fleet", {"runtimes/a.yaml": "a: [\n"})
    _repo(tmp_path, {"channels/x.yaml": "b: [\n"})
    settings = "apiVersion: reconciler.dev/v1alpha1\nkind: Settings\nmetadata: {name: s}\n"
    settings += "spec: {channelsFrom: {path: ../channels}}\n"
    _repo(tmp_path / "fleet", {"reconciler.yaml": settings})
    monkeypatch.chdir(tmp_path)

    paths = [d.path for d in load_repo("fleet").diagnostics]

    assert paths == ["channels/x.yaml", "fleet/runtimes/a.yaml"]


def test_sample_repo_reads_channels_from_the_project(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(ROOT)

    raw = read_repo("sample-repo", ReadOptions())

    assert sorted(f.path for f in raw.channels) == [
        "channels/experimental.yaml",
        "channels/fast.yaml",
        "channels/regular.yaml",
    ]


# -- credentials ---------------------------------------------------------------------------------


def _credentials(text: str) -> list[str]:
    documents, problems = parse_yaml(text, "m.yaml")
    assert problems == []
    return [d.format() for doc in documents for d in find_inline_credentials(doc)]


def test_secret_data_is_flagged_without_its_value() -> None:
    found = _credentials("apiVersion: v1\nkind: Secret\nmetadata: {name: s}\ndata: {k: c2VjcmV0}\n")

    assert len(found) == 1
    assert found[0].startswith("m.yaml:4:7: C6 Secret with inline data")
    assert "c2VjcmV0" not in found[0]


def test_empty_secret_is_fine() -> None:
    assert _credentials("apiVersion: v1\nkind: Secret\nmetadata: {name: s}\ndata: {}\n") == []


def test_kubeconfig_is_one_finding() -> None:
    kubeconfig = (
        "apiVersion: v1\nkind: Config\nclusters: []\n"
        "users: [{name: u, user: {client-key-data: QUJD, token: abc}}]\n"
    )

    found = _credentials(kubeconfig)

    assert len(found) == 1
    assert "a kubeconfig with users" in found[0]


def test_credential_keys_with_strings_are_flagged_schemas_are_not() -> None:
    crd_schema = "spec:\n  properties:\n    token: {type: string}\n    password: {type: string}\n"
    assert _credentials(crd_schema) == []
    found = _credentials("env:\n  - {name: X, password: hunter2}\n")
    assert found == [
        "m.yaml:2:25: C6 inline credential 'password': credentials never go in the config repo; "
        "create them in the cluster and refer to them (/env/0/password)"
    ]


def test_private_keys_are_flagged_anywhere() -> None:
    pem = "data:\n  tls.key: |\n    -----BEGIN RSA PRIVATE KEY-----\n    MIIB\n"

    found = _credentials(pem)

    assert len(found) == 1
    assert "a PEM private key" in found[0]
    assert "MIIB" not in found[0]


@pytest.mark.parametrize("loader", [None, "pure"])
def test_control_characters_are_one_c6_error_at_their_place(loader: str | None) -> None:
    import yaml

    text = "a: 1\nchannel: regular\x07\n"
    if loader is None:
        _, problems = parse_yaml(text, "f.yaml")
    else:
        _, problems = parse_yaml(text, "f.yaml", loader_class=yaml.SafeLoader)

    assert [p.format() for p in problems] == [
        "f.yaml:2:17: C6 character #x0007 is not allowed in YAML"
    ]


def test_limits_are_checked_before_anything_reads_a_file(tmp_path: Path) -> None:
    root = _repo(tmp_path / "repo", {"channels/regular.yaml": CHANNEL})
    (root / "runtimes").mkdir()
    outside = tmp_path / "huge.yaml"
    outside.write_bytes(b"#" * 2048)
    (root / "runtimes" / "a.yaml").symlink_to(outside)
    os.mkfifo(root / "runtimes" / "b.yaml")  # reading it would block forever

    raw = read_repo(root, ReadOptions(), cache={})

    assert sorted(p.format() for p in raw.problems) == [
        f"{root}/runtimes/a.yaml:1:1: C6 symbolic link pointing outside the repo",
        f"{root}/runtimes/b.yaml:1:1: C6 cannot read: not a regular file",
    ]


def test_a_missing_channels_folder_is_one_error_not_one_per_runtime(tmp_path: Path) -> None:
    settings = (
        "apiVersion: reconciler.dev/v1alpha1\nkind: Settings\nmetadata: {name: s}\n"
        "spec:\n  channelsFrom: {path: ../nowhere}\n"
    )
    runtimes = {f"runtimes/r{i}.yaml": RUNTIME.replace("NAME", f"r{i}") for i in range(5)}
    root = _repo(tmp_path, {"reconciler.yaml": settings, **runtimes})

    messages = _messages(root)

    assert len(messages) == 1
    assert "channels folder '../nowhere' does not exist" in messages[0]
