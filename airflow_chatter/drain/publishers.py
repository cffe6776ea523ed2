"""Which publisher a document goes to (F-03): the one its ``Chatter.Infrastructure.Type`` names, or the default."""

from __future__ import annotations

from collections.abc import Mapping

from airflow_chatter.errors import ConfigurationError, UnknownPublisherError
from airflow_chatter.outbox.contract import Deliverable
from airflow_chatter.ports import Publisher

#: The publisher a document naming no messaging infrastructure goes to (F-03).
DEFAULT_PUBLISHER = "kafka"


class PublisherTable:
    """``publishers`` is one ``Publisher`` (the default) or a mapping from infrastructure names to publishers that
    includes ``default`` or has exactly one entry (then that one is the default)."""

    def __init__(self, publishers: Mapping[str, Publisher] | Publisher, default: str = DEFAULT_PUBLISHER) -> None:
        table = {default: publishers} if isinstance(publishers, Publisher) else dict(publishers)
        if not table or not all(isinstance(p, Publisher) for p in table.values()):
            raise ConfigurationError("publishers", sorted(table), "must map infrastructure names to Publishers")
        if default not in table:
            if len(table) != 1:
                raise ConfigurationError("publishers", sorted(table), f"must include the default publisher {default!r}")
            default = next(iter(table))
        self._table = table
        self.default = table[default]
        self.default_name = default

    def names(self) -> list[str]:
        """The infrastructure names this table publishes to."""
        return list(self._table)

    def publisher_for(self, deliverable: Deliverable) -> Publisher:
        """The publisher ``deliverable`` names; ``UnknownPublisherError`` (a host concern, retried next run)."""
        name = deliverable.infrastructure
        if name is None:
            return self.default
        publisher = self._table.get(name) or self._table.get(name.strip().lower())
        if publisher is None:
            raise UnknownPublisherError(name, deliverable.message_id)
        return publisher


__all__ = ["DEFAULT_PUBLISHER", "PublisherTable"]
