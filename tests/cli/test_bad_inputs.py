"""No traceback anywhere: every command, given bad input, exits 2 with one line that names what to
fix. The table holds the inputs users got tracebacks or pages of usage for, and more; each runs
in-process through the same entry point as the console script."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner

from reconciler.cli import cli
from reconciler.operations.store import SqliteStore

SAMPLE = str(Path(__file__).resolve().parents[2] / "sample-repo")


@pytest.fixture(scope="module")
def places(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """Files and folders the cases name: {name} in a case is replaced by its path."""
    root = tmp_path_factory.mktemp("bad-inputs")
    not_sqlite = root / "not-sqlite.db"
    not_sqlite.write_text("this is not a database\n")
    empty = root / "empty"
    empty.mkdir()
    a_file = root / "a-file.yaml"
    a_file.write_text("kind: Runtime\n")
    store = root / "store.db"
    SqliteStore(store).close()  # an empty store, as a first sync leaves it
    return {
        "not_sqlite": str(not_sqlite),
        "empty": str(empty),
        "a_file": str(a_file),
        "store": f"sqlite:///{store}",
        "sample": SAMPLE,
        "free_port": str(_free_port()),
    }


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


CASES: list[tuple[str, str]] = [
    # (arguments, a word the one line must contain)
    ("validate /nonexistent/repo", "/nonexistent/repo"),
    ("validate {a_file}", "a-file.yaml"),
    ("validate {empty}", "runtimes"),
    ("validate {sample} --format xml", "--format"),
    ("validate {sample} --max-file-size lots", "--max-file-size"),
    ("validate {sample} --nope", "--nope"),
    ("render {sample}", "--runtime"),
    ("render {sample} --runtime nope", "nope"),
    ("render {sample} --runtime prod-us-1 --module nope", "nope"),
    ("render /nonexistent/repo --runtime x", "/nonexistent/repo"),
    ("diff {sample} --base no-such-revision", "no-such-revision"),
    ("diff {sample} --base-path /nonexistent/base", "/nonexistent/base"),
    ("diff {sample} --now yesterday", "--now"),
    ("diff {sample} --format xml", "--format"),
    ("diff {sample} --kube-burst 0", "--kube-burst"),
    ("diff {sample} --kube-qps none", "--kube-qps"),
    ("diff {empty}", "runtimes"),
    ("sync {sample} --wait -1", "--wait"),
    ("sync {sample} --kube-qps 0", "--kube-qps"),
    ("sync {sample} --state /tmp/state.db", "sqlite:///"),
    ("sync {sample} --state mysql://db/x", "sqlite:///"),
    ("sync {sample} --state sqlite:///{not_sqlite}", "not-sqlite.db"),
    ("sync {sample} --state postgresql://me@127.0.0.1:{free_port}/db", "127.0.0.1"),
    ("sync {sample} --daemon ftp://example", "http"),
    ("sync {sample} --daemon http://127.0.0.1:{free_port}", "127.0.0.1"),
    ("sync {sample} --format xml", "--format"),
    ("sync /nonexistent/repo", "/nonexistent/repo"),
    ("status --state {not_sqlite}", "sqlite:///"),
    ("status --state sqlite:///{not_sqlite}", "not-sqlite.db"),
    ("sync {sample} --state sqlite:////proc/nonexistent/state.db", "/proc/nonexistent"),
    ("status --state {store} --format xml", "--format"),
    ("status --state sqlite:////nonexistent/state.db", "/nonexistent/state.db"),
    ("operations show c --state {store}", "'c'"),
    ("operations show % --state {store}", "'%'"),
    ("operations show _ --state {store}", "'_'"),
    ("operations retrigger nope --state {store}", "nope"),
    ("operations list --state {not_sqlite}", "sqlite:///"),
    ("operations nope", "nope"),
    ("daemon --repo {sample} --interval abc", "--interval"),
    ("daemon --repo {sample} --interval 0s", "--interval"),
    ("daemon --repo {sample} --resync-interval -5m", "--resync-interval"),
    ("daemon --repo {sample} --listen nonsense", "--listen"),
    ("daemon --repo {sample} --listen 999.1.1.1:99999", "--listen"),
    ("daemon --repo {sample} --listen 127.0.0.1:70000", "--listen"),
    ("daemon --repo {sample} --http-read-timeout abc", "--http-read-timeout"),
    ("daemon --repo {sample} --git-timeout 0", "--git-timeout"),
    ("daemon --repo {sample} --workers 0", "--workers"),
    ("daemon --repo {sample} --log-format xml", "--log-format"),
    ("daemon --repo {sample} --kube-burst many", "--kube-burst"),
    ("nope", "nope"),
    ("--nope", "--nope"),
]


def _ids() -> Iterator[str]:
    for index, (args, _) in enumerate(CASES):
        yield f"{index:02d}-{args.split()[0]}"


def test_the_table_is_large_enough() -> None:
    assert len(CASES) >= 40


@pytest.mark.parametrize(("args", "named"), CASES, ids=list(_ids()))
def test_a_bad_input_is_one_line_and_exit_2(places: dict[str, str], args: str, named: str) -> None:
    argv = [word.format(**places) for word in args.split()]

    result = CliRunner().invoke(cli, argv)

    lines = result.output.strip().splitlines()
    assert result.exit_code == 2, result.output
    assert not isinstance(result.exception, Exception) or isinstance(
        result.exception, SystemExit
    ), repr(result.exception)
    assert len(lines) == 1, result.output
    assert lines[0].startswith("error: "), lines[0]
    assert named.format(**places) in lines[0], lines[0]
    assert "Traceback" not in result.output
