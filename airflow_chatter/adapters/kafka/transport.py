"""kafka-python's socket reads deliver the bytes that arrive together with the broker's close.

A broker that refuses a SASL password answers the ``SaslAuthenticate`` request with error 58 and closes the
connection at once (Kafka 4.1 sends both after ``connection.failed.authentication.delay.ms``). kafka-python 3.0's
transport reads a readable socket until it would block: when the answer and the close are both waiting, its
``_sock_recv`` returns the answer's bytes together with "socket disconnected", and ``_read_from_sock`` aborts without
handing the bytes to the protocol. The refusal is lost, every retry looks like a broken network, and what reaches
the caller is ``KafkaTimeoutError: Unable to bootstrap`` ("cannot reach Kafka"). Whether the client reads before the
close arrives is a race: a busy process (Airflow's api-server running the Test button) loses it nearly every time.

``deliver_bytes_before_close`` wraps ``_sock_recv`` of kafka-python's TCP and TLS transports: bytes read before a
close are returned without the error, and the close is reported by the next read (a socket at end of stream stays
readable and reads empty, so it is never missed). ``KafkaSettings.client_config`` installs it before any client is
built (once; later calls find it installed); a kafka-python without these transports is left alone. kafka-python is
pinned (constraints.txt); the unit test ``tests/unit/adapters/test_kafka_transport.py`` runs the real transport and
fails if an upgrade changes the read path under the wrapper.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

__all__ = ["deliver_bytes_before_close"]

_MARK = "__chatter_delivers_bytes_before_close__"
_Recv = Callable[[Any], tuple[bytes, BaseException | None]]


def _delivering(recv: _Recv) -> _Recv:
    @functools.wraps(recv)
    def sock_recv(transport: Any) -> tuple[bytes, BaseException | None]:
        data, error = recv(transport)
        if data and error is not None:
            return data, None  # the next read sees the close again and reports it
        return data, error

    setattr(sock_recv, _MARK, True)
    return sock_recv


def deliver_bytes_before_close() -> bool:
    """Make kafka-python hand the bytes read before a close to the protocol; True once installed (idempotent)."""
    try:
        from kafka.net import transport
    except ImportError:  # another kafka-python layout: nothing to fix here
        return False
    tcp = getattr(transport, "KafkaTCPTransport", None)
    if tcp is None or "_sock_recv" not in vars(tcp):
        return False
    for cls in (tcp, getattr(transport, "KafkaSSLTransport", None)):
        recv = vars(cls).get("_sock_recv") if cls is not None else None
        if recv is not None and not getattr(recv, _MARK, False):
            cls._sock_recv = _delivering(recv)  # type: ignore[union-attr]
    return True
