"""The real cluster adapter: the official ``kubernetes`` client behind the Cluster interface.

With :mod:`reconciler.cluster.kube_errors`, the only modules that import ``kubernetes``. It uses
the dynamic client (any kind, discovered), server-side apply with our field manager (``force`` on
conflicts), JSON merge patches and deletion with a propagation policy. Every request first takes a
token of its API server's rate limit (:mod:`reconciler.cluster.ratelimit`). Discovery is cached, in
a file per server between runs (:func:`discovery_cache_file`), and refreshed once when a kind is
not found (a CRD was just added) and when the server answers a request for a kind it remembers with
``404 page not found`` (a CRD deleted since, a cluster rebuilt at the same URL: a ``404`` that is
no NotFound Status of an object), the request then retried once, as kubectl does. Discovery's
answers are filtered to real kinds (a dynamic client adds the ``XxxList`` kind of every kind's
lists, which can be neither listed nor read). Every library exception is translated once, by
:mod:`reconciler.cluster.kube_errors`, into the errors of :mod:`reconciler.errors`; messages carry
the status and the server's reason, never a credential or an object's content. :func:`connect`
builds a client from a Runtime's ``spec.cluster``: a kubeconfig file in ``--kubeconfig-dir``, a
context of the local kubeconfig, the in-cluster service account, or a kubeconfig kept in a Secret
of the daemon's namespace (read into memory, never written anywhere); :func:`fetch_secret_data`
reads another Secret of it the same way (the daemon's trusted signing keys).
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import logging
import os
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TypeVar

import yaml
from kubernetes import client as _k8s_client
from kubernetes import config as _k8s_config
from kubernetes.config.config_exception import ConfigException
from kubernetes.dynamic.resource import ResourceList

from reconciler.cluster.api import (
    ClusterIdentity,
    KindInfo,
    Listing,
    ObjectEvent,
    Permission,
    Stop,
    event_body,
    event_ref,
)
from reconciler.cluster.kube_client import RequestTimeout, TimedDynamicClient, configuration
from reconciler.cluster.kube_errors import StaleDiscoveryError, translated
from reconciler.cluster.kube_watch import KubeWatches, selector_of
from reconciler.cluster.ratelimit import Buckets, ClientRate, TokenBucket
from reconciler.core.model import ClusterAccess
from reconciler.core.objects import Body, ObjectRef, crd_kind, is_established
from reconciler.core.redaction import mask
from reconciler.errors import (
    AccessError,
    ConflictError,
    InvalidObjectError,
    NotFoundError,
    ReconcilerError,
    UnknownKindError,
)

MERGE_PATCH = "application/merge-patch+json"
#: How long a kind missing from a refreshed discovery is taken as missing without asking.
MISS_SECONDS = 10.0

log = logging.getLogger(__name__)

# The client's typing is partial; we hold it as Any at this edge and type our own interface.
k8s_client: Any = _k8s_client
k8s_config: Any = _k8s_config
_T = TypeVar("_T")


class KubeCluster(KubeWatches):
    """A Kubernetes API server reached through ``api_client``."""

    def __init__(
        self,
        api_client: Any,
        *,
        name: str = "cluster",
        bucket: TokenBucket | None = None,
        cache_file: Path | None = None,
        timeout: RequestTimeout | None = None,
    ) -> None:
        #: Where it lives, for rehearsal isolation (never a credential).
        self.identity = ClusterIdentity.server(
            getattr(api_client.configuration, "host", "") or name
        )
        self.name = name
        self._bucket = bucket
        self._server = str(getattr(api_client.configuration, "host", "") or "")
        #: Discovery was refreshed since this cluster last added or deleted a CRD.
        self._discovered = False
        #: What discovery served after a miss (see ``_find``); None: ask it.
        self._served: set[tuple[str, str, str]] | None = None
        self._served_at = 0.0
        with translated(f"{name}: discovery", self._server):
            self._dynamic: Any = TimedDynamicClient(
                api_client,
                timeout=timeout or RequestTimeout(),
                cache_file=str(cache_file) if cache_file is not None else None,
            )

    def record_event(self, event: ObjectEvent, *, component: str) -> None:
        """See :meth:`reconciler.cluster.api.EventSink.record_event`: an Event the server
        refuses (no RBAC for events, a namespace being deleted) is logged, never raised."""
        now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        body = event_body(event, component, now)
        where = event_ref(event, component)
        try:
            with self._request(f"{self.name}: Event for {event.ref.subject}"):
                resource = self._dynamic.resources.get(api_version="v1", kind="Event")
                resource.create(body=body, namespace=where.namespace)
        except ConflictError:  # the same event again: count it (as client-go aggregates)
            self._count_event(where, now)
        except ReconcilerError as error:
            log.info("%s: no Event for %s: %s", self.name, event.ref.subject, error)

    def _count_event(self, where: ObjectRef, now: str) -> None:
        try:
            again = self.get(where) or {}
            patch = {"count": int(again.get("count") or 1) + 1, "lastTimestamp": now}
            self.patch(where, patch)
        except ReconcilerError as error:
            log.info("%s: Event %s not counted: %s", self.name, where.name, error)

    def pause(self, seconds: float, stop: Stop | None = None) -> bool:
        """See :class:`reconciler.cluster.api.Settling`: the server's controllers go on."""
        if stop is None:
            time.sleep(seconds)
            return True
        return not stop.wait(seconds)

    def server_version(self) -> str:
        """See :meth:`reconciler.cluster.api.Reviewer.server_version` (read at discovery)."""
        version = getattr(self._dynamic, "version", None) or {}
        return str((version.get("kubernetes") or {}).get("gitVersion") or "unknown")

    def whoami(self) -> str:
        """See :meth:`reconciler.cluster.api.Reviewer.whoami` (Kubernetes 1.28 and later)."""
        body = {"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"}
        try:
            with self._request(f"{self.name}: SelfSubjectReview"):
                resource = self._dynamic.resources.get(
                    api_version="authentication.k8s.io/v1", kind="SelfSubjectReview"
                )
                answer = resource.create(body=body).to_dict()
        except UnknownKindError:
            return "unknown (SelfSubjectReview needs Kubernetes 1.28)"
        user = ((answer.get("status") or {}).get("userInfo") or {}).get("username")
        return str(user or "unknown")

    def can_i(self, permission: Permission) -> bool:
        """See :meth:`reconciler.cluster.api.Reviewer.can_i`."""
        attributes = {
            "verb": permission.verb,
            "group": permission.group,
            "resource": permission.resource,
            "namespace": permission.namespace,
        }
        body = {
            "apiVersion": "authorization.k8s.io/v1",
            "kind": "SelfSubjectAccessReview",
            "spec": {"resourceAttributes": attributes},
        }
        with self._request(f"{self.name}: SelfSubjectAccessReview"):
            resource = self._dynamic.resources.get(
                api_version="authorization.k8s.io/v1", kind="SelfSubjectAccessReview"
            )
            answer = resource.create(body=body).to_dict()
        return bool((answer.get("status") or {}).get("allowed"))

    @property
    def rate(self) -> ClientRate | None:
        """The client rate its requests keep to (None: unlimited)."""
        return self._bucket.rate if self._bucket is not None else None

    def _api_client(self) -> Any:
        return self._dynamic.client

    @contextmanager
    def _request(self, what: str) -> Iterator[None]:
        """One request to the server: a token of its rate limit first, errors translated."""
        if self._bucket is not None:
            self._bucket.take()
        with translated(what, self._server):
            yield

    def _on_resource(
        self,
        api_version: str,
        kind: str,
        what: str,
        call: Callable[[Any], _T],
        ref: ObjectRef | None = None,
    ) -> _T:
        """``call`` on the resource of ``kind``, as one request (about object ``ref``); when the
        server does not know the resource discovery named (:class:`StaleDiscoveryError`),
        discovery is refreshed and ``call`` made once more, or :class:`UnknownKindError` raised
        when the kind is gone. A namespaced ``ref`` without a namespace is invalid."""
        resource = self._resource(api_version, kind)
        if ref is not None and resource.namespaced and not ref.namespace:
            raise InvalidObjectError(f"{what}: a namespace is required for {kind}")
        try:
            with self._request(what):
                return call(resource)
        except StaleDiscoveryError:
            log.info("%s: %s: discovery was stale, refreshed", self.name, what)
            self._refresh_discovery()
        resource = self._resource(api_version, kind)
        with self._request(what):
            return call(resource)

    def _refresh_discovery(self) -> None:
        with translated(f"{self.name}: discovery", self._server):
            self._dynamic.resources.invalidate_cache()
        self._discovered, self._served = True, None

    def get(self, ref: ObjectRef) -> Body | None:
        """See :meth:`reconciler.cluster.api.Cluster.get`."""
        try:
            found = self._on_resource(
                ref.api_version,
                ref.kind,
                f"get {ref.subject}",
                lambda r: r.get(name=ref.name, namespace=ref.namespace or None),
                ref,
            )
        except NotFoundError:
            return None
        body = _as_dict(found)
        if ref.kind == "CustomResourceDefinition":
            self._seen_crds([body])
        return body

    def _seen_crds(self, crds: list[Body]) -> None:
        """Forget what :meth:`_find` last took as not served when one of ``crds`` is
        Established and serves a kind (or a version of it) it lacked: discovery answers it now
        (a run that waits for a CRD no longer waits :data:`MISS_SECONDS` more once the server
        established it)."""
        if self._served is None:
            return
        for crd in crds:
            if is_established(crd) and not _known_served(crd, self._served):
                self._discovered, self._served = False, None
                return

    def list_objects(
        self,
        api_version: str,
        kind: str,
        *,
        namespace: str | None = None,
        labels: Mapping[str, str] | None = None,
    ) -> list[Body]:
        """See :meth:`reconciler.cluster.api.Cluster.list_objects`."""
        return self._list(api_version, kind, namespace, labels).items

    def _list(
        self, api_version: str, kind: str, namespace: str | None, labels: Mapping[str, str] | None
    ) -> Listing:
        found = _as_dict(
            self._on_resource(
                api_version,
                kind,
                f"list {kind}",
                lambda r: r.get(namespace=namespace, label_selector=selector_of(labels)),
            )
        )
        items = list(found.get("items") or [])  # a server answers [], an aggregated API null
        for item in items:  # list items carry neither apiVersion nor kind
            item.setdefault("apiVersion", api_version)
            item.setdefault("kind", kind)
        if kind == "CustomResourceDefinition":
            self._seen_crds(items)
        return Listing(items, str((found.get("metadata") or {}).get("resourceVersion") or ""))

    def apply(
        self,
        body: Mapping[str, Any],
        *,
        field_manager: str,
        force: bool = True,
        dry_run: bool = False,
    ) -> Body:
        """See :meth:`reconciler.cluster.api.Cluster.apply`."""
        ref = ObjectRef.of(body)
        applied = self._on_resource(
            ref.api_version,
            ref.kind,
            f"apply {ref.subject}",
            lambda r: self._dynamic.server_side_apply(
                r,
                body=dict(body),
                namespace=ref.namespace or None,
                field_manager=field_manager,
                force_conflicts=force,
                dry_run="All" if dry_run else None,
            ),
            ref,
        )
        if ref.kind == "CustomResourceDefinition":
            self._discovered, self._served = False, None  # a kind may be served now
        return _as_dict(applied)

    def patch(self, ref: ObjectRef, merge_patch: Mapping[str, Any]) -> Body:
        """See :meth:`reconciler.cluster.api.Cluster.patch`."""
        patched = self._on_resource(
            ref.api_version,
            ref.kind,
            f"patch {ref.subject}",
            lambda r: self._dynamic.patch(
                r,
                body=dict(merge_patch),
                name=ref.name,
                namespace=ref.namespace or None,
                content_type=MERGE_PATCH,
            ),
            ref,
        )
        return _as_dict(patched)

    def delete(self, ref: ObjectRef, *, propagation: str = "Background") -> bool:
        """See :meth:`reconciler.cluster.api.Cluster.delete`."""
        try:
            self._on_resource(
                ref.api_version,
                ref.kind,
                f"delete {ref.subject}",
                lambda r: r.delete(
                    name=ref.name, namespace=ref.namespace or None, propagation_policy=propagation
                ),
                ref,
            )
        except NotFoundError:
            return False
        if ref.kind == "CustomResourceDefinition":
            self._discovered, self._served = False, None
        return True

    def kind_info(self, api_version: str, kind: str) -> KindInfo | None:
        """See :meth:`reconciler.cluster.api.Cluster.kind_info`."""
        resource = self._find(api_version=api_version, kind=kind)
        return _info(resource) if resource is not None else None

    def kinds_in_group(self, group: str, kind: str) -> KindInfo | None:
        """See :meth:`reconciler.cluster.api.Cluster.kinds_in_group`."""
        resource = self._find(group=group, kind=kind)
        return _info(resource) if resource is not None else None

    def served_kinds(self, *, fresh: bool = False) -> list[KindInfo]:
        """See :meth:`reconciler.cluster.api.Cluster.served_kinds`."""
        if fresh:
            self._refresh_discovery()
        found = self._search()
        kinds: dict[tuple[str, str], KindInfo] = {}
        for resource in _kinds_of_objects(found):
            if "list" not in (resource.verbs or []):
                continue  # kinds that cannot be listed
            info = _info(resource)
            kinds.setdefault((info.group, info.kind), info)
        return sorted(kinds.values(), key=lambda k: (k.group, k.kind))

    # -- discovery -----------------------------------------------------------------------------

    def _resource(self, api_version: str, kind: str) -> Any:
        resource = self._find(api_version=api_version, kind=kind)
        if resource is None:
            raise UnknownKindError(f"{self.name} does not serve {kind} in {api_version}")
        return resource

    def _find(self, **query: str) -> Any:
        """A resource by query; on a miss the discovery cache is refreshed, once for all the
        misses until this cluster adds or deletes a CRD (or :data:`MISS_SECONDS` pass): what
        is served then is kept, and a kind it lacks is missing without asking again (a cold
        install's misses cost one refresh, not one each; the client refreshes on every miss
        of its own)."""
        key = _query_key(query)
        if self._served is not None and time.monotonic() - self._served_at > MISS_SECONDS:
            self._served = None  # another client may have added a CRD since
        if self._served is not None and key not in self._served:
            return None  # not served at the last refresh, and no CRD changed since
        for attempt in range(2):
            top = _kinds_of_objects(self._search(**query))  # the client refreshes once on a miss
            if top:
                return _preferred(top)
            if attempt == 0 and not self._discovered:
                self._dynamic.resources.invalidate_cache()
                self._discovered = True
        try:
            every = _kinds_of_objects(self._search())
        except UnknownKindError:
            return None  # a group version listed and not served (yet): no list kept, ask again
        self._served = {k for r in every for k in _resource_keys(r)}
        self._served_at = time.monotonic()
        return None

    def _search(self, **query: str) -> list[Any]:
        """Discovery's resources for ``query``. A group version the cached list names but its
        server answers 404 for (a CRD just created, or just deleted: the server adds and drops
        its endpoints a moment after) is looked up again on a fresh list; still 404, the kind
        queried is not served, for now (a search of everything raises: it would miss every
        kind)."""
        for fresh in (False, True):
            try:
                with translated(f"{self.name}: discovery", self._server):
                    return list(self._dynamic.resources.search(**query))
            except UnknownKindError:
                if fresh and not query:
                    raise
                self._dynamic.resources.invalidate_cache()
        return []


def _known_served(crd: Body, served: set[tuple[str, str, str]]) -> bool:
    """Whether ``served`` (discovery's last answer) has ``crd``'s kind in every version the CRD
    serves: one an upgrade adds (L12) is missing there until discovery is asked again."""
    group, kind = crd_kind(crd)
    versions = [v for v in (crd.get("spec") or {}).get("versions") or [] if v.get("served")]
    keys = {("group", group, kind)} | {
        ("version", f"{group}/{v.get('name')}", kind) for v in versions
    }
    return keys <= served


def _kinds_of_objects(resources: list[Any]) -> list[Any]:
    """What discovery found, without the kinds of lists (``ConfigMapList``: the client's
    ``ResourceList``, which answers for its base kind's name and verbs) and subresources."""
    return [
        r
        for r in resources
        if not isinstance(r, ResourceList) and "/" not in str(getattr(r, "name", "") or "")
    ]


def _query_key(query: Mapping[str, str]) -> tuple[str, str, str]:
    """A discovery query (by apiVersion and kind, or group and kind) as a key."""
    if "api_version" in query:
        return "version", query["api_version"], query.get("kind", "")
    return "group", query.get("group", ""), query.get("kind", "")


def _resource_keys(resource: Any) -> tuple[tuple[str, str, str], ...]:
    """The keys of :func:`_query_key` that find ``resource``."""
    kind = str(resource.kind)
    return ("version", str(resource.group_version), kind), (
        "group",
        str(resource.group or ""),
        kind,
    )


def _preferred(resources: list[Any]) -> Any:
    """The resource in the group's preferred version when several versions serve the kind."""
    preferred = [r for r in resources if getattr(r, "preferred", False)]
    return (preferred or resources)[0]


def _info(resource: Any) -> KindInfo:
    return KindInfo(
        group=str(resource.group or ""),
        version=str(resource.api_version),
        kind=str(resource.kind),
        plural=str(resource.name),
        namespaced=bool(resource.namespaced),
    )


def _as_dict(found: Any) -> Body:
    if hasattr(found, "to_dict"):
        return dict(found.to_dict())
    return dict(found)


# -- connecting --------------------------------------------------------------------------------


#: The rate limit of each API server this process talks to, shared by all its runtimes.
BUCKETS = Buckets()


def connect(
    access: ClusterAccess,
    *,
    name: str,
    kubeconfig_dir: Path | None = None,
    secret_namespace: str = "reconciler-system",  # noqa: S107 (a namespace, not a secret)
    rate: ClientRate | None = None,
    cache_dir: Path | None = None,
    timeout: RequestTimeout | None = None,
    kubeconfig: Path | None = None,
    context: str | None = None,
) -> KubeCluster:
    """A :class:`KubeCluster` for a Runtime's ``spec.cluster`` (or, when ``kubeconfig`` or
    ``context`` is given, as kubectl's flags, that kubeconfig file and context, over
    ``spec.cluster``); :class:`AccessError` when the credentials cannot be found or read.
    Requests keep to ``rate`` per API server (kubectl's limits by default) and wait at most
    ``timeout`` (see :mod:`~reconciler.cluster.kube_client`); discovery is cached in
    ``cache_dir`` (see :func:`discovery_cache_file`). The client's own logs on the root logger
    are dropped (:class:`_ClientLogs`) and its retries are off: a failure is our error, naming
    the runtime, retried by our steps only."""
    _ClientLogs.install()
    flags = kubeconfig is not None or context is not None
    try:
        if flags:
            api_client = _client_from_kubeconfig(kubeconfig, context)
        else:
            api_client = _api_client(access, kubeconfig_dir, secret_namespace)
    except (ConfigException, OSError, yaml.YAMLError, binascii.Error, UnicodeDecodeError) as error:
        detail = " ".join(str(error).split())[:200]
        what = _describe_flags(kubeconfig, context) if flags else access.describe()
        raise AccessError(
            f"{name}: cannot use {what}: {mask(detail) or type(error).__name__}"
            + (_NO_KUBECONFIG if "No configuration found" in detail else "")
        ) from error
    server = str(getattr(api_client.configuration, "host", "") or name)
    bucket = BUCKETS.for_server(server, rate or ClientRate())
    cache_file = discovery_cache_file(cache_dir, server) if cache_dir is not None else None
    return KubeCluster(api_client, name=name, bucket=bucket, cache_file=cache_file, timeout=timeout)


def connect_home(
    *, cache_dir: Path | None = None, timeout: RequestTimeout | None = None
) -> KubeCluster:
    """The cluster the daemon runs in (in-cluster), else the local kubeconfig's current
    context: where its notifications' Secrets are read and its own Events recorded."""
    _ClientLogs.install()
    try:
        api_client = _home_client()
    except (ConfigException, OSError, yaml.YAMLError) as error:
        detail = " ".join(str(error).split())[:200]
        raise AccessError(f"the daemon's own cluster: {mask(detail)}") from error
    server = str(getattr(api_client.configuration, "host", "") or "home")
    cache_file = discovery_cache_file(cache_dir, server) if cache_dir is not None else None
    return KubeCluster(api_client, name="home", cache_file=cache_file, timeout=timeout)


def discovery_cache_file(cache_dir: Path, server: str) -> Path | None:
    """The file that keeps the discovery of ``server`` between runs, like kubectl's
    ``~/.kube/cache/discovery``: one per server URL (kinds only, never a credential), read by
    the client at start and refreshed on a miss. None when the folder cannot be made."""
    folder = cache_dir / "discovery"
    path = folder / (hashlib.sha256(server.encode()).hexdigest()[:24] + ".json")
    try:
        folder.mkdir(parents=True, exist_ok=True)
        if not path.exists():
            path.write_text("{}", encoding="utf-8")  # the client logs an error for a missing file
    except OSError:
        return None
    return path


#: What to do when there is no kubeconfig at all (the client says only "Invalid kube-config
#: file. No configuration found.").
_NO_KUBECONFIG = (
    " (no kubeconfig: set KUBECONFIG or write ~/.kube/config for this user, or give the runtime "
    "spec.cluster.kubeconfigFile with --kubeconfig-dir, or kubeconfigSecret)"
)


class _ClientLogs(logging.Filter):
    """Drops what the Kubernetes client logs on the root logger (``logging.error("load cache
    error: ...")`` from its discovery, exec credential messages): lines that name no runtime,
    about failures it raises anyway, which we report as our errors."""

    _installed = False

    def filter(self, record: logging.LogRecord) -> bool:
        return "/kubernetes/" not in Path(record.pathname).as_posix()

    @classmethod
    def install(cls) -> None:
        """Put the filter on the root logger, once per process."""
        if not cls._installed:
            logging.getLogger().addFilter(cls())
            cls._installed = True


def _api_client(access: ClusterAccess, kubeconfig_dir: Path | None, secret_namespace: str) -> Any:
    if access.kubeconfig_file is not None:
        if kubeconfig_dir is None:
            raise AccessError(f"{access.describe()} needs --kubeconfig-dir")
        path = kubeconfig_dir / access.kubeconfig_file
        if not path.is_file():
            raise AccessError(f"{access.describe()}: no such file in {kubeconfig_dir}")
        return k8s_config.new_client_from_config(
            config_file=str(path), client_configuration=configuration()
        )
    if access.context is not None:
        return _client_from_kubeconfig(None, access.context)
    if access.in_cluster:
        made = configuration()
        k8s_config.load_incluster_config(client_configuration=made)
        return k8s_client.ApiClient(made)
    return _client_from_secret(access, secret_namespace)


def _describe_flags(kubeconfig: Path | None, context: str | None) -> str:
    """``--kubeconfig FILE --context NAME`` as given (a path and a name, never a credential)."""
    given = [("--kubeconfig", str(kubeconfig) if kubeconfig else None), ("--context", context)]
    return " ".join(f"{flag} {value}" for flag, value in given if value is not None)


def _client_from_kubeconfig(kubeconfig: Path | None, context: str | None) -> Any:
    """A client from a kubeconfig as kubectl finds it (``kubeconfig``, else KUBECONFIG's files,
    read now, else ~/.kube/config) and ``context`` (None: its current context). A missing file
    or context is a :class:`ConfigException` that names it (and the contexts there are)."""
    files = _kubeconfig_files(kubeconfig)
    read = files or [Path(_DEFAULT_KUBECONFIG).expanduser()]
    if context is not None and any(f.is_file() for f in read):
        _check_context(read, context)
    return k8s_config.new_client_from_config(
        config_file=os.pathsep.join(map(str, read)),  # KUBECONFIG as it is now, not at import
        context=context,
        client_configuration=configuration(),
    )


#: The kubeconfig read without --kubeconfig or KUBECONFIG (kubectl's).
_DEFAULT_KUBECONFIG = "~/.kube/config"


def _kubeconfig_files(kubeconfig: Path | None) -> list[Path] | None:
    """The files ``kubeconfig`` or KUBECONFIG name (None: neither, ~/.kube/config is read);
    a :class:`ConfigException` naming them when none of them is a file."""
    if kubeconfig is not None:
        where, files = "--kubeconfig", [kubeconfig.expanduser()]
    else:
        where, listed = "KUBECONFIG", os.environ.get("KUBECONFIG", "")
        files = [Path(p).expanduser() for p in listed.split(os.pathsep) if p]
        if not files:
            return None
    if not any(f.is_file() for f in files):
        named = f"{where} names {', '.join(map(str, files))}: " if kubeconfig is None else ""
        raise ConfigException(f"{named}no such file")
    return files


def _check_context(files: list[Path], context: str) -> None:
    """A :class:`ConfigException` naming ``context`` and the contexts ``files`` have (names
    only) when none of them has it."""
    names: list[str] = []
    for file in files:
        if file.is_file():
            loaded = yaml.safe_load(file.read_text(encoding="utf-8")) or {}
            contexts = loaded.get("contexts") if isinstance(loaded, dict) else None
            names += [str(c.get("name")) for c in contexts or [] if isinstance(c, dict)]
    if context not in names:
        shown = ", ".join(sorted(set(names))) or "none"
        where = ", ".join(str(f) for f in files)
        raise ConfigException(f"no context {context!r} in kubeconfig {where} (it has: {shown})")


def _client_from_secret(access: ClusterAccess, namespace: str) -> Any:
    """Read the kubeconfig from a Secret of the cluster the reconciler runs against."""
    name, key = access.kubeconfig_secret or "", access.kubeconfig_secret_key
    data = fetch_secret_data(namespace, name, what="kubeconfig Secret").get(key)
    if data is None:
        raise AccessError(
            f"kubeconfig Secret {namespace}/{name} has no key '{key}' (spec.cluster."
            f"kubeconfigSecret.key; create it with kubectl -n {namespace} create secret generic "
            f"{name} --from-file={key}=KUBECONFIG)"
        )
    config = yaml.safe_load(data.decode("utf-8"))
    if not isinstance(config, dict):
        raise AccessError(f"kubeconfig Secret {namespace}/{name}: key '{key}' holds no kubeconfig")
    return k8s_config.new_client_from_config_dict(config, client_configuration=configuration())


def fetch_secret_data(namespace: str, name: str, what: str = "Secret") -> dict[str, bytes]:
    """The data of the Secret ``namespace/name`` of the cluster the reconciler runs against
    (in-cluster, else the local kubeconfig's), decoded; held in memory only. An
    :class:`AccessError` when it is missing or may not be read (the message names it and what
    to do, never its content), a :class:`~reconciler.errors.ServerError` when the server cannot
    be reached. ``what`` names it in messages (``kubeconfig Secret``)."""
    try:
        core = k8s_client.CoreV1Api(_home_client())
    except ConfigException as error:
        raise AccessError(
            f"{what} {namespace}/{name}: no in-cluster service account and no kubeconfig: {error}"
        ) from None
    try:
        with translated(f"read {what} {namespace}/{name}"):
            secret = core.read_namespaced_secret(
                name, namespace, _request_timeout=RequestTimeout().pair
            )
    except k8s_client.exceptions.ApiException as error:
        raise AccessError(f"{what} {namespace}/{name}: {_secret_refusal(error)}") from None
    return {key: base64.b64decode(value) for key, value in (secret.data or {}).items()}


def _secret_refusal(error: Any) -> str:
    """Why a Secret could not be read, and what to do, from the API's answer."""
    if error.status == 404:
        return (
            "not found (create it in that namespace, or fix the name; the namespace is "
            "--secret-namespace)"
        )
    if error.status in (401, 403):
        return (
            "forbidden: the daemon's identity may not get secrets there (grant get on "
            "secrets in that namespace, as deploy/base/rbac.yaml does, or fix --secret-namespace)"
        )
    return f"HTTP {error.status} {error.reason}"


def _home_client() -> Any:
    """The cluster the reconciler itself runs in (in-cluster), else the local kubeconfig's."""
    try:
        made = configuration()
        k8s_config.load_incluster_config(client_configuration=made)
        return k8s_client.ApiClient(made)
    except ConfigException:
        return k8s_config.new_client_from_config(client_configuration=configuration())
