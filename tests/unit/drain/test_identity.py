"""SRC-01..05: source identity, processor names, and fail-fast duplicates."""

from __future__ import annotations

import base64
import hashlib
import struct

import pytest

from airflow_chatter.drain.identity import SourceIdentity, SourceRegistry, instance_name, normalize_endpoint
from airflow_chatter.errors import ConfigurationError, DuplicateSourceError
from airflow_chatter.ports import ContainerProperties

PREFIX = "chatter-cosmos-outbox-relay:"


def props(
    endpoint: str = "https://acct.documents.azure.com:443/", db: str = "shop", container: str = "orders"
) -> ContainerProperties:
    return ContainerProperties(endpoint, db, container, ("/tenantId",), -1)


def reference_name(tag: int, components: list[str]) -> str:
    """The reference's encoding, written out independently: tag byte, 8 × (Int32 LE length, UTF-8 bytes)."""
    raw = bytes([tag]) + b"".join(struct.pack("<i", len(c.encode())) + c.encode() for c in components)
    return PREFIX + base64.urlsafe_b64encode(hashlib.sha256(raw).digest()).rstrip(b"=").decode()


def test_src_03_declared_processor_name_matches_the_reference_encoding() -> None:
    identity = SourceIdentity.declared("shop/orders", "shop/orders-leases")
    expected = reference_name(0, ["shop/orders", "shop/orders-leases", "", "", "", "", "", ""])
    assert identity.processor_name == expected, "the same source gets the same name in every process"


def test_src_03_ground_truth_processor_name_matches_the_reference_encoding() -> None:
    identity = SourceIdentity.ground_truth(props(), props(container="leases"))
    expected = reference_name(
        1,
        [
            "",
            "",
            "https://acct.documents.azure.com/",
            "shop",
            "orders",
            "https://acct.documents.azure.com/",
            "shop",
            "leases",
        ],
    )
    assert identity.processor_name == expected


def test_src_03_name_is_prefixed_and_url_safe() -> None:
    name = SourceIdentity.declared("a", "b").processor_name
    assert name.startswith(PREFIX) and not set(name[len(PREFIX) :]) & set("+/=")


def test_src_03_length_prefix_keeps_component_boundaries() -> None:
    """SRC-03: ("a\\0b","c") and ("a","b\\0c") would collide if joined with a delimiter; lengths keep them apart."""
    assert SourceIdentity.declared("a\0b", "c").processor_name != SourceIdentity.declared("a", "b\0c").processor_name
    assert SourceIdentity.declared("ab", "c").processor_name != SourceIdentity.declared("a", "bc").processor_name


def test_src_03_declared_and_ground_truth_names_never_collide() -> None:
    declared = SourceIdentity("declared", ("x", "y"))
    ground = SourceIdentity("ground-truth", ("x", "y", "", "", "", ""))
    assert declared.processor_name != ground.processor_name, "the kind tag separates the two namespaces"


def test_src_02_same_names_in_different_accounts_are_distinct() -> None:
    one = SourceIdentity.ground_truth(
        props("https://one.documents.azure.com/"), props("https://one.documents.azure.com/", container="l")
    )
    two = SourceIdentity.ground_truth(
        props("https://two.documents.azure.com/"), props("https://two.documents.azure.com/", container="l")
    )
    assert one != two and one.processor_name != two.processor_name


def test_src_02_endpoint_spelling_does_not_split_one_account() -> None:
    a = SourceIdentity.ground_truth(props("https://ACCT.documents.azure.com:443"), props(container="l"))
    b = SourceIdentity.ground_truth(props("https://acct.documents.azure.com/"), props(container="l"))
    assert a == b and a.processor_name == b.processor_name


@pytest.mark.parametrize(
    ("endpoint", "normal"),
    [
        ("https://Acct.Documents.Azure.com", "https://acct.documents.azure.com/"),
        ("https://127.0.0.1:8081/", "https://127.0.0.1:8081/"),
        ("HTTP://host:80/x", "http://host/x"),
        ("not a uri", "not a uri"),
    ],
)
def test_src_02_normalize_endpoint(endpoint: str, normal: str) -> None:
    assert normalize_endpoint(endpoint) == normal


def test_src_02_declared_identity_compares_tokens_only() -> None:
    assert SourceIdentity.declared("m", "l") == SourceIdentity.declared("m", "l")
    assert SourceIdentity.declared("m", "l") != SourceIdentity.declared("l", "m"), "order matters"


@pytest.mark.parametrize(("monitored", "lease"), [("", "l"), ("m", "  "), (None, "l")])
def test_cfg_06_declared_tokens_must_be_non_blank(monitored: object, lease: object) -> None:
    with pytest.raises(ConfigurationError, match=r"(monitored|lease)_source_identity=.* must be a non-blank string"):
        SourceIdentity.declared(monitored, lease)  # type: ignore[arg-type]


def test_src_identity_rejects_wrong_component_count() -> None:
    with pytest.raises(ConfigurationError, match="must be 2 strings for a declared identity"):
        SourceIdentity("declared", ("only-one",))
    with pytest.raises(ConfigurationError, match="kind='other' must be 'declared' or 'ground-truth'"):
        SourceIdentity("other", ("a", "b"))  # type: ignore[arg-type]


def test_src_03_instance_name_is_unique_per_call() -> None:
    first, second = instance_name(), instance_name()
    assert first.startswith(PREFIX) and second.startswith(PREFIX)
    assert first != second, "co-located drains must not collide on a lease owner"


def test_src_04_same_declared_pair_twice_fails_fast_naming_both_sources() -> None:
    registry = SourceRegistry()
    registry.register(SourceIdentity.declared("m", "l"), "orders-a")
    with pytest.raises(DuplicateSourceError) as caught:
        registry.register(SourceIdentity.declared("m", "l"), "orders-b")
    message = str(caught.value)
    assert "orders-a" in message and "orders-b" in message, "the error names both sources"
    assert isinstance(caught.value, ConfigurationError)


def test_src_04_ground_truth_duplicates_with_different_filters_fail_fast() -> None:
    """SRC-04: they would share one lease set; a document one rejects would be checkpointed past by the other."""
    registry = SourceRegistry()
    identity = SourceIdentity.ground_truth(props(), props(container="leases"))
    registry.register(identity, "all", additional_pending_filter=lambda d: True)
    with pytest.raises(
        DuplicateSourceError, match="source='some' resolves to the same source identity .* as source 'all'"
    ):
        registry.register(identity, "some", additional_pending_filter=lambda d: False)


def test_src_04_different_resolvers_on_one_identity_fail_fast() -> None:
    registry = SourceRegistry()
    identity = SourceIdentity.declared("m", "l")
    registry.register(identity, "s", body_resolver=lambda c: None)
    with pytest.raises(DuplicateSourceError, match="source='s' resolves to the same source identity"):
        registry.register(identity, "s", body_resolver=lambda c: "other")


def test_src_01_registering_the_same_source_again_is_idempotent() -> None:
    registry = SourceRegistry()
    identity = SourceIdentity.declared("m", "l")
    first = registry.register(identity, "orders")
    assert registry.register(identity, "orders") is first
    assert len(registry) == 1 and registry.get(identity.processor_name) is first


def test_src_01_distinct_identities_get_distinct_processors() -> None:
    registry = SourceRegistry()
    registry.register(SourceIdentity.declared("m", "l1"), "a")
    registry.register(SourceIdentity.declared("m", "l2"), "b")
    assert len({source.processor_name for source in registry}) == 2


def test_src_source_name_is_unique_across_identities() -> None:
    registry = SourceRegistry()
    registry.register(SourceIdentity.declared("m", "l1"), "orders")
    with pytest.raises(ConfigurationError) as caught:
        registry.register(SourceIdentity.declared("m", "l2"), "orders")
    assert caught.value.option == "name"


def test_src_05_processor_name_is_the_metrics_attribute_value() -> None:
    """SRC-05: the registered source exposes the processor name the engine tags lease-scoped metrics with."""
    identity = SourceIdentity.declared("m", "l")
    assert SourceRegistry().register(identity, "s").processor_name == identity.processor_name
