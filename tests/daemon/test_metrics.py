"""The daemon's metrics: build and process series, counters of refused commits and failed
reconciles, no ``_created`` series, a number of series bounded by the fleet (one per runtime, not
runtimes x modules x states), and an exposition ``promtool check metrics`` accepts (Debian's
prometheus package, installed by ``.ci/run``)."""

from __future__ import annotations

import subprocess
from dataclasses import replace
from datetime import UTC, datetime

from reconciler import __version__
from reconciler.core.reasons import Reason
from reconciler.core.status import ModuleState, ModuleStatus
from reconciler.daemon.metrics import Metrics
from reconciler.operations.model import RuntimeRecord, RuntimeStatus
from tests.support.daemon_http import Serve, exchange, port_of, start  # noqa: F401 (a fixture)
from tests.support.tools import require_tool

NOW = datetime(2026, 11, 25, 4, tzinfo=UTC)
MODULES = ("istio", "serverless", "telemetry", "eventing", "keda", "api-gateway")


def _fleet(metrics: Metrics, runtimes: int) -> None:
    states = list(ModuleState)
    for index in range(runtimes):
        modules = tuple(
            ModuleStatus(
                name, states[(index + position) % len(states)], Reason.INSTALL, "", "1.0.0"
            )
            for position, name in enumerate(MODULES)
        )
        record = RuntimeRecord(
            f"rt-{index:05d}", ModuleState.READY, Reason.READY, "", None, NOW, modules
        )
        metrics.runtime_status(RuntimeStatus(record))


def _series(text: str) -> list[str]:
    return [line for line in text.splitlines() if line and not line.startswith("#")]


def test_the_series_grow_with_runtimes_not_with_modules_and_states() -> None:
    metrics = Metrics()
    _fleet(metrics, 5000)

    series = _series(metrics.exposition().decode())
    by_name: dict[str, int] = {}
    for line in series:
        name = line.split("{")[0].split(" ")[0]
        by_name[name] = by_name.get(name, 0) + 1

    print(f"series at 5,000 runtimes x {len(MODULES)} modules: {len(series)}; {by_name}")
    assert by_name["reconciler_runtime_state"] == 5000
    assert by_name["reconciler_modules"] == len(MODULES) * len(ModuleState)  # states seen
    assert len(series) < 5000 + 200  # was 6 per module: 180,000 here


def test_build_process_and_counter_series_and_no_created_ones() -> None:
    metrics = Metrics()
    metrics.commit_refused()
    metrics.reconcile_failed("rt-1", "RuntimeError")
    metrics.membership("replica-a", live=3, owned=97)

    text = metrics.exposition().decode()

    assert 'reconciler_build_info{python="' in text
    assert f'version="{__version__}"}} 1.0' in text
    assert "process_resident_memory_bytes" in text
    assert "python_info{" in text
    assert "reconciler_commits_refused_total 1.0" in text
    assert 'reconciler_reconcile_failures_total{error="RuntimeError"} 1.0' in text
    assert 'reconciler_member{member="replica-a"} 1.0' in text
    assert "reconciler_members_live 3.0" in text
    assert "reconciler_owned_runtimes 97.0" in text
    assert "_created" not in text


def _promtool(exposition: bytes) -> subprocess.CompletedProcess[bytes]:
    promtool = require_tool("promtool")
    return subprocess.run(
        [str(promtool), "check", "metrics"], input=exposition, capture_output=True, check=False
    )


def test_promtool_accepts_the_exposition_of_a_fleet() -> None:
    metrics = Metrics()
    _fleet(metrics, 50)
    metrics.commit_refused()
    metrics.poll(ok=True, now=NOW)

    checked = _promtool(metrics.exposition())

    assert checked.returncode == 0, checked.stdout.decode() + checked.stderr.decode()


def test_promtool_accepts_a_live_daemons_metrics(start: Serve) -> None:  # noqa: F811
    server, _ = start()
    answer = exchange(port_of(server), b"GET /metrics HTTP/1.1\r\nHost: t\r\n\r\n")

    checked = _promtool(answer[2])

    assert answer[0] == 200
    assert b"reconciler_build_info" in answer[2]
    assert checked.returncode == 0, checked.stdout.decode() + checked.stderr.decode()


def test_metrics_keep_one_series_per_runtime_and_count_modules_by_state() -> None:
    metrics = Metrics()
    widget = ModuleStatus("widget", ModuleState.PROCESSING, Reason.WAITING_FOR_OPERATOR, "")
    gadget = ModuleStatus("gadget", ModuleState.READY, Reason.READY, "")
    record = RuntimeRecord(
        "rt", ModuleState.PROCESSING, Reason.WAITING_FOR_OPERATOR, "", None, NOW, (widget, gadget)
    )
    other = replace(record, runtime="two", modules=(gadget,), state=ModuleState.READY)

    metrics.runtime_status(RuntimeStatus(record))
    metrics.runtime_status(RuntimeStatus(other))
    metrics.runtime_status(
        RuntimeStatus(replace(record, state=ModuleState.READY, modules=(gadget,)))
    )

    text = metrics.exposition().decode()
    runtime_series = [line for line in text.splitlines() if line.startswith("reconciler_runtime_")]
    assert sorted(runtime_series) == [
        'reconciler_runtime_state{runtime="rt",state="Ready"} 1.0',
        'reconciler_runtime_state{runtime="two",state="Ready"} 1.0',
    ]  # the former state's series is gone
    assert 'reconciler_modules{module="gadget",state="Ready"} 2.0' in text
    assert 'reconciler_modules{module="widget",state="Processing"} 0.0' in text
