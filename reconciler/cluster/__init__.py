"""Clusters: the interface every part of the product uses to read and change a Kubernetes
cluster, which cluster it is (:class:`~reconciler.cluster.api.ClusterIdentity`), and its
implementations (``memory``: in-memory, for tests, benchmarks and offline plans from a snapshot;
``snapshot``: a recorded file; ``kube``: the real API server through the official client). An
adapter beside :mod:`reconciler.source` (neither imports the other)."""
