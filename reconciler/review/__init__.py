"""Reviewing a change to the config repo: the use case above the adapters.

:mod:`reconciler.review.fleet` loads the repo at two revisions through the git source, observes
live clusters through the lifecycle when asked, and runs the pure fleet diff of
:mod:`reconciler.core.fleetdiff`. It sits above ``operations`` (DESIGN.md section 5): the source
and cluster adapters below it never import it. Callers: ``reconciler diff --base``, bench.
"""
