"""kafka-python's real TCP transport, reading a socket whose peer sent its last answer and closed before the read:
the answer reaches the protocol, then the close (a refused SASL password is an error-58 answer followed by the
broker's close; losing the answer made the Test button say "cannot reach Kafka")."""

from __future__ import annotations

import asyncio
import socket
from typing import Any

from airflow_chatter.adapters.kafka.transport import deliver_bytes_before_close


class _Net:
    """The few calls the transport makes on kafka-python's network loop; the socket is always ready."""

    async def wait_read(self, sock: socket.socket) -> None:
        return None

    def unregister_event(self, sock: socket.socket, events: int) -> None:
        return None

    def cancel(self, task: Any) -> None:
        return None


class _Protocol:
    _sensors = None

    def __init__(self) -> None:
        self.seen: list[tuple[str, Any]] = []

    def data_received(self, data: bytes) -> None:
        self.seen.append(("data", data))

    def connection_lost(self, error: BaseException | None) -> None:
        self.seen.append(("lost", type(error).__name__))


def _read_after_the_peer_closed(answer: bytes) -> list[tuple[str, Any]]:
    """What the protocol sees when the answer and the close wait together, with the fix installed as every client of
    the project has it (``KafkaSettings.client_config``)."""
    from kafka.net.transport import KafkaTCPTransport

    from airflow_chatter.adapters.kafka.settings import KafkaSettings

    KafkaSettings(bootstrap_servers="b1:9092").client_config()

    ours, peer = socket.socketpair()
    ours.setblocking(False)
    peer.sendall(answer)
    peer.close()  # both the answer and the end of stream now wait in our socket's buffer
    transport = KafkaTCPTransport(_Net(), ours)
    protocol = _Protocol()
    transport.set_protocol(protocol)
    transport._read = True
    asyncio.run(asyncio.wait_for(transport._read_from_sock(), timeout=5))
    return protocol.seen


def test_an_answer_that_arrives_with_the_close_reaches_the_protocol_before_the_close() -> None:
    seen = _read_after_the_peer_closed(b"error-58 answer")
    assert seen == [("data", b"error-58 answer"), ("lost", "KafkaConnectionError")], (
        "the broker's last answer is read before its close is reported, so the refusal is not lost"
    )


def test_a_close_without_bytes_is_reported_at_once() -> None:
    seen = _read_after_the_peer_closed(b"")
    assert seen == [("lost", "KafkaConnectionError")], "a bare close is still a lost connection"


def test_the_fix_is_installed_once_on_the_pinned_kafka_python() -> None:
    from kafka.net.transport import KafkaSSLTransport, KafkaTCPTransport

    from airflow_chatter.adapters.kafka.settings import KafkaSettings

    KafkaSettings(bootstrap_servers="b1:9092").client_config()  # every client's config installs it first

    before = (KafkaTCPTransport._sock_recv, KafkaSSLTransport._sock_recv)
    assert deliver_bytes_before_close() is True, "kafka-python's transports are where the wrapper expects them"
    assert (KafkaTCPTransport._sock_recv, KafkaSSLTransport._sock_recv) == before, "a second install wraps nothing"
    for recv in before:
        assert getattr(recv, "__chatter_delivers_bytes_before_close__", False), recv
