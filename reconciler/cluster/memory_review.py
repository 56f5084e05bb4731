"""The in-memory cluster's answers about who we are and what we may do (the
:class:`~reconciler.cluster.api.Reviewer` side of
:class:`~reconciler.cluster.memory.InMemoryCluster`): its server version, the user it takes us
for, and the permissions a test denied. Caller: the in-memory cluster.
"""

from __future__ import annotations

from reconciler.cluster.api import Permission
from reconciler.core.objects import ObjectRef


class MemoryReviewer:
    """Answers of ``reconciler check`` (server version, ``whoami``, ``can_i``), from the
    attributes a test sets; each call may meet an injected fault, as any other request."""

    version: str
    user: str
    denied: set[Permission]

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
        """See :meth:`reconciler.cluster.api.Reviewer.can_i`: refused when :attr:`denied`
        holds it, or holds it for every namespace (``namespace`` empty)."""
        self._enter("review", None)
        everywhere = Permission(permission.verb, permission.group, permission.resource)
        return permission not in self.denied and everywhere not in self.denied
