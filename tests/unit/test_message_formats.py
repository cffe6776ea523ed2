"""F-13: the CloudEvents binary-mode record, read back by the ``cloudevents`` SDK as an independent reader."""

from __future__ import annotations

import json

import pytest
from cloudevents.v1.kafka import KafkaMessage, from_binary

from airflow_chatter.drain.options import SourceOptions
from airflow_chatter.errors import ConfigurationError
from airflow_chatter.outbox.contract import Deliverable, verify
from airflow_chatter.outbox.document import OutboxMessage
from airflow_chatter.outbox.formats import DEFAULT_EVENT_TYPE, to_cloudevent
from airflow_chatter.outbox.mapping import to_outgoing_message
from airflow_chatter.ports import ReceivedMessage

TRACEPARENT = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"


def _deliverable(**context: object) -> Deliverable:
    doc = OutboxMessage("msg-1", "orders", '{"n":1}', "application/json", context).to_document(("/tenantId",), "t1")
    doc["_ts"] = 1_800_000_000
    verdict = verify(doc)
    assert isinstance(verdict, Deliverable)
    return verdict


def test_f_13_a_cloudevent_record_parses_with_the_sdk_and_carries_each_attribute() -> None:
    deliverable = _deliverable(
        traceparent=TRACEPARENT, tenant="t1", **{"Chatter.MessageType": "com.example.order.placed", "Order.Id": 7}
    )
    record = to_cloudevent(to_outgoing_message(deliverable, "t1"), deliverable, "src-1", now=0.0)
    event = from_binary(KafkaMessage(dict(record.headers), record.key, record.value), data_unmarshaller=bytes)
    attributes = event.get_attributes()
    assert attributes["specversion"] == "1.0" and attributes["id"] == "msg-1"
    assert (attributes["source"], attributes["type"]) == ("src-1", "com.example.order.placed")
    assert attributes["time"] == "2027-01-15T08:00:00Z", "the document's _ts as RFC 3339"
    assert attributes["datacontenttype"] == "application/json" and attributes["partitionkey"] == b"t1"
    assert (attributes["traceparent"], attributes["tenant"]) == (TRACEPARENT, "t1")
    assert json.loads(attributes["chattercontext"]) == {"Order.Id": 7}, "invalid attribute names travel together"
    assert event.get_data() == b'{"n":1}'
    assert "message-id" not in dict(record.headers)


def test_f_13_without_a_message_type_or_ts_the_defaults_apply() -> None:
    deliverable = _deliverable()
    deliverable = Deliverable(**{**deliverable.__dict__, "written_at": None})
    record = to_cloudevent(to_outgoing_message(deliverable, "t1"), deliverable, "src-1", now=0.0)
    headers = dict(record.headers)
    assert headers["ce_type"] == DEFAULT_EVENT_TYPE.encode() and headers["ce_time"] == b"1970-01-01T00:00:00Z"
    assert "ce_chattercontext" not in headers


def test_f_13_the_receiver_identity_is_read_from_either_format() -> None:
    chatter = ReceivedMessage("t", 0, 0, b"k", b"", (("message-id", b"m-1"),))
    cloudevent = ReceivedMessage("t", 0, 1, b"k", b"", (("ce_specversion", b"1.0"), ("ce_id", b"m-2")))
    neither = ReceivedMessage("t", 0, 2, b"k", b"", (("ce_source", b"s"),))
    assert (chatter.message_id, cloudevent.message_id, neither.message_id) == ("m-1", "m-2", None)


def test_f_13_message_format_defaults_to_chatter_and_a_bad_one_is_refused_naming_the_field() -> None:
    assert SourceOptions("s", "/tenantId").message_format == "chatter"
    assert SourceOptions("s", "/tenantId", message_format="cloudevents").message_format == "cloudevents"
    with pytest.raises(ConfigurationError, match="message_format"):
        SourceOptions("s", "/tenantId", message_format="avro")
