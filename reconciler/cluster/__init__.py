"""Clusters: the interface every part of the product uses to read and change a Kubernetes
cluster, and its implementations (``memory``: in-memory, for tests, benchmarks and offline
plans from a snapshot; ``kube``: the real API server through the official client)."""
