"""Why a Kafka connection failed, in words: kafka-python logs the cause but raises only a timeout.

When a broker refuses the handshake (a SASL client against a PLAINTEXT listener answers ``IllegalSaslStateError``;
a wrong password ``SaslAuthenticationFailedError``; a TLS client against a plain port an ``SSLError``),
kafka-python 3 logs the cause from its network thread (``kafka.net.connection``: "SaslHandshake failed",
"Connection lost: <error>"), retries with backoff, and what reaches the caller is ``KafkaTimeoutError: Unable to
bootstrap`` or ``Failed to update metadata``: "cannot reach Kafka", which sends the reader to check the network.

``ConnectionFailures`` listens to that logger while one call runs and keeps the errors of connections made with
these settings (same ``client_id`` and ``security_protocol``; another client of the process with both equal could
add its causes, which only matters if it fails at the same moment). ``explain()`` then names the handshake that
failed and what to change. It relies on log records, not on kafka-python internals: if that logger is switched off
below ERROR, nothing is found and the message is what it was before.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from airflow_chatter.adapters.kafka.errors import describe
from airflow_chatter.adapters.kafka.settings import KafkaSettings

__all__ = ["ConnectionFailures"]

_LOGGER = "kafka.net.connection"
#: Causes kept per call; a retry loop logs the same one again and again.
_MAX_CAUSES = 16
_SASL_STATE_ERRORS = ("IllegalSaslStateError", "UnsupportedVersionError")


class ConnectionFailures(logging.Handler):
    """The connection errors kafka-python logged for clients with these settings while ``listening`` ran."""

    def __init__(self, settings: KafkaSettings) -> None:
        super().__init__(logging.DEBUG)
        self._settings = settings
        self._guard = threading.Lock()
        self.causes: list[BaseException | str] = []

    @classmethod
    @contextmanager
    def listening(cls, settings: KafkaSettings) -> Iterator[ConnectionFailures]:
        """Collect causes while the block runs (the handler is removed again, whatever happens)."""
        failures = cls(settings)
        logger = logging.getLogger(_LOGGER)
        logger.addHandler(failures)
        try:
            yield failures
        finally:
            logger.removeHandler(failures)

    def emit(self, record: logging.LogRecord) -> None:
        args = record.args if isinstance(record.args, tuple) else ()
        if not args or not self._is_ours(args[0]):
            return
        found: BaseException | str | None = next((a for a in args if isinstance(a, BaseException)), None)
        if found is None and "SaslHandshake failed" in str(record.msg) and len(args) > 1:
            found = str(args[1])  # the error's class name
        if found is not None:
            with self._guard:
                if len(self.causes) < _MAX_CAUSES:
                    self.causes.append(found)

    def _is_ours(self, connection: Any) -> bool:
        config = getattr(connection, "config", None)
        if not isinstance(config, dict):
            return False
        return (
            config.get("client_id") == self._settings.client_id
            and config.get("security_protocol") == self._settings.security_protocol
        )

    def explain(self) -> str | None:
        """What the broker's handshake said, and what to change; ``None`` when nothing telling was logged."""
        with self._guard:
            causes = list(self.causes)
        names = [c if isinstance(c, str) else type(c).__name__ for c in causes]
        settings = self._settings
        protocol = settings.security_protocol
        if any(n in _SASL_STATE_ERRORS for n in names) and settings.uses_sasl:
            return (
                f"SASL handshake failed ({_first(names, _SASL_STATE_ERRORS)}): the broker's listener at "
                f"{settings.servers} does not speak SASL, but security_protocol is {protocol}; use the broker's SASL "
                "listener, or PLAINTEXT/SSL if this listener needs no SASL"
            )
        for cause in causes:
            name = cause if isinstance(cause, str) else type(cause).__name__
            text = cause if isinstance(cause, str) else describe(cause)
            if name == "UnsupportedSaslMechanismError":
                return f"SASL mechanism {settings.sasl_mechanism} refused by the broker: {text}"
            if name == "SaslAuthenticationFailedError":
                return (
                    f"SASL authentication failed for user {settings.sasl_username!r} with mechanism "
                    f"{settings.sasl_mechanism}: {text}; check the SASL username, password and mechanism"
                )
            if "SSL" in name or "CERTIFICATE" in text.upper():
                return (
                    f"TLS handshake failed ({text}) with security_protocol {protocol}: check that the listener "
                    "speaks TLS and that its certificate is trusted (ssl_cafile) and matches its host name"
                )
        return None


def _first(names: list[str], wanted: tuple[str, ...]) -> str:
    return next(n for n in names if n in wanted)
