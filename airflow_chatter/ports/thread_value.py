"""A value each thread sets around the calls it makes: the request-charge sink and the request priority.

Both are read by an adapter while it builds a request and set by whoever makes the request on the relay's behalf;
the stamp lanes and the read-ahead run on their own threads, so each sets its own. Nesting restores the outer value.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Generic, TypeVar

T = TypeVar("T")


class ThreadValue(Generic[T]):
    """One thread-local value, ``None`` until a block sets it on that thread."""

    def __init__(self) -> None:
        self._local = threading.local()

    def get(self) -> T | None:
        """The value set on this thread, or ``None``."""
        value: T | None = getattr(self._local, "value", None)
        return value

    @contextmanager
    def bound(self, value: T | None) -> Iterator[None]:
        """``value`` on this thread inside the block; the outer value again after it."""
        outer = self.get()
        self._local.value = value
        try:
            yield
        finally:
            self._local.value = outer


__all__ = ["ThreadValue"]
