"""F-07: a delivery whose partition key cannot be read from its Kafka key is refused loud, naming the record."""

from __future__ import annotations

import pytest

from airflow_chatter.inbox.errors import MissingIdentityError
from airflow_chatter.inbox.identity import ReceivedMessage, kafka_key_partition_key


def _message(key: bytes | None) -> ReceivedMessage:
    return ReceivedMessage(topic="orders", partition=2, offset=41, key=key, value=b"{}")


@pytest.mark.parametrize(
    ("paths", "key", "match"),
    [
        (("/customerId",), None, "has no Kafka key"),
        (("/customerId",), b"\xff\xfe", "has a Kafka key it cannot read"),
        (("/tenant", "/customer"), b"not json", "has a Kafka key it cannot read"),
        (("/tenant", "/customer"), b'"a string"', "not a JSON array of values"),
    ],
)
def test_f_07_an_unreadable_kafka_key_is_a_missing_identity_naming_the_record(
    paths: tuple[str, ...], key: bytes | None, match: str
) -> None:
    resolve = kafka_key_partition_key(paths)
    with pytest.raises(MissingIdentityError, match=match) as caught:
        resolve(_message(key))
    assert "orders" in str(caught.value) and "41" in str(caught.value), "the error names the record"


def test_f_02_a_readable_key_is_the_partition_key_as_a_string_or_the_json_array_of_values() -> None:
    assert kafka_key_partition_key(("/customerId",))(_message(b"c-7")) == "c-7"
    assert kafka_key_partition_key(("/t", "/c"))(_message(b'["acme","c-7"]')) == ["acme", "c-7"]
