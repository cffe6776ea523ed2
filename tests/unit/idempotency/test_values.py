"""Keys, item ids, stored responses and the classification order (F-08, IDM-C02, IDM-C05, IDM-C06)."""

from __future__ import annotations

from datetime import timedelta

import pytest

from airflow_chatter.idempotency import (
    AlreadyInFlight,
    BodyHashMismatch,
    IdempotencyKeyTooLongError,
    IdempotencyOptions,
    InvalidIdempotencyRequestError,
    Replay,
    StoredResponse,
    encode_item_id,
    validate_key,
)
from airflow_chatter.idempotency.decision import Entry, Takeover, decide, retry_after
from airflow_chatter.ports.idempotency import decode_item_id
from airflow_chatter.testing.clock import DEFAULT_START

OPTIONS = IdempotencyOptions(ttl=timedelta(hours=1), reservation_timeout=timedelta(seconds=30))
T0 = DEFAULT_START


def test_idm_c02_the_item_id_is_the_unpadded_base64url_of_the_key() -> None:
    assert encode_item_id("idempotency-key") == "aWRlbXBvdGVuY3kta2V5"
    assert encode_item_id("a/b?c#d\\e") == "YS9iP2MjZFxl"
    assert "=" not in encode_item_id("ab") and decode_item_id(encode_item_id("ab")) == "ab"


def test_idm_c02_item_ids_never_contain_characters_cosmos_refuses() -> None:
    item_id = encode_item_id("\xff\xfe/\\?#" * 20)
    assert not set(item_id) & set("/\\?#+=")


def test_f08_the_longest_ascii_key_fits_the_id_limit_and_a_longer_one_names_the_200_character_limit() -> None:
    assert len(encode_item_id("k" * 200)) == 267
    assert validate_key("k" * 200) == "k" * 200
    with pytest.raises(IdempotencyKeyTooLongError, match="201 characters long, over the limit of 200") as caught:
        validate_key("k" * 201)
    assert caught.value.limit == 200


def test_f08_a_key_within_200_characters_whose_id_is_over_1023_bytes_names_the_id_limit() -> None:
    with pytest.raises(IdempotencyKeyTooLongError, match="1067 bytes, over the Cosmos DB id limit of 1023") as caught:
        validate_key("\U0001f600" * 200)
    assert caught.value.limit == 1023


@pytest.mark.parametrize("bad", [None, 7, b"bytes", ""])
def test_f08_a_key_that_is_not_a_non_empty_string_is_refused(bad: object) -> None:
    with pytest.raises(InvalidIdempotencyRequestError, match="idempotency key"):
        validate_key(bad)


def test_a_lone_surrogate_key_is_refused_as_not_utf8() -> None:
    with pytest.raises(InvalidIdempotencyRequestError, match="UTF-8"):
        validate_key("\ud800")


def test_stored_response_header_names_are_case_insensitive_and_values_keep_their_order() -> None:
    response = StoredResponse(201, [("Set-Thing", "a"), ("set-thing", "b"), ("Location", "/x")], b"{}", "fp")
    assert response.headers == {"Set-Thing": ("a", "b"), "Location": ("/x",)}
    assert response.header("SET-THING") == ("a", "b") and response.header("missing") == ()
    assert response == StoredResponse(201, {"set-thing": ["a", "b"], "LOCATION": ["/x"]}, b"{}", "fp")


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"status_code": 99}, "status_code"),
        ({"status_code": True}, "status_code"),
        ({"body": "text"}, "body"),
        ({"fingerprint": ""}, "fingerprint"),
        ({"headers": {"X": "not-a-list"}}, "must map to a sequence"),
        ({"headers": {"": ["v"]}}, "header name"),
    ],
)
def test_a_malformed_stored_response_is_refused_naming_the_field(kwargs: dict[str, object], field: str) -> None:
    arguments: dict[str, object] = {"status_code": 200, "headers": {}, "body": b"", "fingerprint": "fp"} | kwargs
    with pytest.raises(InvalidIdempotencyRequestError, match=field):
        StoredResponse(**arguments)  # type: ignore[arg-type]


@pytest.mark.parametrize("name", ["ttl", "reservation_timeout"])
def test_options_refuse_a_non_positive_duration_naming_it(name: str) -> None:
    with pytest.raises(InvalidIdempotencyRequestError, match=name):
        IdempotencyOptions(**{name: timedelta(0)})


def test_options_default_to_a_24_hour_ttl_and_a_30_second_reservation_timeout() -> None:
    assert IdempotencyOptions() == IdempotencyOptions(timedelta(hours=24), timedelta(seconds=30))


# -- IDM-C05: the classification order ---------------------------------------------------------------------------

_RESPONSE = StoredResponse(201, {}, b"x", "fp-1")


def test_idm_c05_an_expired_completed_entry_is_absent_even_for_another_fingerprint() -> None:
    entry = Entry("fp-1", T0, completed_at=T0, response=_RESPONSE)
    assert decide(entry, "fp-2", T0 + OPTIONS.ttl, OPTIONS) is Takeover.TREAT_AS_ABSENT
    assert decide(entry, "fp-1", T0 + OPTIONS.ttl, OPTIONS) is Takeover.TREAT_AS_ABSENT


def test_idm_c05_a_live_completed_entry_replays_or_mismatches_by_fingerprint() -> None:
    entry = Entry("fp-1", T0, completed_at=T0, response=_RESPONSE)
    live = T0 + OPTIONS.ttl - timedelta(milliseconds=1)
    assert decide(entry, "fp-1", live, OPTIONS) == Replay(_RESPONSE)
    assert decide(entry, "fp-2", live, OPTIONS) == BodyHashMismatch("fp-1")


def test_idm_c05_a_reservation_checks_the_fingerprint_before_the_timeout() -> None:
    entry = Entry("fp-1", T0, reservation_id="r")
    assert decide(entry, "fp-2", T0 + timedelta(days=1), OPTIONS) == BodyHashMismatch("fp-1")
    assert decide(entry, "fp-1", T0 + OPTIONS.reservation_timeout, OPTIONS) is Takeover.TAKE_OVER
    assert decide(entry, "fp-1", T0 + timedelta(seconds=29), OPTIONS) == AlreadyInFlight(timedelta(seconds=1))


def test_idm_c06_a_reservation_from_the_future_never_asks_for_more_than_the_timeout() -> None:
    assert retry_after(T0 + timedelta(minutes=5), T0, OPTIONS.reservation_timeout) == timedelta(seconds=30)
    entry = Entry("fp-1", T0 + timedelta(minutes=5), reservation_id="r")
    assert decide(entry, "fp-1", T0, OPTIONS) == AlreadyInFlight(timedelta(seconds=30))


def test_idm_o02_the_defaults_are_a_24_h_ttl_and_a_30_s_reservation_timeout() -> None:
    options = IdempotencyOptions()
    assert (options.ttl, options.reservation_timeout) == (timedelta(hours=24), timedelta(seconds=30))


def test_idm_c09_stored_headers_round_trip_case_insensitively_and_a_replay_returns_the_stored_fingerprint() -> None:
    from airflow_chatter.adapters.memory.container import MemoryDocumentContainer
    from airflow_chatter.idempotency import Reserved
    from airflow_chatter.idempotency.container_store import ContainerIdempotencyStore

    store = ContainerIdempotencyStore(MemoryDocumentContainer(partition_key_paths=("/scope",)))
    reserved = store.reserve("actor:1", "order-42", "fp-original")
    assert isinstance(reserved, Reserved)
    response = StoredResponse(
        201, [("Content-Type", "application/json"), ("X-Trace", "a"), ("x-trace", "b")], b"{}", "fp-original"
    )
    store.complete("actor:1", "order-42", reserved.reservation_id, response)
    replay = store.reserve("actor:1", "order-42", "fp-original")
    assert isinstance(replay, Replay)
    assert replay.response.header("content-type") == ("application/json",)
    assert replay.response.header("X-TRACE") == ("a", "b"), "one header, both values, in order"
    assert replay.response.fingerprint == "fp-original", "the snapshot's own stored fingerprint"
