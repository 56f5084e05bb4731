"""Module lifecycle on one runtime (L1-L15): observe the cluster, plan, apply, prune and delete, and
report each module's status.
"""
