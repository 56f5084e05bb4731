"""The world of one end-to-end test: the session's real control plane, the test's own kubectl, a
config repo whose names carry a suffix of the test's own (modules, their namespaces and CRD
group, the system namespace, runtimes), a discovery cache as a user's machine keeps it (one
folder for all of the test's commands), and the cleanup of every namespace and CRD it made."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.e2e_world import World, world_of
from tests.support.kube_control_plane import ControlPlane


@pytest.fixture
def world(kube_control_plane: ControlPlane, tmp_path: Path) -> Iterator[World]:
    yield from world_of(kube_control_plane, tmp_path)
