"""Fault injection for the in-memory container: which calls fail, with what, before or after they apply.

Tests reach the drain's failure paths through a :class:`FaultPlan` (``container.faults``) instead of mocks, so a
failure is raised exactly where the Cosmos adapter would raise it: from a port method, as a port error.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from airflow_chatter.ports import PartitionKey

#: Port method names a fault can target ("*" targets all of them).
OPERATIONS = frozenset(
    "properties create read replace upsert delete patch execute_batch query read_feed_ranges is_feed_range_subset "
    "feed_range_overlap read_change_feed".split()
)


@dataclass(frozen=True)
class OperationCall:
    """One call of a port method, as fault predicates and the check/apply hooks see it.

    ``number`` counts this operation's calls on the container, from 1. ``arguments`` holds the remaining keyword
    arguments (``document``, ``operations``, ``if_match``, ``sql``, ``feed_range``...).
    """

    operation: str
    number: int
    item_id: str | None = None
    partition_key: PartitionKey | None = None
    arguments: Mapping[str, Any] = field(default_factory=dict)


ErrorSource = BaseException | Callable[[OperationCall], BaseException]


@dataclass
class FaultRule:
    """Fail matching calls of one operation; see :meth:`FaultPlan.fail` for the meaning of each field."""

    operation: str
    error: ErrorSource
    on_call: int | None = None
    times: int | None = None
    when: Callable[[OperationCall], bool] | None = None
    after_apply: bool = False
    matched: int = 0
    fired: int = 0

    def fires_for(self, call: OperationCall) -> bool:
        """Count a matching call and say whether this rule fails it."""
        if self.operation not in ("*", call.operation) or (self.when is not None and not self.when(call)):
            return False
        self.matched += 1
        due = self.times is None or self.fired < self.times
        hit = self.matched == self.on_call if self.on_call is not None else due
        self.fired += hit
        return hit


class FaultPlan:
    """The faults a test wants; ``container.faults``.

    Example: ``container.faults.fail("patch", on_call=3, error=Throttled(retry_after_ms=10))``.
    """

    def __init__(self) -> None:
        self.rules: list[FaultRule] = []

    def fail(
        self,
        operation: str,
        *,
        error: ErrorSource,
        on_call: int | None = None,
        times: int | None = None,
        when: Callable[[OperationCall], bool] | None = None,
        after_apply: bool = False,
    ) -> FaultRule:
        """Make calls of ``operation`` (a port method name, or ``"*"``) raise ``error``.

        With no ``on_call``/``times`` every matching call fails; ``on_call=n`` fails only the n-th matching call
        counted from now; ``times=n`` fails the next n matching calls. ``when`` restricts matching to calls for
        which it returns true (e.g. ``lambda call: call.item_id == "x"``). ``error`` is an exception, or a
        callable building one from the call. With ``after_apply`` the operation is applied *and then* the error
        raised: the ambiguous outcome of a timeout whose write landed.
        """
        if operation != "*" and operation not in OPERATIONS:
            # NOTE: a misspelt operation would silently never fire and the test would pass for the wrong reason.
            raise ValueError(f"unknown operation {operation!r}; expected one of {sorted(OPERATIONS)}")
        if on_call is not None and times is not None:
            raise ValueError("give on_call or times, not both")
        rule = FaultRule(operation, error, on_call=on_call, times=times, when=when, after_apply=after_apply)
        self.rules.append(rule)
        return rule

    def clear(self) -> None:
        """Remove every rule."""
        self.rules.clear()

    def raise_due(self, call: OperationCall, *, after_apply: bool) -> None:
        """Raise the first due fault for a call, before it applies or (``after_apply``) after it committed."""
        for rule in self.rules:
            if rule.after_apply == after_apply and rule.fires_for(call):
                raise rule.error if isinstance(rule.error, BaseException) else rule.error(call)
