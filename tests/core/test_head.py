"""The commit head (reconciler.core.head): the config repo's commit and, when the channels come
from a repository of their own, its commit too, kept as one text form and read back."""

from __future__ import annotations

from reconciler.core.head import Head


def test_a_head_keeps_both_commits_and_its_text_form() -> None:
    head = Head("a" * 40, "b" * 40)

    assert Head.parse(head.text) == head
    assert head.text == "a" * 40 + "+" + "b" * 40
    assert head.shown == "a" * 12
    assert Head.parse("c" * 40) == Head("c" * 40)
    assert Head.parse("") is None
