"""Which commits each runtime's desired state stayed the same through (pure).

A new commit in force reconciles only the runtimes it changes (the fleet diff); the others keep
the record of their last operation, made at an older commit. That runtime is in sync all the
same, as Argo CD calls an application Synced to a new revision whose manifests are the same:
:class:`UnchangedSince` keeps, per runtime, the commits accepted since its desired state last
changed, so that the status page shows it at the commit in force and not behind.

A frozen value the daemon keeps in memory and replaces at each commit it puts in force
(:meth:`UnchangedSince.advance`); a daemon that starts knows nothing of the commits before its
own and reconciles every runtime it owns at the commit in force, which puts them in sync
anyway. Caller: the daemon's source state (:mod:`reconciler.daemon.source_state`), which
its status page asks.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass, field

#: How many commits a runtime's run of unchanged ones keeps (the newest).
KEPT = 32


@dataclass(frozen=True, slots=True)
class UnchangedSince:
    """Per runtime, the commits (text form of a :class:`~reconciler.core.head.Head`), oldest
    first and ending with the commit in force, that all want the same of it."""

    runs: Mapping[str, tuple[str, ...]] = field(default_factory=dict)

    def advance(
        self, before: str, head: str, runtimes: Iterable[str], changed: Collection[str]
    ) -> UnchangedSince:
        """These runs once commit ``head`` is in force after ``before``; of ``runtimes`` (every
        one of ``head``), it changes ``changed``."""
        runs: dict[str, tuple[str, ...]] = {}
        for name in runtimes:
            run = self.runs.get(name, ())
            if name in changed:
                runs[name] = (head,)
            elif run and run[-1] == before:
                runs[name] = (*run[-(KEPT - 1) :], head)
            else:
                runs[name] = (before, head)
        return UnchangedSince(runs)

    def in_sync(self, runtime: str, synced: str, in_force: str) -> bool:
        """Whether ``runtime``, last synced at commit ``synced``, wants at commit ``in_force``
        what it wanted there (the same commit, or a run of commits that changed nothing of
        it)."""
        if not synced or not in_force:
            return False
        if synced == in_force:
            return True
        run = self.runs.get(runtime, ())
        return bool(run) and run[-1] == in_force and synced in run
