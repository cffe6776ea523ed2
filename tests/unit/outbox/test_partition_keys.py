"""Partition-key paths: canonicalisation (CNT-02, CFG-05), stamping (OBX-02), recovery (RLY-04), Kafka key (F-02)."""

from __future__ import annotations

from collections import OrderedDict, defaultdict
from types import MappingProxyType
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from airflow_chatter.errors import ConfigurationError
from airflow_chatter.outbox.partition_keys import (
    canonicalize_path,
    canonicalize_paths,
    partition_key_recoverer,
    partition_key_to_kafka_key,
    recover_partition_key,
    stamp_partition_value,
)


@pytest.mark.parametrize(
    ("path", "canonical"),
    [
        ("tenantId", "/tenantId"),
        ("/tenantId", "/tenantId"),
        ("//tenant//id/", "/tenant/id"),
        ("/TenantId", "/TenantId"),
    ],
)
def test_cnt_02_canonicalisation_drops_empty_parts_and_keeps_case(path: str, canonical: str) -> None:
    """CNT-02: split on '/', drop empty parts, re-join with a leading '/'; case is significant."""
    assert canonicalize_path(path) == canonical


def test_cfg_05_single_string_is_a_one_path_key() -> None:
    assert canonicalize_paths("tenantId") == ("/tenantId",)
    assert canonicalize_paths(["/tenant/id", "region"]) == ("/tenant/id", "/region")


@pytest.mark.parametrize("paths", [[], (), ["/a", ""], ["  "], ["/"], ["//"], ["/a", None]])
def test_cfg_05_rejects_empty_path_or_blank_segment_naming_the_option(paths: Any) -> None:
    """CFG-05/CFG-09: a blank path would recover a null partition key at drain time; refuse it up front."""
    with pytest.raises(ConfigurationError) as caught:
        canonicalize_paths(paths)
    assert caught.value.option == "partition_key_paths", "the error names the option"


def test_obx_02_stamps_hierarchical_values_at_nested_paths_keeping_json_kind() -> None:
    """OBX-02: nested objects are created, and the number stays a number (5 and "5" are different partitions)."""
    document: dict[str, Any] = {"id": "x"}
    stamp_partition_value(document, ["/tenant/id", "/region"], ("t1", 5))
    assert document == {"id": "x", "tenant": {"id": "t1"}, "region": 5}
    assert isinstance(document["region"], int), "a number is never coerced to a string"


def test_obx_02_single_path_takes_a_scalar() -> None:
    document: dict[str, Any] = {}
    stamp_partition_value(document, "/tenantId", "tenant-1")
    assert document == {"tenantId": "tenant-1"}


@pytest.mark.parametrize("value", [True, 1.5, None, 0])
def test_obx_02_preserves_bool_float_null_kinds(value: Any) -> None:
    document: dict[str, Any] = {}
    stamp_partition_value(document, "/k", value)
    assert document["k"] == value and type(document["k"]) is type(value), "the JSON kind is kept exactly"


def test_obx_02_each_document_gets_its_own_copy() -> None:
    """OBX-02: several documents stamped from one value set share no nested objects."""
    first: dict[str, Any] = {}
    second: dict[str, Any] = {}
    stamp_partition_value(first, ["/tenant/id"], ["t1"])
    stamp_partition_value(second, ["/tenant/id"], ["t1"])
    first["tenant"]["id"] = "changed"
    assert second["tenant"]["id"] == "t1", "mutating one document must not reach another"


def test_obx_02_rejects_value_count_mismatch() -> None:
    with pytest.raises(ConfigurationError, match="must supply one value per partition-key path"):
        stamp_partition_value({}, ["/a", "/b"], ["only-one"])


def test_obx_02_rejects_a_path_through_a_non_object_field() -> None:
    """OBX-02: overwriting an application scalar with an object would corrupt the document; refuse instead."""
    with pytest.raises(ConfigurationError, match="crosses field 'tenant', which the document holds as a non-object"):
        stamp_partition_value({"tenant": "scalar"}, "/tenant/id", "t1")


def test_obx_02_rejects_a_non_scalar_value() -> None:
    with pytest.raises(ConfigurationError, match="for /k is not a JSON scalar"):
        stamp_partition_value({}, "/k", {"nested": 1})  # type: ignore[arg-type]


def test_rly_04_recovers_a_single_path_as_its_scalar() -> None:
    assert recover_partition_key({"tenantId": "t1"}, ["/tenantId"]) == "t1"
    assert recover_partition_key({"n": 7}, "/n") == 7, "a number stays a number"


def test_rly_04_recovers_a_hierarchical_key_as_a_list() -> None:
    document = {"tenant": {"id": "t1"}, "region": 5, "flag": True}
    assert recover_partition_key(document, ["/tenant/id", "/region", "/flag"]) == ["t1", 5, True]


@pytest.mark.parametrize(
    "document",
    [{}, {"tenant": None}, {"tenant": "scalar"}, {"tenant": ["id"]}, {"tenant": {}}, {"tenant": {"id": {"x": 1}}}],
)
def test_rly_04_missing_or_non_object_intermediates_become_null(document: dict[str, Any]) -> None:
    """RLY-04: a component that cannot be read is JSON null, so the later patch fails loudly instead of guessing."""
    assert recover_partition_key(document, ["/tenant/id", "/region"]) == [None, None]
    assert recover_partition_key(document, "/tenant/id") is None


def test_rly_04_recovery_round_trips_stamping() -> None:
    document: dict[str, Any] = {}
    stamp_partition_value(document, ["/a/b/c", "/d"], ["x", 2.5])
    assert recover_partition_key(document, ["/a/b/c", "/d"]) == ["x", 2.5]


@pytest.mark.parametrize(
    ("pk", "key"),
    [
        ("tenant-1", b"tenant-1"),
        ("é", "é".encode()),
        (5, b"5"),
        (1.5, b"1.5"),
        (True, b"true"),
        (None, b"null"),
        (["t1", 5], b'["t1",5]'),
        (["é", None, False], '["é",null,false]'.encode()),
    ],
)
def test_f_02_kafka_key_is_string_form_or_compact_json_array(pk: Any, key: bytes) -> None:
    """F-02: a single value as its string form, a hierarchical key as the compact JSON array of its values."""
    assert partition_key_to_kafka_key(pk) == key


def test_f_02_kafka_key_of_a_lone_surrogate_is_stable_bytes_not_an_error() -> None:
    """A partition value without UTF-8 bytes must not fail every produce of its document."""
    assert partition_key_to_kafka_key("t\ud800") == partition_key_to_kafka_key("t\ud800")
    assert partition_key_to_kafka_key(["t\ud800", 1]).endswith(b",1]")


# --- where the plain-dict lookup meets the general Mapping walk -------------------------------------------------


def as_proxies(value: Any) -> Any:
    """The same JSON with every object a MappingProxyType: recovery then never takes the plain-dict lookup."""
    if type(value) is dict:
        return MappingProxyType({k: as_proxies(v) for k, v in value.items()})
    return value


class _Text(str):
    pass


@pytest.mark.parametrize(
    ("document", "paths", "key"),
    [
        ({"t": None}, "/t", None),
        ({}, "/t", None),
        ({"t": False}, ("/t",), False),
        ({"t": 0}, ["/t"], 0),
        ({"t": 1.5}, "/t", 1.5),
        ({"t": {"a": 1}}, "/t", None),
        ({"t": [1]}, "/t", None),
        ({"t": "x"}, "/t/a", None),  # a string intermediate
        ({"t": ["a"]}, "/t/0", None),  # an array intermediate
        ({"t": {"a": None}}, "/t/a/b", None),
        ({"t": {"a": {"b": "v"}}}, "/t/a/b", "v"),
        ({"t": defaultdict(int)}, "/t/a", None),  # a dict subclass with __missing__: a lookup may not create it
        ({"t": OrderedDict(a=2)}, "/t/a", 2),
        ({"t": "a", "u": 2}, ("/t", "/u"), ["a", 2]),
        ({"t": "a"}, ("/t", "/u"), ["a", None]),
        ({"t": "a"}, (), []),
        ({"t": "a"}, "//t/", "a"),
    ],
    ids=repr,
)
def test_rly_04_plain_dicts_and_other_mappings_recover_the_same_key(document: Any, paths: Any, key: Any) -> None:
    recover = partition_key_recoverer(paths)  # what the drain calls per document: the same answers
    for doc in (document, as_proxies(document)):
        for recovered in (recover_partition_key(doc, paths), recover(doc)):
            assert recovered == key and type(recovered) is type(key)


def test_rly_04_a_str_subclass_value_is_returned_as_is() -> None:
    value = _Text("tenant")
    assert recover_partition_key({"t": value}, "/t") is value
    assert recover_partition_key({"t": {"u": value}}, ("/t/u",)) is value
    assert partition_key_recoverer("/t")({"t": value}) is value
    assert partition_key_recoverer(("/t/u",))({"t": {"u": value}}) is value


def test_rly_04_a_non_mapping_document_recovers_null() -> None:
    assert recover_partition_key(["t"], "/t") is None  # type: ignore[arg-type]
    assert recover_partition_key("t", ("/t", "/u")) == [None, None]  # type: ignore[arg-type]
    assert partition_key_recoverer("/t")(["t"]) is None  # type: ignore[arg-type]
    assert partition_key_recoverer(("/t", "/u"))("t") == [None, None]  # type: ignore[arg-type]


json_scalars = st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=4)
json_trees = st.recursive(
    json_scalars,
    lambda children: st.lists(children, max_size=3) | st.dictionaries(st.sampled_from("abt"), children, max_size=3),
    max_leaves=12,
)


@settings(max_examples=300, deadline=None)
@given(
    json_trees,
    st.one_of(
        st.sampled_from(["/t", "/a/b", "/t/a/t"]),
        st.lists(st.sampled_from(["/t", "/a", "/a/b", "/b/t/a"]), max_size=3).map(tuple),
    ),
)
def test_rly_04_plain_dict_lookup_agrees_with_the_mapping_walk(document: Any, paths: Any) -> None:
    recovered = recover_partition_key(document, paths)
    general = recover_partition_key(as_proxies(document), paths)
    assert recovered == general and type(recovered) is type(general)
    fixed = partition_key_recoverer(paths)(document)  # the drain's per-source recoverer
    assert fixed == general and type(fixed) is type(general)
