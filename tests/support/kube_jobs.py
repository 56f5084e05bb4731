"""A stand-in for the Job controller's verdict and the kubelet on the test control plane: no Pod
runs there, so a Job never completes by itself.

:func:`jobs_finished` watches every Job of the server in a thread and patches the status of each
new one to complete (``SuccessCriteriaMet`` and ``Complete``), or failed (``FailureTarget`` and
``Failed``, ``BackoffLimitExceeded`` with the message given) when its name is in ``fail``, as the
Job controller writes them when its Pods end; it records, for each Job, whether the Deployment
``watched`` existed when the Job ran (what ran before what). ``actions`` do, before a Job of
their name completes, what its container would have done (ingress-nginx's certgen Jobs: make
the webhook's Secret, patch its caBundle). Callers: tests/e2e/test_chart_hooks.py.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from reconciler.cluster.kube import k8s_client, k8s_config

USER_AGENT = "reconciler-tests/job-controller"
WATCH_SECONDS = 1


def finished_status(failure: str | None, started: str | None = None) -> dict[str, Any]:
    """The status the Job controller writes when a Job's Pod succeeded (``failure`` None) or
    failed for good with ``failure`` as its message; ``started``: the ``startTime`` the
    controller already set (immutable once set)."""
    now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    base: dict[str, Any] = {"startTime": started or now, "active": 0, "ready": 0}
    base["terminating"] = 0
    if failure is None:
        condition = {"status": "True", "reason": "CompletionsReached", "message": "Reached"}
        return {
            **base,
            "succeeded": 1,
            "completionTime": now,
            "conditions": [
                {**condition, "type": "SuccessCriteriaMet"},
                {**condition, "type": "Complete"},
            ],
        }
    condition = {"status": "True", "reason": "BackoffLimitExceeded", "message": failure}
    return {
        **base,
        "failed": 1,
        "conditions": [{**condition, "type": "FailureTarget"}, {**condition, "type": "Failed"}],
    }


@dataclass
class JobStandIn:
    """What the stand-in does and saw: ``fail`` (Job name -> message), and per Job run (in
    order) its name and whether the Deployment ``watched`` (namespace, name) existed then."""

    kubeconfig: Path
    watched: tuple[str, str] = ("", "")
    fail: dict[str, str] = field(default_factory=dict)
    runs: list[tuple[str, bool]] = field(default_factory=list)
    error: BaseException | None = None
    #: Status patches the server refused (what a test prints when a Job never finished).
    problems: list[str] = field(default_factory=list)
    #: Jobs left running (recorded as run) until :meth:`release` finishes them.
    held: set[str] = field(default_factory=set)
    #: Job name -> what its container does (given the client and the Job's namespace).
    actions: dict[str, Callable[[Any, str], None]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        api_client = k8s_config.new_client_from_config(config_file=str(self.kubeconfig))
        api_client.user_agent = USER_AGENT
        self.batch = k8s_client.BatchV1Api(api_client)
        self.apps = k8s_client.AppsV1Api(api_client)
        self.stop = threading.Event()
        self.watching = threading.Event()
        self._held: dict[str, str] = {}

    def names(self) -> list[str]:
        """The Jobs run, in order."""
        return [name for name, _ in self.runs]

    def run(self) -> None:
        from kubernetes import watch  # the client's watch: only the stand-ins need it

        version = ""
        try:
            while not self.stop.is_set():
                stream = watch.Watch().stream(  # type: ignore[no-untyped-call]
                    self.batch.list_job_for_all_namespaces,
                    resource_version=version or None,
                    timeout_seconds=WATCH_SECONDS,
                    _request_timeout=WATCH_SECONDS + 5,
                )
                self.watching.set()
                for event in stream:
                    body = self.batch.api_client.sanitize_for_serialization(event["object"])
                    version = body["metadata"].get("resourceVersion") or version
                    if event["type"] == "ADDED":
                        self._finish(body)
        except Exception as error:  # reported by the caller
            self.error = error

    def _finish(self, body: Mapping[str, Any]) -> None:
        metadata = body["metadata"]
        status = body.get("status") or {}
        if any(c.get("type") in ("Complete", "Failed") for c in status.get("conditions") or ()):
            return
        if self.watched[0] and metadata["namespace"] != self.watched[0]:
            return  # another test's Job (no kubelet finishes it): not this test's to run
        self.runs.append((metadata["name"], self._watched_exists()))
        if metadata["name"] in self.held:
            self._held[metadata["name"]] = metadata["namespace"]
            return
        self._complete(metadata)

    def release(self, name: str) -> None:
        """Finish the held Job ``name`` now (and those of that name to come)."""
        self.held.discard(name)
        namespace = self._held.pop(name)
        self._complete({"name": name, "namespace": namespace})

    def _complete(self, metadata: Mapping[str, Any]) -> None:
        failure = self.fail.get(metadata["name"])
        action = self.actions.get(metadata["name"])
        try:
            if action is not None:
                action(self.batch.api_client, metadata["namespace"])
        except Exception as error:  # the Job fails, saying why (the test reads it)
            failure = f"the stand-in's work failed: {error!r}"[:500]
        name, namespace = metadata["name"], metadata["namespace"]
        try:
            live = self.batch.read_namespaced_job_status(name, namespace)
        except k8s_client.ApiException:
            return  # deleted meanwhile
        started = live.status.start_time if live.status is not None else None
        stamp = started.strftime("%Y-%m-%dT%H:%M:%SZ") if started is not None else None
        patch = {"status": finished_status(failure, stamp)}
        try:
            self.batch.patch_namespaced_job_status(metadata["name"], metadata["namespace"], patch)
        except k8s_client.ApiException as error:  # deleted meanwhile; else the test shows it
            if error.status != 404:
                self.problems.append(f"{metadata['name']}: {error.status} {error.body}")

    def _watched_exists(self) -> bool:
        namespace, name = self.watched
        try:
            self.apps.read_namespaced_deployment(name, namespace)
        except Exception:
            return False
        return True


@contextlib.contextmanager
def jobs_finished(stand_in: JobStandIn) -> Iterator[JobStandIn]:
    """While inside: every new Job of the server is finished by ``stand_in`` as it appears."""
    thread = threading.Thread(target=stand_in.run, name="job-controller", daemon=True)
    thread.start()
    stand_in.watching.wait(30)
    try:
        yield stand_in
    finally:
        stand_in.stop.set()
        thread.join(WATCH_SECONDS + 10)
    if stand_in.error is not None:
        raise RuntimeError(f"the job stand-in stopped: {stand_in.error!r}")
