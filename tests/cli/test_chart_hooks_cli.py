"""A chart's hooks are shown as hooks of their phase, never as objects: ``render`` lists them
per phase above the module's objects, ``diff`` (against a cluster) and ``diff --base`` (between
two revisions) list, on each module's line, the hooks carrying its plan out runs: install hooks
for a new module, upgrade hooks for new values (docs/charts.md, Hooks)."""

from __future__ import annotations

from pathlib import Path

import yaml
from click.testing import CliRunner, Result

from reconciler.cli import cli
from tests.support.charts import CHART_TEMPLATES, chart_module_files
from tests.support.fleet_history import git
from tests.support.repos import channel_file, runtime_file, write_files

_JOB = (
    "apiVersion: batch/v1\nkind: Job\nmetadata:\n  name: {{{{ .Release.Name }}}}-{name}\n"
    '  annotations:\n    "helm.sh/hook": {hook}\n    "helm.sh/hook-weight": "{weight}"\n'
    "spec:\n  template:\n    spec:\n      restartPolicy: Never\n"
    "      containers: [{{name: j, image: busybox}}]\n"
)
TEMPLATES = {
    **CHART_TEMPLATES,
    "templates/migrate.yaml": _JOB.format(name="migrate", hook="pre-install,pre-upgrade", weight=5),
    "templates/seed.yaml": _JOB.format(name="seed", hook="pre-install", weight=-1),
    "templates/smoke.yaml": _JOB.format(name="smoke", hook="test", weight=0),
}


def _run(*args: str) -> Result:
    return CliRunner().invoke(cli, list(args), catch_exceptions=False)


def _commit(root: Path) -> None:
    git(root, "add", "-A")
    git(root, "-c", "user.email=t@example.io", "-c", "user.name=t", "commit", "-qm", "change")


def test_render_and_diffs_show_hooks_by_phase_never_as_objects(tmp_path: Path) -> None:
    base = {
        **chart_module_files("web", templates=TEMPLATES),
        **channel_file("regular", {"web": "1.0.0"}),
        **runtime_file("a", "regular", []),
    }
    repo = write_files(tmp_path / "repo", base)
    git(tmp_path, "init", "-q")
    _commit(tmp_path)
    write_files(repo, runtime_file("a", "regular", [{"name": "web"}]))
    _commit(tmp_path)

    rendered = _run("render", str(repo), "--runtime", "a")
    assert rendered.exit_code == 0, rendered.output
    assert "# hook pre-install: Job/web-seed, Job/web-migrate\n" in rendered.output  # by weight
    assert "# hook pre-upgrade: Job/web-migrate\n" in rendered.output
    assert "# hook never run (test or rollback hooks): Job/web-smoke\n" in rendered.output
    kinds = [d["kind"] for d in yaml.safe_load_all(rendered.output) if d]
    assert "Job" not in kinds

    reviewed = _run("diff", str(repo), "--base", "HEAD~1")
    assert "hook pre-install: Job/web-seed, Job/web-migrate" in reviewed.output, reviewed.output

    (tmp_path / "clusters").mkdir()
    clusters = ["--snapshot", f"{tmp_path / 'clusters'}/"]
    planned = _run("diff", str(repo), *clusters)
    assert "hook pre-install: Job/web-seed, Job/web-migrate" in planned.output, planned.output

    values = runtime_file("a", "regular", [{"name": "web", "values": {"greeting": "hey"}}])
    write_files(repo, values)
    _commit(tmp_path)
    upgraded = _run("diff", str(repo), "--base", "HEAD~1")
    assert "hook pre-upgrade: Job/web-migrate" in upgraded.output, upgraded.output
    assert "pre-install" not in upgraded.output


def test_rbac_grants_what_running_the_hooks_needs(tmp_path: Path) -> None:
    files = {
        **chart_module_files("web", templates=TEMPLATES),
        **channel_file("regular", {"web": "1.0.0"}),
        **runtime_file("a", "regular", [{"name": "web"}]),
    }
    repo = write_files(tmp_path / "repo", files)
    printed = _run("rbac", str(repo), "--runtime", "a", "--user", "sync")
    assert printed.exit_code == 0, printed.output
    rules = [
        rule
        for document in yaml.safe_load_all(printed.output)
        if document and document["kind"] == "ClusterRole"
        for rule in document["rules"]
    ]
    jobs = [r for r in rules if r["apiGroups"] == ["batch"] and "jobs" in r["resources"]]
    assert jobs, rules  # the chart's only Jobs are hooks: created, read, deleted
    assert {"get", "create", "patch", "delete"} <= set(jobs[0]["verbs"])
