"""Module lifecycle on one runtime (L1-L11): observe the cluster, plan, apply, prune and delete, and
report each module's status.
"""
