"""End-to-end tests on a real Kubernetes API server (marker ``kube``): the product driven through
its command line (``reconciler sync``, ``status``, ``operations``) and as a daemon process following
a ``git daemon``, against the control plane of ``tests/support/kube_control_plane.py``. Helpers in
:mod:`tests.support.e2e_harness` and :mod:`tests.support.e2e_world`; each test works in names of
its own and cleans up."""
