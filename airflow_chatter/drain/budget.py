"""How much one drain of a lease may do: at most ``max_documents`` documents and ``max_seconds`` seconds."""

from __future__ import annotations

import time
from dataclasses import dataclass, field


@dataclass
class DrainBudget:
    """A drain's bounds (``None``: unbounded), counted from when it was made."""

    max_documents: int | None
    max_seconds: float | None
    started: float = field(default_factory=time.monotonic)

    def exhausted(self, documents: int) -> bool:
        if self.max_documents is not None and documents >= self.max_documents:
            return True
        return self.max_seconds is not None and time.monotonic() - self.started >= self.max_seconds

    def page_size(self, max_batch_size: int, documents: int) -> int:
        """The next page's size: ``max_batch_size``, or what is left of ``max_documents`` when that is less."""
        if self.max_documents is None:
            return max_batch_size
        return max(1, min(max_batch_size, self.max_documents - documents))


__all__ = ["DrainBudget"]
