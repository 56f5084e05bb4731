"""A receiver per test, closed after it."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.support.receiver import Receiver


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    served = Receiver().start()
    yield served
    served.close()
