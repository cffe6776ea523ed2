"""How the consumers of one announced batch resolved it: the rule that decides whether a stream's position may move
past the batch, shared by the pending-outbox stream and the topic-arrivals stream.

In Airflow the counts come from the shared-stream manager (``AdvanceOutcome``): ``accepted`` subscribers moved past
the batch and every trigger event they derived from it was persisted in the metadata database (or they refused it
for good), ``failed`` ones did not (the ack timed out: the persist never confirmed, or the triggerer was stopping).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Resolution:
    """``accepted`` / ``failed``: how many consumers handled the batch, and how many did not."""

    accepted: int
    failed: int

    def handled(self, *, announced: int) -> bool:
        """Whether the position may move past the batch: no consumer failed it, and at least one accepted it, unless
        it announced nothing (a batch of stamps only needs nobody: there is nothing to lose)."""
        return self.failed == 0 and (self.accepted > 0 or announced == 0)


__all__ = ["Resolution"]
