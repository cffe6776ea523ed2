"""Which identity a delivery is deduplicated on, and which partition its unit of work writes (F-07).

**The decision.** Producers control ``message-id``: it may be reused, collide across producers, or be absent. So:

* by default a delivery's identity is its ``message-id`` header (what the drain writes, F-02), and a user may supply
  an identity function instead (for example ``topic/partition/offset``, or a business key in the body);
* every Inbox Marker is **scoped to its receiver** (a consumer name, by default the consumer group), so two different
  consumers of one message writing to one container never skip each other's work;
* no identity means fail loud: the delivery is neither processed nor acknowledged (``MissingIdentityError``).

Nothing here imports Airflow.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence

from airflow_chatter.inbox.errors import MissingIdentityError
from airflow_chatter.ports import MESSAGE_ID_HEADER, PartitionKey, ReceivedMessage

#: A user identity function: the delivery's identity, or ``None``/blank when it has none.
IdentityFunction = Callable[[ReceivedMessage], "str | None"]
#: A partition-key resolver: which partition of the container the delivery's unit of work writes.
PartitionKeyResolver = Callable[[ReceivedMessage], PartitionKey]


def message_id_identity(message: ReceivedMessage) -> str | None:
    """The default identity: the ``message-id`` header, strict UTF-8; ``None`` when absent or not UTF-8."""
    return message.message_id


def topic_partition_offset_identity(message: ReceivedMessage) -> str:
    """An identity for topics whose producers set no usable ``message-id``: where the record sits in the log.

    It deduplicates redeliveries of one record, never a producer's retry that wrote the same event twice.
    """
    return f"{message.topic}/{message.partition}/{message.offset}"


def delivery_identity(message: ReceivedMessage, identity: IdentityFunction = message_id_identity) -> str:
    """The identity ``identity`` gives the delivery; ``MissingIdentityError`` for none, blank, or a non-string."""
    value = identity(message)
    if not isinstance(value, str) or not value.strip():
        reason = (
            f"has no usable {MESSAGE_ID_HEADER!r} header"
            if identity is message_id_identity
            else f"got identity {value!r} from {getattr(identity, '__qualname__', identity)!r}"
        )
        raise MissingIdentityError(message.topic, message.partition, message.offset, reason)
    return value


def kafka_key_partition_key(paths: Sequence[str]) -> PartitionKeyResolver:
    """The default resolver: the Kafka key is the document's partition key (F-02), so the delivery's writes land
    in the partition of the aggregate that produced it. One path: the key as a string; several: the key's compact
    JSON array. A record without a key raises ``MissingIdentityError`` (not processed, not acknowledged).
    """
    hierarchical = len(tuple(paths)) > 1

    def resolve(message: ReceivedMessage) -> PartitionKey:
        if message.key is None:
            raise MissingIdentityError(
                message.topic, message.partition, message.offset, "has no Kafka key to resolve its partition key from"
            )
        try:
            text = message.key.decode("utf-8")
            values = json.loads(text) if hierarchical else text
        except ValueError as error:  # not UTF-8 (UnicodeDecodeError), or not JSON for a hierarchical key
            raise MissingIdentityError(
                message.topic, message.partition, message.offset, f"has a Kafka key it cannot read ({error})"
            ) from None
        if not hierarchical:
            return text
        if not isinstance(values, list):
            raise MissingIdentityError(
                message.topic, message.partition, message.offset, f"has key {text!r}, not a JSON array of values"
            )
        return values

    return resolve


__all__ = [
    "IdentityFunction",
    "PartitionKeyResolver",
    "ReceivedMessage",
    "delivery_identity",
    "kafka_key_partition_key",
    "message_id_identity",
    "topic_partition_offset_identity",
]
