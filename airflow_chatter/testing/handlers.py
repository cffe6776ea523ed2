"""The one fault vocabulary of the test doubles: a handler is a function of one call (a message handed to
``FakePublisher``, an operation of ``MemoryDocumentContainer``) that returns ``None`` to let it succeed or the error
it fails with. ``first_of`` arms several handlers in turn."""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

__all__ = ["first_of"]

_Call = TypeVar("_Call")


def first_of(
    *handlers: Callable[[_Call], BaseException | None] | None,
) -> Callable[[_Call], BaseException | None]:
    """The first error any of ``handlers`` gives a call, asked in order (a later one is not asked once one has
    failed it): faults armed one after another. ``None`` entries (nothing armed) are skipped."""
    armed = [handler for handler in handlers if handler is not None]

    def handle(call: _Call) -> BaseException | None:
        for handler in armed:
            error = handler(call)
            if error is not None:
                return error
        return None

    return handle
