"""Reading a config repo from disk (reconciler.source.loader): C6 limits, channels, paths shown."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from reconciler.config.validate import Validation
from reconciler.core.resolve import RESOLUTIONS, resolve_runtime
from reconciler.errors import SourceError
from reconciler.source.loader import ReadOptions, load_repo, read_repo
from tests.support.repos import (
    API,
    RepoFactory,
    channel_file,
    module_files,
    runtime_file,
    small_repo,
    write_files,
)


@pytest.fixture(autouse=True)
def _in_tmp_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Run in ``tmp_path`` so that repos are named relatively, as users name them."""
    monkeypatch.chdir(tmp_path)


def _lines(validation: Validation) -> list[str]:
    return [d.format() for d in validation.diagnostics]


def _without(files: dict[str, str], prefix: str) -> dict[str, str]:
    return {path: text for path, text in files.items() if not path.startswith(prefix)}


def _settings(channels_from: str) -> str:
    return (
        f"apiVersion: {API}\n"
        "kind: Settings\n"
        "metadata:\n"
        "  name: fleet\n"
        "spec:\n"
        "  channelsFrom:\n"
        f"    {channels_from}\n"
    )


def test_a_valid_repo_keeps_the_resolutions_its_validation_made(make_repo: RepoFactory) -> None:
    make_repo(small_repo())

    config = load_repo("repo").repo

    assert config is not None
    runtime = config.runtimes["one"]
    resolution = RESOLUTIONS.known(config, runtime)  # the brake and the first sync ask at once
    assert resolution is not None
    assert resolve_runtime(config, runtime) is resolution
    assert [m.name for m in resolution.modules] == ["alpha", "beta"]


def test_the_small_repo_is_valid_and_counts_its_files(make_repo: RepoFactory) -> None:
    make_repo(small_repo())

    validation = load_repo("repo")

    assert _lines(validation) == []
    assert validation.repo is not None
    assert sorted(validation.repo.runtimes) == ["one"]
    assert sorted(validation.repo.channels) == ["fast", "regular"]
    assert {m: sorted(v.versions) for m, v in validation.repo.modules.items()} == {
        "alpha": ["1.0.0", "1.1.0"],
        "beta": ["1.0.0", "2.0.0"],
    }
    # 2 module.yaml + 4 manifests + 2 channels + 1 runtime
    assert validation.files == 9


# -- size limit ----------------------------------------------------------------------------------


def _padded_runtime(size: int) -> str:
    """The runtime ``one`` of the small repo, padded with a comment to exactly ``size`` bytes."""
    text = small_repo()["runtimes/one.yaml"] + "#"
    text += "x" * (size - len(text.encode()) - 1) + "\n"
    assert len(text.encode()) == size
    return text


def test_a_file_over_the_size_limit_is_refused_before_parsing(make_repo: RepoFactory) -> None:
    limit = 1000
    files = small_repo()
    assert max(len(t.encode()) for t in files.values()) < limit
    make_repo({**files, "runtimes/one.yaml": _padded_runtime(limit + 1)})

    validation = load_repo("repo", ReadOptions(max_file_size=limit))

    assert len(validation.diagnostics) == 1
    diagnostic = validation.diagnostics[0]
    assert (diagnostic.path, diagnostic.line, diagnostic.column, diagnostic.rule) == (
        "repo/runtimes/one.yaml",
        1,
        1,
        "C6",
    )
    assert "1001 bytes" in diagnostic.message
    assert "1000 bytes limit" in diagnostic.message
    assert validation.repo is None


def test_the_size_limit_is_shown_in_binary_units_with_its_option(tmp_path: Path) -> None:
    root = write_files(tmp_path / "kib", runtime_file("a", "regular"))
    (root / "runtimes" / "a.yaml").write_text(runtime_file("a")["runtimes/a.yaml"] + "#" * 2000)

    messages = _lines(load_repo(root, ReadOptions(max_file_size=1024)))

    assert messages == [
        f"{root}/runtimes/a.yaml:1:1: C6 file is 2.1 KiB, over the 1.0 KiB limit (--max-file-size)"
    ]


def test_limits_are_checked_before_anything_reads_a_file(tmp_path: Path) -> None:
    root = write_files(tmp_path / "repo", channel_file("regular", {}))
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


def test_a_file_of_exactly_the_limit_is_read(make_repo: RepoFactory) -> None:
    make_repo({**small_repo(), "runtimes/one.yaml": _padded_runtime(1000)})

    validation = load_repo("repo", ReadOptions(max_file_size=1000))

    assert _lines(validation) == []


def test_the_default_limit_lets_ordinary_files_through(make_repo: RepoFactory) -> None:
    make_repo({**small_repo(), "runtimes/one.yaml": _padded_runtime(100_000)})

    assert load_repo("repo").valid


def test_the_default_limit_is_5_mib(make_repo: RepoFactory) -> None:
    make_repo({**small_repo(), "runtimes/one.yaml": _padded_runtime(5 * 1024 * 1024 + 1)})

    (diagnostic,) = load_repo("repo").diagnostics

    assert (diagnostic.path, diagnostic.rule) == ("repo/runtimes/one.yaml", "C6")
    assert "over the 5.0 MiB limit" in diagnostic.message


# -- encoding ------------------------------------------------------------------------------------


def test_a_non_utf8_file_is_refused_at_the_bad_byte(make_repo: RepoFactory) -> None:
    runtime = small_repo()["runtimes/one.yaml"].encode()
    latin1 = runtime.replace(b"name: one\n", b"name: one\n  labels: {owner: J\xf6rg}\n", 1)
    make_repo({**small_repo(), "runtimes/one.yaml": latin1})
    line = latin1[: latin1.index(b"\xf6")].count(b"\n") + 1  # the labels line
    column = len("  labels: {owner: J") + 1

    validation = load_repo("repo")

    assert _lines(validation) == [
        f"repo/runtimes/one.yaml:{line}:{column}: C6 not UTF-8: byte 0xf6 cannot be decoded "
        "(files must be UTF-8)"
    ]


def test_the_column_of_a_bad_byte_counts_characters(make_repo: RepoFactory) -> None:
    runtime = small_repo()["runtimes/one.yaml"].encode()
    bad = runtime.replace(
        b"name: one\n", "name: one\n  labels: {owner: Jörg-".encode() + b"\xff}\n", 1
    )
    make_repo({**small_repo(), "runtimes/one.yaml": bad})

    (diagnostic,) = load_repo("repo").diagnostics

    assert diagnostic.column == len("  labels: {owner: Jörg-") + 1


def test_a_utf8_byte_order_mark_is_accepted(make_repo: RepoFactory) -> None:
    files = small_repo()
    make_repo({**files, "runtimes/one.yaml": b"\xef\xbb\xbf" + files["runtimes/one.yaml"].encode()})

    assert _lines(load_repo("repo")) == []


# -- symbolic links ------------------------------------------------------------------------------


def test_a_runtime_linked_from_outside_the_repo_is_refused(
    make_repo: RepoFactory, tmp_path: Path
) -> None:
    repo = make_repo(small_repo())
    outside = write_files(tmp_path / "elsewhere", runtime_file("two", "regular"))
    (repo / "runtimes" / "two.yaml").symlink_to(outside / "runtimes" / "two.yaml")

    validation = load_repo("repo")

    assert _lines(validation) == [
        "repo/runtimes/two.yaml:1:1: C6 symbolic link pointing outside the repo"
    ]


def test_a_relative_link_climbing_out_of_the_repo_is_refused(
    make_repo: RepoFactory, tmp_path: Path
) -> None:
    repo = make_repo(small_repo())
    write_files(tmp_path / "elsewhere", runtime_file("two", "regular"))
    (repo / "runtimes" / "two.yaml").symlink_to(Path("../../elsewhere/runtimes/two.yaml"))

    assert _lines(load_repo("repo")) == [
        "repo/runtimes/two.yaml:1:1: C6 symbolic link pointing outside the repo"
    ]


def test_a_link_inside_the_repo_is_followed(make_repo: RepoFactory) -> None:
    repo = make_repo({**small_repo(), **runtime_file("two", "fast")})
    (repo / "runtimes" / "two.yaml").rename(repo / "spare-two.yaml")
    (repo / "runtimes" / "two.yaml").symlink_to(Path("../spare-two.yaml"))

    validation = load_repo("repo")

    assert _lines(validation) == []
    assert validation.repo is not None
    assert validation.repo.runtimes["two"].channel == "fast"


def test_a_channel_linked_inside_the_repo_is_followed(make_repo: RepoFactory) -> None:
    repo = make_repo(small_repo())
    (repo / "channels" / "fast.yaml").rename(repo / "fast-channel.yaml")
    (repo / "channels" / "fast.yaml").symlink_to(Path("../fast-channel.yaml"))

    assert _lines(load_repo("repo")) == []


def test_a_runtimes_folder_linked_from_outside_is_refused(
    make_repo: RepoFactory, tmp_path: Path
) -> None:
    files = small_repo()
    repo = make_repo(_without(files, "runtimes/"))
    outside = write_files(tmp_path / "elsewhere", runtime_file("one", "regular"))
    (repo / "runtimes").symlink_to(outside / "runtimes", target_is_directory=True)

    validation = load_repo("repo")

    assert any(d.rule == "C6" and "outside the repo" in d.message for d in validation.diagnostics)
    assert validation.repo is None


def test_a_module_folder_linked_from_outside_is_refused(
    make_repo: RepoFactory, tmp_path: Path
) -> None:
    repo = make_repo(small_repo())
    outside = write_files(tmp_path / "elsewhere", module_files("gamma"))
    (repo / "modules" / "gamma").symlink_to(outside / "modules" / "gamma", target_is_directory=True)

    validation = load_repo("repo")

    assert [d.rule for d in validation.diagnostics] == ["C6"]
    assert validation.diagnostics[0].path.startswith("repo/modules/gamma")


# -- layout --------------------------------------------------------------------------------------


def test_a_yml_runtime_file_is_reported_and_not_read(make_repo: RepoFactory) -> None:
    make_repo({**small_repo(), "runtimes/two.yml": "this: [is not even valid YAML\n"})

    assert _lines(load_repo("repo")) == [
        "repo/runtimes/two.yml:1:1: C4 runtime files are named <name>.yaml, not .yml"
    ]


def test_a_yml_channel_file_is_reported(make_repo: RepoFactory) -> None:
    make_repo({**small_repo(), "channels/slow.yml": "kind: Channel\n"})

    assert _lines(load_repo("repo")) == [
        "repo/channels/slow.yml:1:1: C4 channel files are named <name>.yaml, not .yml"
    ]


def test_a_missing_repo_folder_is_a_source_error() -> None:
    with pytest.raises(SourceError, match=r"^nowhere: not a directory"):
        load_repo("nowhere")


def test_a_file_named_as_the_repo_is_a_source_error(tmp_path: Path) -> None:
    (tmp_path / "repo").write_text("not a folder\n", encoding="utf-8")

    with pytest.raises(SourceError, match="not a directory"):
        load_repo("repo")


# -- where channels come from --------------------------------------------------------------------


def test_channels_from_a_missing_folder_is_reported_at_its_setting(
    make_repo: RepoFactory,
) -> None:
    settings = _settings("path: ../nowhere")
    make_repo({**_without(small_repo(), "channels/"), "reconciler.yaml": settings})
    line = settings.splitlines().index("    path: ../nowhere") + 1
    column = len("    path: ") + 1

    validation = load_repo("repo")

    expected = (
        f"repo/reconciler.yaml:{line}:{column}: C2 channels folder '../nowhere' does not exist "
        "(/spec/channelsFrom/path)"
    )
    assert expected in _lines(validation)
    assert validation.repo is None


def test_a_missing_channels_folder_is_one_error_not_one_per_runtime(tmp_path: Path) -> None:
    runtimes = {k: v for i in range(5) for k, v in runtime_file(f"r{i}").items()}
    root = write_files(
        tmp_path / "fleet", {"reconciler.yaml": _settings("path: ../nowhere"), **runtimes}
    )

    messages = _lines(load_repo(root))

    assert len(messages) == 1
    assert "channels folder '../nowhere' does not exist" in messages[0]


def test_channels_from_git_needs_a_checkout(make_repo: RepoFactory) -> None:
    settings = _settings("git: https://git.example.com/channels.git")
    make_repo({**_without(small_repo(), "channels/"), "reconciler.yaml": settings})

    with pytest.raises(SourceError, match="--channels") as raised:
        load_repo("repo")

    assert "repo/reconciler.yaml" in str(raised.value)
    assert "https://git.example.com/channels.git" in str(raised.value)


def test_channels_from_git_read_from_a_checkout(make_repo: RepoFactory, tmp_path: Path) -> None:
    settings = _settings("git: https://git.example.com/channels.git")
    files = small_repo()
    make_repo({**_without(files, "channels/"), "reconciler.yaml": settings})
    served = {"alpha": "1.1.0", "beta": "2.0.0"}
    write_files(tmp_path / "checkout", channel_file("regular", served, folder="."))

    validation = load_repo("repo", ReadOptions(channels_dir=Path("checkout")))

    assert validation.repo is not None, _lines(validation)
    assert dict(validation.repo.channels["regular"].modules) == served
    assert validation.repo.channels["regular"].source == "checkout/regular.yaml"


def test_sample_repo_reads_channels_from_the_project(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(Path(__file__).resolve().parents[2])

    raw = read_repo("sample-repo", ReadOptions())

    assert sorted(f.path for f in raw.channels) == [
        "channels/experimental.yaml",
        "channels/fast.yaml",
        "channels/regular.yaml",
    ]


def test_the_channels_option_overrides_settings_and_the_repo_folder(
    make_repo: RepoFactory, tmp_path: Path
) -> None:
    write_files(tmp_path, channel_file("regular", {"alpha": "1.0.0", "beta": "1.0.0"}, "theirs"))
    write_files(tmp_path, channel_file("regular", {"alpha": "1.1.0", "beta": "2.0.0"}, "override"))
    write_files(tmp_path, channel_file("rare", {"beta": "2.0.0"}, folder="override"))
    make_repo({**small_repo(), "reconciler.yaml": _settings("path: ../theirs")})

    validation = load_repo("repo", ReadOptions(channels_dir=Path("override")))

    assert validation.repo is not None, _lines(validation)
    assert sorted(validation.repo.channels) == ["rare", "regular"]
    assert dict(validation.repo.channels["regular"].modules) == {"alpha": "1.1.0", "beta": "2.0.0"}


def test_channels_from_a_path_replace_the_repo_folder(
    make_repo: RepoFactory, tmp_path: Path
) -> None:
    write_files(tmp_path, channel_file("regular", {"alpha": "1.1.0", "beta": "2.0.0"}, "theirs"))
    make_repo({**small_repo(), "reconciler.yaml": _settings("path: ../theirs")})

    validation = load_repo("repo")

    assert validation.repo is not None, _lines(validation)
    assert sorted(validation.repo.channels) == ["regular"]  # not fast, from repo/channels/
    assert validation.repo.channels["regular"].modules["beta"] == "2.0.0"


# -- displayed paths -----------------------------------------------------------------------------


def _repo_with_outside_channels(make_repo: RepoFactory, tmp_path: Path) -> None:
    """A repo with two mistakes: a runtime on a missing channel and a channel serving a
    missing module; its channels live in ../channels beside it."""
    files = {
        **_without(small_repo(), "channels/"),
        **runtime_file("a", "nope"),
        "reconciler.yaml": _settings("path: ../channels"),
    }
    make_repo(files)
    write_files(tmp_path, channel_file("regular", {"alpha": "1.0.0", "beta": "1.0.0"}))
    write_files(tmp_path, channel_file("fast", {"alpha": "1.1.0", "gamma": "1.0.0"}))


@pytest.mark.parametrize(
    ("name", "runtime", "channel"),
    [
        ("repo", "repo/runtimes/a.yaml", "channels/fast.yaml"),
        ("./repo/", "repo/runtimes/a.yaml", "channels/fast.yaml"),
        ("repo/../repo", "repo/runtimes/a.yaml", "channels/fast.yaml"),
    ],
)
def test_paths_are_shown_as_the_repo_was_named(
    make_repo: RepoFactory, tmp_path: Path, name: str, runtime: str, channel: str
) -> None:
    _repo_with_outside_channels(make_repo, tmp_path)

    paths = {d.path for d in load_repo(name).diagnostics}

    assert paths == {runtime, channel}


def test_paths_from_inside_the_repo_climb_to_the_channels(
    make_repo: RepoFactory, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _repo_with_outside_channels(make_repo, tmp_path)
    monkeypatch.chdir(tmp_path / "repo")

    paths = {d.path for d in load_repo(".").diagnostics}

    assert paths == {"runtimes/a.yaml", "../channels/fast.yaml"}


def test_paths_of_an_absolute_repo_are_absolute(make_repo: RepoFactory, tmp_path: Path) -> None:
    _repo_with_outside_channels(make_repo, tmp_path)

    paths = {d.path for d in load_repo(tmp_path / "repo").diagnostics}

    assert paths == {str(tmp_path / "repo/runtimes/a.yaml"), str(tmp_path / "channels/fast.yaml")}
    assert all(os.path.isabs(p) for p in paths)


@pytest.mark.parametrize(
    ("name", "message"),
    [
        ("two.YAML", "C4 runtime files are named <name>.yaml, in lower case"),
        ("two.Yaml", "C4 runtime files are named <name>.yaml, in lower case"),
        ("two.json", "C4 runtimes/ holds only <name>.yaml files, one runtime each: this file"),
        ("two", "C4 runtimes/ holds only <name>.yaml files, one runtime each: this file"),
        ("old/two.yaml", "C4 runtimes/ holds only <name>.yaml files, one runtime each: this fo"),
    ],
)
def test_an_unexpected_entry_of_runtimes_is_an_error_not_a_runtime_gone(
    make_repo: RepoFactory, name: str, message: str
) -> None:
    make_repo({**small_repo(), f"runtimes/{name}": "kind: Runtime\n", "runtimes/.gitkeep": ""})

    lines = _lines(load_repo("repo"))

    shown = f"repo/runtimes/{name.split('/')[0]}:1:1: "
    assert len(lines) == 1
    assert lines[0].startswith(shown + message)


def test_a_channel_file_in_upper_case_is_reported(make_repo: RepoFactory) -> None:
    make_repo({**small_repo(), "channels/slow.YAML": "kind: Channel\n", "channels/README.md": ""})

    assert _lines(load_repo("repo")) == [
        "repo/channels/slow.YAML:1:1: C4 channel files are named <name>.yaml, in lower case"
    ]
