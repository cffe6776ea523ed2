"""Change-feed continuation tokens as azure-cosmos writes them: the two fixes a drain needs before it resumes one."""

from __future__ import annotations

import base64
import json
from typing import Any

from airflow_chatter.ports import BadRequest, FeedRange, epk_bounds, epk_range

__all__ = ["fix_point_in_time_token", "narrow_continuation"]


def fix_point_in_time_token(token: str) -> str:
    """Work around azure-sdk-for-python #43018 (open, still in 4.17.1): a token whose ``startFrom`` is a point in
    time cannot be resumed (``datetime.fromtimestamp`` is given milliseconds: "year 58883 is out of range").

    Once every range of the token has a position, the start is never consulted again, so it becomes "Beginning".
    A range without a position yet keeps the point in time, written in seconds so that 4.17.1 reads it right (a
    fixed SDK would read it as 1970: it re-reads more, never less).
    """
    try:
        state = json.loads(base64.b64decode(token, validate=True))
    except (ValueError, TypeError):
        return token
    start = state.get("startFrom") or {}
    if not isinstance(state, dict) or start.get("Type") != "PointInTime":
        return token
    ranges = (state.get("continuation") or {}).get("continuation") or []
    if ranges and all(r.get("token") for r in ranges):
        state["startFrom"] = {"Type": "Beginning"}
    else:
        state["startFrom"] = {"Type": "PointInTime", "PointInTimeMs": int(start["PointInTimeMs"]) // 1000}
    return base64.b64encode(json.dumps(state).encode()).decode()


def narrow_continuation(token: str, feed_range: FeedRange) -> str:
    """``token`` restricted to ``feed_range`` when it reaches wider (a split's child resuming its parent's token).

    WHY: azure-cosmos reads the range a continuation names and ignores any other, so a child lease handed its
    parent's continuation (F-04) would read the whole parent range, and so would its sibling: every change of the
    parent's range published twice after each split. The continuation's range and each of its per-range positions
    are cut to the EPK bounds of ``feed_range`` (EPK strings order as strings, as the SDK's routing ranges compare
    them), keeping the positions, so the child resumes exactly where the parent stood; the SDK then sends those
    bounds as ``x-ms-start-epk`` / ``x-ms-end-epk``. Positions are cut even when the named range already matches:
    when the partition under a sub-range position splits, the SDK replaces the position by the children's whole
    ranges (``FeedRangeCompositeContinuation.handle_feed_range_gone``).

    A token that needs no cut, or that this function cannot read (not a v2 state, a partition-key scope), is
    returned as it is: the SDK decides about it. ``BadRequest`` when the token's range does not contain
    ``feed_range``: resuming it there would skip or repeat changes (the in-memory container refuses it too).
    """
    try:
        wanted = feed_range.epk_bounds()
        state = json.loads(base64.b64decode(token, validate=True))
        scope = state["continuation"]
        named = epk_bounds(scope["Range"])
        positions = scope["continuation"]
    except (ValueError, TypeError, KeyError, AttributeError):
        return token
    if wanted is None or named is None or not isinstance(positions, list):
        return token
    low, high = wanted
    if not (named[0] <= low and high <= named[1]):
        raise BadRequest(
            f"the continuation is for the EPK range [{named[0]!r}, {named[1]!r}), which does not contain the "
            f"requested feed range [{low!r}, {high!r})"
        )
    changed = named != wanted
    narrowed: list[dict[str, Any]] = []
    for position in positions:
        span = epk_bounds(position.get("range")) if isinstance(position, dict) else None
        if span is None:
            return token  # a shape this function does not know: leave it to the SDK
        cut = (max(span[0], low), min(span[1], high))
        if cut == span:
            narrowed.append(position)
            continue
        changed = True
        if cut[0] < cut[1]:
            narrowed.append({**position, "range": epk_range(*cut)})
    if not changed:
        return token
    if not narrowed:
        raise BadRequest(f"the continuation holds no position inside the requested feed range [{low!r}, {high!r})")
    scope["Range"] = epk_range(low, high)
    scope["continuation"] = narrowed
    return base64.b64encode(json.dumps(state).encode()).decode()
