"""Client-side rate limits per API server (issue 12, item 5): a token bucket of kubectl's size
by default, shared by every runtime on one server, set by --kube-qps/--kube-burst; discovery
kept in a file per server between runs."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from reconciler.cli import cli
from reconciler.cluster.kube import discovery_cache_file
from reconciler.cluster.ratelimit import (
    DEFAULT_BURST,
    DEFAULT_QPS,
    Buckets,
    ClientRate,
    TokenBucket,
)


class FakeTime:
    """A clock that moves only when slept on."""

    def __init__(self) -> None:
        self.now = 100.0
        self.sleeps: list[float] = []

    def clock(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now += seconds


def test_the_defaults_are_kubectls() -> None:
    assert (ClientRate().qps, ClientRate().burst) == (DEFAULT_QPS, DEFAULT_BURST) == (50.0, 300)


def test_a_burst_goes_at_once_then_requests_keep_to_the_rate() -> None:
    time = FakeTime()
    bucket = TokenBucket(ClientRate(qps=10, burst=5), clock=time.clock, sleep=time.sleep)

    for _ in range(5):
        bucket.take()
    assert time.sleeps == []
    for _ in range(20):
        bucket.take()

    assert time.sleeps == pytest.approx([0.1] * 20)
    assert time.now == pytest.approx(102.0)  # 20 requests over the burst at 10 per second


def test_a_quiet_spell_refills_the_bucket_up_to_its_burst_only() -> None:
    time = FakeTime()
    bucket = TokenBucket(ClientRate(qps=10, burst=5), clock=time.clock, sleep=time.sleep)
    for _ in range(5):
        bucket.take()

    time.now += 60.0  # a minute of silence earns 600 tokens, of which 5 are kept
    for _ in range(6):
        bucket.take()

    assert time.sleeps == pytest.approx([0.1])


def test_runtimes_on_one_server_share_its_bucket() -> None:
    buckets = Buckets()
    rate = ClientRate(qps=5, burst=10)

    first = buckets.for_server("https://10.0.0.1:6443", rate)

    assert buckets.for_server("https://10.0.0.1:6443", rate) is first
    assert buckets.for_server("https://10.0.0.2:6443", rate) is not first


@pytest.mark.parametrize(("qps", "burst"), [(0, 1), (-1, 1), (1, 0)])
def test_a_rate_that_would_never_send_is_refused(qps: float, burst: int) -> None:
    with pytest.raises(ValueError, match="qps above 0"):
        ClientRate(qps, burst)


@pytest.mark.parametrize(
    "args",
    [
        ["sync", "--kube-qps", "0"],
        ["sync", "--kube-qps", "fast"],
        ["diff", "--kube-burst", "0"],
        ["daemon", "--repo", "/nowhere", "--kube-burst", "many"],
    ],
)
def test_bad_rate_flags_are_one_line_and_exit_2(args: list[str]) -> None:
    result = CliRunner().invoke(cli, args)

    assert result.exit_code == 2
    assert "--kube-" in result.output
    assert "Traceback" not in result.output


def test_discovery_is_kept_in_one_file_per_server(tmp_path: Path) -> None:
    one = discovery_cache_file(tmp_path, "https://10.0.0.1:6443")
    again = discovery_cache_file(tmp_path, "https://10.0.0.1:6443")
    other = discovery_cache_file(tmp_path, "https://10.0.0.2:6443")

    assert one is not None
    assert other is not None
    assert one == again != other
    assert one.parent == tmp_path / "discovery"
    assert one.read_text() == "{}"  # the client reads it without logging a missing file
    assert "10.0.0.1" not in one.name


def test_a_cache_folder_that_cannot_be_made_only_loses_the_cache(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("")

    assert discovery_cache_file(blocker, "https://10.0.0.1:6443") is None
