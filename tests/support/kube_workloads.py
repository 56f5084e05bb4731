"""A stand-in for the Deployment controller and the kubelet on the test control plane: no Pods
run there, so a Deployment never becomes available by itself (tests/support/kube_control_plane.py
runs kube-controller-manager without its deployment controller).

:func:`deployments_made_available` watches every Deployment of the server in a thread and
patches the status of each new or changed one to available, as a cluster whose Pods start at
once would; the envtest way, for measurements that need modules to become Ready. Its requests
carry the user agent :data:`USER_AGENT`, so that counts of the reconciler's own calls in the
audit log can leave them out. Callers: tests/cluster/test_kube_economy.py,
bench/api_economy_bench.py, bench/kubectl_compare_bench.py.

:func:`managed_job` and :func:`finished_job_status`: a Job no controller of the test control
plane runs, and the status the Job controller would write once it finished (tests/e2e).
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from reconciler.cluster.kube import k8s_client, k8s_config
from reconciler.errors import ReconcilerError

USER_AGENT = "reconciler-tests/deployment-controller"
#: Seconds each watch request lasts before the thread checks whether to stop.
WATCH_SECONDS = 1


def available_status(body: dict[str, Any]) -> dict[str, Any] | None:
    """The status that makes Deployment ``body`` available; None when it already is."""
    metadata, spec = body.get("metadata") or {}, body.get("spec") or {}
    status = body.get("status") or {}
    replicas = spec.get("replicas") or 1
    generation = metadata.get("generation") or 1
    if (status.get("observedGeneration") or 0) >= generation and (
        status.get("availableReplicas") or 0
    ) >= replicas:
        return None
    return {
        "observedGeneration": generation,
        "replicas": replicas,
        "readyReplicas": replicas,
        "availableReplicas": replicas,
        "updatedReplicas": replicas,
        "conditions": [  # what kubectl wait --for=condition=Available reads
            {"type": "Available", "status": "True", "reason": "MinimumReplicasAvailable"}
        ],
    }


#: A Job the built-in Job controller leaves alone (``spec.managedBy``): a test finishes it.
JOB_MANAGED_BY = "reconciler.dev/e2e-tests"
JOB_STARTED = "2026-01-01T00:00:00Z"


def managed_job(name: str) -> dict[str, Any]:
    """A Job no controller of the test control plane acts on (``spec.managedBy``): its status
    is what the test writes (:func:`finished_job_status`)."""
    container = {"name": "migrate", "image": "example.invalid/migrate:1"}
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name},
        "spec": {
            "managedBy": JOB_MANAGED_BY,
            "backoffLimit": 0,
            "template": {"spec": {"restartPolicy": "Never", "containers": [container]}},
        },
    }


def finished_job_status(*, failed: bool) -> dict[str, Any]:
    """What the Job controller writes when the Job's Pod succeeded, or failed past its backoff
    limit (with the condition the API server requires before a terminal one)."""
    if failed:
        reason, message = "BackoffLimitExceeded", "Job has reached the specified backoff limit"
        conditions = [("FailureTarget", reason, message), ("Failed", reason, message)]
        counts: dict[str, Any] = {"failed": 1}
    else:
        reason, message = "CompletionsReached", "Reached expected number of succeeded pods"
        conditions = [("SuccessCriteriaMet", reason, message), ("Complete", reason, message)]
        counts = {"succeeded": 1, "completionTime": JOB_STARTED}
    return {
        "startTime": JOB_STARTED,
        **counts,
        "conditions": [
            {"type": kind, "status": "True", "reason": why, "message": text}
            for kind, why, text in conditions
        ],
    }


class _Controller:
    def __init__(self, kubeconfig: Path) -> None:
        api_client = k8s_config.new_client_from_config(config_file=str(kubeconfig))
        api_client.user_agent = USER_AGENT
        self.apps = k8s_client.AppsV1Api(api_client)
        self.stop = threading.Event()
        self.watching = threading.Event()
        self.error: BaseException | None = None

    def run(self) -> None:
        from kubernetes import watch  # the client's watch: only this stand-in needs it

        version = ""
        try:
            while not self.stop.is_set():
                stream = watch.Watch().stream(  # type: ignore[no-untyped-call]
                    self.apps.list_deployment_for_all_namespaces,
                    resource_version=version or None,
                    timeout_seconds=WATCH_SECONDS,
                    _request_timeout=WATCH_SECONDS + 5,
                )
                self.watching.set()
                for event in stream:
                    body = self.apps.api_client.sanitize_for_serialization(event["object"])
                    version = body["metadata"].get("resourceVersion") or version
                    if event["type"] in ("ADDED", "MODIFIED"):
                        self._make_available(body)
        except (ReconcilerError, OSError, ValueError) as error:
            self.error = error
        except Exception as error:  # the client's ApiException: reported by the caller
            self.error = error

    def _make_available(self, body: dict[str, Any]) -> None:
        status = available_status(body)
        if status is None:
            return
        metadata = body["metadata"]
        with contextlib.suppress(Exception):  # deleted meanwhile: nothing to make available
            self.apps.patch_namespaced_deployment_status(
                metadata["name"], metadata["namespace"], {"status": status}
            )


@contextlib.contextmanager
def deployments_made_available(kubeconfig: Path) -> Iterator[None]:
    """While inside: every Deployment of the server is made available as it appears."""
    controller = _Controller(kubeconfig)
    thread = threading.Thread(target=controller.run, name="deployment-controller", daemon=True)
    thread.start()
    controller.watching.wait(30)
    try:
        yield
    finally:
        controller.stop.set()
        thread.join(WATCH_SECONDS + 10)
    if controller.error is not None:
        raise RuntimeError(f"the deployment controller stopped: {controller.error!r}")
