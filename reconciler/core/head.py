"""The commit in force, as a value (pure).

A fleet is defined by one commit of the config repo, and, when its channels live in a git
repository of their own (``channelsFrom.git``), one commit of that repository too. :class:`Head`
holds both; its text form ``config+channels`` (or ``config`` alone) is what the state store
keeps and what ``/status`` and inventories show. Callers: the daemon, the operations and their
store, the CLI.
"""

from __future__ import annotations

from dataclasses import dataclass

#: How many characters of a commit id messages show.
SHOWN = 12


@dataclass(frozen=True, slots=True)
class Head:
    """A config repo commit and, with channels apart, the channels repository's commit."""

    config: str
    channels: str | None = None

    @classmethod
    def parse(cls, text: str) -> Head | None:
        """Inverse of :attr:`text`; ``None`` for the empty text (no commit: a CLI run)."""
        if not text:
            return None
        config, plus, channels = text.partition("+")
        return cls(config, channels if plus and channels else None)

    @property
    def text(self) -> str:
        """``config+channels``, or ``config`` when the channels come from the config repo."""
        return f"{self.config}+{self.channels}" if self.channels else self.config

    @property
    def shown(self) -> str:
        """The config commit, short, for messages and logs."""
        return self.config[:SHOWN]

    def __str__(self) -> str:
        return self.text


def head_text(head: Head | None) -> str:
    """The text form of ``head``; empty for none."""
    return head.text if head is not None else ""
