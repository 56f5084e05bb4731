"""``reconciler daemon`` as a real process on the real API server, SIGKILLed while its run waits
for a chart's pre-install hook Job (held running by the Job stand-in): a daemon started again
on the same store resumes the operation and waits for the same Job (created once, never twice),
then applies the release and runs its post-install hook; each hook ran once. The child's wait
for a hook is set to an hour (a ``sitecustomize`` on its PYTHONPATH), so the kill surely lands
during the hook; the test's time limit guards the rest."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from reconciler.operations.model import StepState
from tests.support.e2e_harness import until
from tests.support.e2e_world import World, world_of
from tests.support.kube_control_plane import ControlPlane
from tests.support.kube_daemons import KubeDaemon, served_repo, shown_and_stopped
from tests.support.kube_jobs import JobStandIn, jobs_finished
from tests.support.repos import API, dump, write_files

pytestmark = pytest.mark.kube

#: Run by the child at start (its PYTHONPATH): the wait for a hook made an hour long.
LONG_WAIT = "import reconciler.lifecycle.hooks as h\nh.HOOK_WAIT_SECONDS = 3600.0\n"

_JOB = (
    "apiVersion: batch/v1\nkind: Job\nmetadata:\n  name: {{{{ .Release.Name }}}}-{name}\n"
    '  annotations:\n    "helm.sh/hook": {hook}\n'
    "spec:\n  backoffLimit: 0\n  template:\n    spec:\n      restartPolicy: Never\n"
    "      containers: [{{name: j, image: example/hook:1}}]\n"
)
_OPERATOR = (
    "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: {{ .Release.Name }}-operator\n"
    "  labels:\n    app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}\n"
    "spec:\n  replicas: 1\n  selector:\n    matchLabels: {app: op}\n"
    "  template:\n    metadata:\n      labels: {app: op}\n"
    "    spec:\n      containers:\n        - name: op\n          image: example/op:1\n"
)


@pytest.fixture
def world(kube_control_plane: ControlPlane, tmp_path: Path) -> Iterator[World]:
    yield from world_of(kube_control_plane, tmp_path)


def _chart_module(root: Path, name: str, namespace: str) -> None:
    spec = {"namespace": namespace, "operator": {"kind": "Deployment", "name": f"{name}-operator"}}
    module = {"apiVersion": API, "kind": "Module", "metadata": {"name": name}, "spec": spec}
    chart = {"apiVersion": "v2", "name": "hooked", "version": "1.0.0", "appVersion": "1.0.0"}
    folder = f"modules/{name}/1.0.0/chart"
    write_files(
        root,
        {
            f"modules/{name}/module.yaml": dump(module),
            f"{folder}/Chart.yaml": dump(chart),
            f"{folder}/templates/operator.yaml": _OPERATOR,
            f"{folder}/templates/pre.yaml": _JOB.format(name="pre", hook="pre-install"),
            f"{folder}/templates/post.yaml": _JOB.format(name="post", hook="post-install"),
        },
    )


@pytest.mark.timeout(300)
def test_a_daemon_killed_during_a_hook_resumes_it_once(world: World, tmp_path: Path) -> None:
    fleet, kube = world.fleet, world.kube
    name, namespace = f"hooked-{fleet.suffix}", f"hooked-{fleet.suffix}"
    fleet.channel[name] = "1.0.0"
    runtime = fleet.runtime("rt", [{"name": name}])
    fleet.write()
    _chart_module(fleet.root, name, namespace)
    server = served_repo(fleet.root, tmp_path, "a chart with hooks")
    daemon = KubeDaemon(world, server.url, tmp_path, runtime, LONG_WAIT)
    stand_in = JobStandIn(world.control_plane.kubeconfig, (namespace, f"{name}-operator"))
    stand_in.held = {f"{name}-pre"}
    try:
        with shown_and_stopped(daemon, server), jobs_finished(stand_in):
            daemon.start()
            until(
                lambda: (
                    kube.job(namespace, f"{name}-pre") is not None
                    and daemon.step("Apply_Modules") is StepState.RUNNING
                ),
                "the run waits for its pre-install hook",
                120,
            )
            job = kube.job(namespace, f"{name}-pre")
            assert job is not None
            uid = job["metadata"]["uid"]
            daemon.kill()
            assert kube.deployment(namespace, f"{name}-operator") is None

            daemon.start()  # resumes the operation on the same store
            stand_in.release(f"{name}-pre")

            def finished() -> bool:
                if kube.deployment(namespace, f"{name}-operator") is not None:
                    kube.make_available(namespace, f"{name}-operator")
                return daemon.step("Record_Status") is StepState.DONE

            until(finished, "the operation finished", 180)
        again = kube.job(namespace, f"{name}-pre")
        assert again is not None
        assert again["metadata"]["uid"] == uid  # never created twice
        assert stand_in.names() == [f"{name}-pre", f"{name}-post"]  # each hook ran once
        assert (f"{name}-post", True) in stand_in.runs  # after the release's objects
    finally:
        kube.delete_namespace(namespace)
