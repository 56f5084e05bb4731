"""What a review's second validation takes from the first: the same answers, less work.

Both revisions of a generated fleet in a real git repository, read and validated by one
:class:`~reconciler.review.fleet.Review` (one parse cache, one memo). A runtime whose document
is the same blob at both revisions is built once, and resolved once unless what it resolves
through (the modules, the channels it names) changed; the results are compared with validating each
revision on its own, and the work saved is counted, never timed.
"""

from __future__ import annotations

import subprocess
from dataclasses import replace
from pathlib import Path

from reconciler.core.model import ConfigRepo, Runtime
from reconciler.core.resolve import resolve_runtime
from reconciler.review.fleet import Review, Side
from reconciler.source.loader import ReadOptions
from tests.support.fleet_generator import generate_fleet

GIT = ["git", "-c", "user.email=test@example.io", "-c", "user.name=test"]


def _fleet(root: Path) -> None:
    generate_fleet(root, 60, modules=6, versions=3)
    for args in (["init", "-q"], ["add", "-A"], ["commit", "-qm", "fleet"]):
        subprocess.run([*GIT, *args], cwd=root, check=True)
    channel = root / "channels" / "regular.yaml"
    channel.write_text(channel.read_text().replace("mod-03: 1.0.0", "mod-03: 1.1.0"))
    runtime = root / "runtimes" / "rt-00001.yaml"
    runtime.write_text(runtime.read_text().replace("tier: ", "tier: x"))


def _alone(root: Path, revision: str | None) -> ConfigRepo:
    """One revision validated by itself: nothing shared with the other."""
    review = Review(ReadOptions())
    repo, _ = review.load(Side(root, revision), "alone")
    return repo


def test_an_unchanged_runtime_document_is_built_once(tmp_path: Path) -> None:
    _fleet(tmp_path)
    review = Review(ReadOptions())
    (base, _), (head, _) = review.load_both(Side(tmp_path, "HEAD"), Side(tmp_path))

    shared = [n for n in head.runtimes if head.runtimes[n] is base.runtimes[n]]
    assert len(shared) == len(head.runtimes) - 1  # all but the one whose file changed
    assert head.runtimes["rt-00001"] is not base.runtimes["rt-00001"]
    assert review.memo.built == len(head.runtimes) + 1
    assert base == _alone(tmp_path, "HEAD")
    assert head == _alone(tmp_path, None)


def _channels(runtime: Runtime) -> set[str]:
    return {runtime.channel, *(ref.channel for ref in runtime.modules if ref.channel)}


def test_a_runtime_resolves_again_only_through_a_changed_channel(tmp_path: Path) -> None:
    _fleet(tmp_path)
    review = Review(ReadOptions())
    (base, _), (head, _) = review.load_both(Side(tmp_path, "HEAD"), Side(tmp_path))

    untouched = [
        n
        for n, r in head.runtimes.items()
        if r is base.runtimes[n] and "regular" not in _channels(r)
    ]
    assert 10 < len(untouched) < len(head.runtimes) - 10
    assert review.memo.carried == len(untouched)
    for runtime in head.runtimes.values():  # as resolved from scratch
        assert resolve_runtime(head, runtime) == resolve_runtime(replace(head), runtime)
    assert head == _alone(tmp_path, None)


def test_a_changed_module_resolves_every_runtime_again(tmp_path: Path) -> None:
    _fleet(tmp_path)
    module = tmp_path / "modules" / "mod-02" / "module.yaml"
    module.write_text(module.read_text().replace("spec:\n", "spec:\n  mandatory: true\n"))
    review = Review(ReadOptions())
    _, (head, _) = review.load_both(Side(tmp_path, "HEAD"), Side(tmp_path))

    assert review.memo.carried == 0
    assert all(
        r.module("mod-02") for r in (resolve_runtime(head, x) for x in head.runtimes.values())
    )
    assert head == _alone(tmp_path, None)
