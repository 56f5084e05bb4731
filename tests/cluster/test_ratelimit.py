"""Client-side rate limits per API server: a token bucket of kubectl's size by default, shared by
every runtime on one server, set by --kube-qps/--kube-burst; discovery kept in a file per server
between runs; the settings' spec.kubeClient under the flags."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest
from click.testing import CliRunner

from reconciler.cli import cli
from reconciler.cli.clusters import Access
from reconciler.cli.options import ClusterOptions
from reconciler.cluster.kube import BUCKETS, KubeCluster, discovery_cache_file
from reconciler.cluster.ratelimit import (
    DEFAULT_BURST,
    DEFAULT_QPS,
    Buckets,
    ClientRate,
    TokenBucket,
)
from reconciler.core.model import ClusterAccess, Settings
from reconciler.source.loader import load_repo
from tests.support.http_fakes import NOT_FOUND, JsonServer, discovery, write_kubeconfig
from tests.support.repos import RepoFactory, runtime_file, small_repo


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


# -- the settings' spec.kubeClient, under the flags ------------------------------------------


class DiscoveryServer(JsonServer):
    """An API server answering the discovery requests a client makes when it connects."""

    def __init__(self) -> None:
        super().__init__(lambda method, path, body: discovery(path, {}) or NOT_FOUND)

    def kubeconfig(self, folder: Path) -> Path:
        """A kubeconfig file named ``k`` in ``folder`` reaching this server."""
        return write_kubeconfig(folder, self.url)


@pytest.fixture
def discovery_server() -> Iterator[DiscoveryServer]:
    server = DiscoveryServer()
    yield server
    server.close()


def _settings_file(kube_client: str) -> dict[str, str]:
    return {
        "reconciler.yaml": "apiVersion: reconciler.dev/v1alpha1\nkind: Settings\n"
        f"metadata: {{name: s}}\nspec: {{kubeClient: {kube_client}}}\n"
    }


def _fleet(make_repo: RepoFactory, kube_client: str) -> Path:
    files = {**small_repo(), **_settings_file(kube_client)}
    files.update(
        runtime_file("one", "regular", [{"name": "alpha"}], cluster={"kubeconfigFile": "k"})
    )
    return make_repo(files)


def test_settings_give_the_rate_and_each_flag_overrides_its_part() -> None:
    settings = Settings(client_rate=ClientRate(qps=7, burst=9))
    options = ClusterOptions(kubeconfig_dir=None, secret_namespace="ns")

    assert options.rate(None) == ClientRate()  # kubectl's
    assert options.rate(settings) == ClientRate(7, 9)
    assert replace(options, qps=11).rate(settings) == ClientRate(11, 9)
    assert replace(options, burst=40).rate(settings) == ClientRate(7, 40)


def test_spec_kube_client_is_read_into_the_settings(make_repo: RepoFactory) -> None:
    repo = _fleet(make_repo, "{qps: 7.5, burst: 9}")

    config = load_repo(repo).repo

    assert config is not None
    assert config.settings.client_rate == ClientRate(7.5, 9)


@pytest.mark.parametrize(
    ("kube_client", "place"), [("{qps: 0}", "qps"), ("{burst: 0}", "burst"), ("{qs: 1}", "qs")]
)
def test_a_bad_kube_client_setting_is_refused_with_its_place(
    make_repo: RepoFactory, kube_client: str, place: str
) -> None:
    repo = _fleet(make_repo, kube_client)

    result = CliRunner().invoke(cli, ["validate", str(repo)])

    assert result.exit_code == 1
    assert "reconciler.yaml" in result.output
    assert place in result.output


def test_a_live_diff_connects_at_the_settings_rate_unless_a_flag_says_otherwise(
    make_repo: RepoFactory, discovery_server: DiscoveryServer, tmp_path: Path
) -> None:
    repo = _fleet(make_repo, "{qps: 7, burst: 9}")
    kubeconfigs = discovery_server.kubeconfig(tmp_path)
    args = ["diff", str(repo), "--runtime", "one", "--kubeconfig-dir", str(kubeconfigs)]

    CliRunner().invoke(cli, args)
    CliRunner().invoke(cli, [*args, "--kube-qps", "11"])

    assert BUCKETS.rates_for(discovery_server.url) == [ClientRate(7, 9), ClientRate(11, 9)]


def test_the_daemons_connections_follow_the_settings_in_force(
    discovery_server: DiscoveryServer, tmp_path: Path
) -> None:
    access = Access(ClusterOptions(discovery_server.kubeconfig(tmp_path), "ns", cache_dir=tmp_path))
    in_force = [Settings(client_rate=ClientRate(7, 9))]
    connect = access.following(lambda: in_force[-1])
    cluster_access = ClusterAccess(kubeconfig_file="k")

    first = connect(cluster_access, "one")
    in_force.append(Settings(client_rate=ClientRate(3, 4)))  # a new commit
    second = connect(cluster_access, "one")

    assert isinstance(first, KubeCluster)
    assert isinstance(second, KubeCluster)
    assert (first.rate, second.rate) == (ClientRate(7, 9), ClientRate(3, 4))
