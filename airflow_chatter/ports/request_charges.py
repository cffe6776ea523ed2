"""Where a request's charge goes: the sink of the calling thread, set around each call by whoever meters it.

F-11: every Cosmos request's charge is read from *that* request's response headers (``x-ms-request-charge``,
handed to the call's own ``response_hook``), never from ``client_connection.last_response_headers``, which every
request on the client overwrites. An adapter asks :func:`capture` for a hook while it builds a request; the hook
is bound to the sink current on that thread at that moment, so a charge reported later (a query page read while
iterating) still reaches the drain that made the request, and concurrent stamp threads each charge their own.

Nothing here imports an SDK or Airflow: adapters call in, the drain's metering (``drain/request_units.py``) sets
the sink.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from contextlib import AbstractContextManager
from typing import Any

from airflow_chatter.ports.thread_value import ThreadValue

#: The response header that carries a request's charge, in request units.
REQUEST_CHARGE_HEADER = "x-ms-request-charge"

#: ``sink(request_units)``, called once per request that reported a charge.
ChargeSink = Callable[[float], None]

_sink: ThreadValue[ChargeSink] = ThreadValue()


def current_sink() -> ChargeSink | None:
    """The sink requests made on this thread are charged to, or ``None``."""
    return _sink.get()


def charged_to(sink: ChargeSink | None) -> AbstractContextManager[None]:
    """Charge the requests made on this thread inside the block to ``sink`` (nesting restores the outer one)."""
    return _sink.bound(sink)


def charge_of(headers: Mapping[str, Any] | None) -> float | None:
    """The request charge a response's headers carry, or ``None`` when they carry none (or an unreadable one)."""
    if not headers:
        return None
    value = headers.get(REQUEST_CHARGE_HEADER)
    if value is None:
        return None
    try:
        charge = float(value)
    except (TypeError, ValueError):
        return None
    return charge if charge >= 0 else None


def report(charge: float | None) -> None:
    """Charge ``charge`` to this thread's sink (nothing when there is none or the charge is unknown)."""
    sink = _sink.get()
    if sink is not None and charge is not None:
        sink(charge)


def capture(extra: Callable[[Mapping[str, Any], Any], None] | None = None) -> Callable[[Mapping[str, Any], Any], None]:
    """A ``response_hook`` that charges this request to the sink current *now*, then calls ``extra`` if given."""
    sink = _sink.get()

    def hook(headers: Mapping[str, Any], body: Any) -> None:
        charge = charge_of(headers)
        if sink is not None and charge is not None:
            sink(charge)
        if extra is not None:
            extra(headers, body)

    return hook


__all__ = ["REQUEST_CHARGE_HEADER", "ChargeSink", "capture", "charge_of", "charged_to", "current_sink", "report"]
