"""The in-memory cluster's answers about who we are and what we may do (the
:class:`~reconciler.cluster.api.Reviewer` side of
:class:`~reconciler.cluster.memory.InMemoryCluster`): its server version, the user it takes us
for, the permissions a test denied or granted in some namespaces only (as a Role there), and
the 403 a list or a watch it does not allow is refused with, as a server's RBAC refuses it.
Caller: the in-memory cluster.
"""

from __future__ import annotations

from reconciler.cluster.api import KindInfo, Permission
from reconciler.core.objects import ObjectRef
from reconciler.errors import ForbiddenError

#: What a refusal adds, as the real cluster's errors do (reconciler.cluster.kube_errors).
FORBIDDEN_HINT = (
    "the identity lacks this permission on this cluster: bind it to the role "
    "`reconciler rbac REPO` prints, then `reconciler check REPO` names what is missing"
)


class MemoryReviewer:
    """Answers of ``reconciler check`` (server version, ``whoami``, ``can_i``), from the
    attributes a test sets; each call may meet an injected fault, as any other request.
    :attr:`denied` holds permissions refused (in every namespace when given without one);
    :attr:`only_in` permissions (given without a namespace) granted only in the namespaces
    it names, refused in all namespaces at once and in the others."""

    version: str
    user: str
    denied: set[Permission]
    only_in: dict[Permission, set[str]]

    def _enter(self, operation: str, ref: ObjectRef | None) -> None:
        raise NotImplementedError

    def server_version(self) -> str:
        """See :meth:`reconciler.cluster.api.Reviewer.server_version`."""
        self._enter("version", None)
        return self.version

    def whoami(self) -> str:
        """See :meth:`reconciler.cluster.api.Reviewer.whoami`."""
        self._enter("review", None)
        return self.user

    def can_i(self, permission: Permission) -> bool:
        """See :meth:`reconciler.cluster.api.Reviewer.can_i`."""
        self._enter("review", None)
        return self._allowed(permission)

    def _allowed(self, permission: Permission) -> bool:
        everywhere = Permission(permission.verb, permission.group, permission.resource)
        if permission in self.denied or everywhere in self.denied:
            return False
        namespaces = self.only_in.get(everywhere)
        return namespaces is None or permission.namespace in namespaces

    def _refuse_unless_allowed(self, verb: str, info: KindInfo, namespace: str | None) -> None:
        """:class:`ForbiddenError` when the identity may not ``verb`` the kind of ``info`` in
        ``namespace`` (None: in all namespaces), worded as the server's 403."""
        if self._allowed(Permission(verb, info.group, info.plural, namespace or "")):
            return
        resource = f"{info.plural}.{info.group}" if info.group else info.plural
        scope = f'in the namespace "{namespace}"' if namespace else "at the cluster scope"
        raise ForbiddenError(
            f'{verb} {info.kind}: 403 {resource} is forbidden: User "{self.user}" cannot '
            f'{verb} resource "{info.plural}" in API group "{info.group}" {scope} '
            f"({FORBIDDEN_HINT})"
        )
