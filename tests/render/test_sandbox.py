"""The renderer sandbox: a chart that exhausts the engine's memory or stack, or loops, is a located
error of its version and the process lives on; oversized chart files are refused unread."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import astuple
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from reconciler.cli import RENDER_LIMITS, cli
from reconciler.core.diagnostics import Diagnostic
from reconciler.render import KindRenderer, default_renderer
from reconciler.render.helm import HelmChartRenderer, chart_archive
from reconciler.render.sandbox import RenderLimits, Sandbox, configure
from reconciler.source.folder import FolderTree
from reconciler.source.loader import load_repo
from tests.support.charts import chart_module_files
from tests.support.repos import RepoFactory, channel_file, runtime_file

#: A template that asks Go for 100 GB at once (Go: "fatal error: out of memory").
REPEAT_BOMB = '{{ repeat 100000000000 "x" }}\n'
#: A template that renders a value that renders itself through ``tpl`` for ever (Go: "stack
#: overflow"; Helm bounds ``include`` recursion, not ``tpl``'s).
RECURSIVE_TPL = "{{ tpl .Values.again . }}\n"
SELF_RENDERING = {"again": "{{ tpl .Values.again . }}", "greeting": "hi", "replicas": 1}
#: A template that never ends (10^16 turns of a loop, in little memory).
LOOP = "{{ range until 10000 }}" * 4 + "{{ end }}" * 4 + "\n"


def _one_error(
    make_repo: RepoFactory,
    template: str,
    renderer: KindRenderer | None = None,
    defaults: Mapping[str, Any] | None = None,
) -> Diagnostic:
    tree = {
        **chart_module_files("web", defaults=defaults),
        "modules/web/1.0.0/chart/templates/bomb.yaml": template,
        **channel_file("regular", {"web": "1.0.0"}),
        **runtime_file("a", "regular", [{"name": "web"}]),
    }
    validation = load_repo(make_repo(tree), renderer=renderer or default_renderer())
    (error,) = validation.diagnostics
    assert error.rule == "C9"
    assert error.path.endswith("modules/web/1.0.0/chart")
    return error


def test_a_repeat_bomb_is_a_located_error_and_the_process_lives(make_repo: RepoFactory) -> None:
    error = _one_error(make_repo, REPEAT_BOMB)
    assert "of memory and was stopped (--render-memory)" in error.message
    assert os.getpid()  # still here: a render that ran in this process would have ended it


def test_recursive_tpl_is_a_located_error(make_repo: RepoFactory) -> None:
    # time enough that a loaded machine reaches the memory limit first
    sandbox = Sandbox(RenderLimits(seconds=600.0, memory=512 * 2**20))
    renderer = default_renderer(charts=HelmChartRenderer(sandbox=sandbox))
    error = _one_error(make_repo, RECURSIVE_TPL, renderer, defaults=SELF_RENDERING)
    # Go doubles the stack until its copy no longer fits in the render's memory
    assert "of memory and was stopped (--render-memory)" in error.message
    sandbox.close()


def test_a_looping_template_is_cut_at_the_time_limit(make_repo: RepoFactory) -> None:
    sandbox = Sandbox(RenderLimits(seconds=1.0))
    renderer = default_renderer(charts=HelmChartRenderer(sandbox=sandbox))
    error = _one_error(make_repo, LOOP, renderer)
    assert "over 1 s" in error.message
    assert "(--render-timeout)" in error.message
    sandbox.close()


def test_a_worker_is_replaced_after_an_overrun_and_reused_after_a_render(
    make_repo: RepoFactory,
) -> None:
    sandbox = Sandbox(RenderLimits(seconds=1.0))
    renderer = default_renderer(charts=HelmChartRenderer(sandbox=sandbox))
    _one_error(make_repo, LOOP, renderer)
    tree = {
        **chart_module_files("web"),
        **channel_file("regular", {"web": "1.0.0"}),
        **runtime_file("a", "regular", [{"name": "web"}]),
        **runtime_file("b", "regular", [{"name": "web", "values": {"size": "big"}}]),
    }
    validation = load_repo(make_repo(tree, "good"), renderer=renderer)
    assert validation.repo is not None, [d.format() for d in validation.diagnostics]
    assert sandbox.started == 2  # the looping one killed; the next one rendered both
    sandbox.close()


@pytest.mark.parametrize("template", [REPEAT_BOMB], ids=["repeat"])
def test_a_failed_render_is_remembered_not_run_again(make_repo: RepoFactory, template: str) -> None:
    charts = HelmChartRenderer()
    _one_error(make_repo, template, default_renderer(charts=charts))
    assert charts.renders == 1


class _ReadsRecorded(FolderTree):
    """The repo's folder, remembering which files were read whole."""

    def __init__(self, root: Path) -> None:
        super().__init__(root)
        self.reads: list[str] = []

    def read(self, path: str) -> bytes:
        self.reads.append(path)
        return super().read(path)


def test_a_chart_file_over_the_size_limit_is_refused_before_it_is_read(
    make_repo: RepoFactory,
) -> None:
    tree = {
        **chart_module_files("web"),
        **channel_file("regular", {"web": "1.0.0"}),
        **runtime_file("a", "regular", [{"name": "web"}]),
    }
    root = make_repo(tree)
    big = root / "modules/web/1.0.0/chart/files/big.txt"
    big.parent.mkdir()
    with big.open("wb") as file:
        file.truncate(1 << 30)  # 1 GiB, sparse: nothing of it is on the disk
    folder = _ReadsRecorded(root)
    validation = load_repo(root, tree=folder, renderer=default_renderer())
    (error,) = validation.diagnostics
    assert (error.rule, error.path) == ("C6", str(big))
    assert "file is 1024.0 MiB, over the 5.0 MiB limit (--max-file-size)" in error.message
    assert "modules/web/1.0.0/chart/files/big.txt" not in folder.reads


def test_the_render_timeout_is_a_flag_of_the_command(make_repo: RepoFactory) -> None:
    tree = {
        **chart_module_files("web"),
        "modules/web/1.0.0/chart/templates/bomb.yaml": LOOP,
        **channel_file("regular", {"web": "1.0.0"}),
        **runtime_file("a", "regular", [{"name": "web"}]),
    }
    root = make_repo(tree)
    try:
        result = CliRunner().invoke(cli, ["--render-timeout", "1", "validate", str(root)])
    finally:
        configure(RenderLimits())
    assert result.exit_code == 1, result.output
    assert "the render took over 1 s and was stopped (--render-timeout)" in result.output


def test_the_flags_defaults_are_the_sandboxs() -> None:
    defaults = tuple(default for _, _, default, _ in RENDER_LIMITS)
    assert defaults == astuple(RenderLimits())


def test_a_render_worker_has_no_network_and_a_pull_worker_has() -> None:
    archive = chart_archive({"Chart.yaml": b"apiVersion: v2\nname: x\nversion: 1.0.0\n"})
    mine = os.readlink("/proc/self/ns/net")
    for network, same in ((False, False), (True, True)):
        sandbox = Sandbox(network=network)
        try:
            assert (
                sandbox.run("chart", (archive, {}, "x", "x-system", "v1.36.0", [], False), "chart")
                == {}
            )
            (pid,) = sandbox.idle_workers()
            assert (os.readlink(f"/proc/{pid}/ns/net") == mine) is same
        finally:
            sandbox.close()
