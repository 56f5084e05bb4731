"""reconciler: a declarative GitOps reconciler for Kubernetes modules across a fleet of clusters."""

__version__ = "0.1.0"
