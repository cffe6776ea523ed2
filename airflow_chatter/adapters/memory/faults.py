"""Fault injection for the in-memory container: a handler of each operation, as ``FakePublisher`` has one of each
message (``airflow_chatter.testing.handlers``).

``container.handler(call)`` is asked before every port call applies (``call.applied`` false) and again after it
committed (``call.applied`` true); it returns ``None`` to let the call go on or the error the call raises, exactly
where the Cosmos adapter would raise it: from a port method, as a port error. After the commit, the error is the
ambiguous outcome of a timeout whose write landed. ``fail`` builds the handlers tests need; ``first_of`` arms several.
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
    """One call of a port method, as fault handlers and the check/apply hooks see it.

    ``number`` counts this operation's calls on the container, from 1. ``arguments`` holds the remaining keyword
    arguments (``document``, ``operations``, ``if_match``, ``sql``, ``feed_range``...). ``applied``: the handler is
    asked after the call committed.
    """

    operation: str
    number: int
    item_id: str | None = None
    partition_key: PartitionKey | None = None
    arguments: Mapping[str, Any] = field(default_factory=dict)
    applied: bool = False


#: What the container does with one call: ``None`` lets it go on, an exception is raised from it.
OperationHandler = Callable[[OperationCall], BaseException | None]

ErrorSource = BaseException | Callable[[OperationCall], BaseException]


def fail(
    operation: str,
    *,
    error: ErrorSource,
    on_call: int | None = None,
    times: int | None = None,
    when: Callable[[OperationCall], bool] | None = None,
    after_apply: bool = False,
) -> OperationHandler:
    """A handler making calls of ``operation`` (a port method name, or ``"*"``) raise ``error``.

    With no ``on_call``/``times`` every matching call fails; ``on_call=n`` fails only the n-th matching call the
    handler is asked about; ``times=n`` fails the next n matching calls. ``when`` restricts matching to calls for
    which it returns true (e.g. ``lambda call: call.item_id == "x"``). ``error`` is an exception, or a callable
    building one from the call. With ``after_apply`` the operation is applied *and then* the error raised: the
    ambiguous outcome of a timeout whose write landed.
    """
    if operation != "*" and operation not in OPERATIONS:
        # NOTE: a misspelt operation would silently never fire and the test would pass for the wrong reason.
        raise ValueError(f"unknown operation {operation!r}; expected one of {sorted(OPERATIONS)}")
    if on_call is not None and times is not None:
        raise ValueError("give on_call or times, not both")
    matched = fired = 0

    def handle(call: OperationCall) -> BaseException | None:
        nonlocal matched, fired
        if call.applied != after_apply or operation not in ("*", call.operation):
            return None
        if when is not None and not when(call):
            return None
        matched += 1
        hit = matched == on_call if on_call is not None else times is None or fired < times
        if not hit:
            return None
        fired += 1
        return error if isinstance(error, BaseException) else error(call)

    return handle
