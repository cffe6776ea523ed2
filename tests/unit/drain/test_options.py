"""CFG-01..06, CTR-08: options are validated when built, naming the option and its value."""

from __future__ import annotations

from typing import Any

import pytest

from airflow_chatter.drain.options import DeliverySettings, SourceOptions
from airflow_chatter.errors import ConfigurationError


def source(**changes: Any) -> SourceOptions:
    fields: dict[str, Any] = {"name": "orders", "partition_key_paths": ("/tenantId",)}
    fields.update(changes)
    return SourceOptions(**fields)


def assert_refused(option: str, value: Any, build: Any) -> None:
    with pytest.raises(ConfigurationError) as caught:
        build()
    assert caught.value.option == option, "the error names the option"
    assert caught.value.value == value or caught.value.value is value
    assert option in str(caught.value) and repr(value) in str(caught.value), "and the message shows both"


def test_cfg_01_delivery_defaults() -> None:
    settings = DeliverySettings()
    assert (settings.delivered_ttl_seconds, settings.status_patch_path, settings.delivered_status_value) == (
        86400,
        "/status",
        "delivered",
    )


@pytest.mark.parametrize("ttl", [0, -1, -86400, 1.5, True, "86400", None, 2**31], ids=repr)
def test_cfg_01_delivered_ttl_must_be_a_positive_integer(ttl: Any) -> None:
    """CFG-01: a delivered document must schedule its own purge."""
    assert_refused("delivered_ttl_seconds", ttl, lambda: DeliverySettings(delivered_ttl_seconds=ttl))


@pytest.mark.parametrize("ttl", [1, 2**31 - 1])
def test_cfg_01_accepts_a_positive_ttl_that_cosmos_can_store(ttl: int) -> None:
    """CFG-01: Cosmos's ttl is 32-bit; a larger value would fail every delivered stamp after its publish."""
    assert DeliverySettings(delivered_ttl_seconds=ttl).delivered_ttl_seconds == ttl


@pytest.mark.parametrize("path", ["status", "", "/", "//", None], ids=repr)
def test_cfg_02_status_patch_path_must_be_a_json_pointer(path: Any) -> None:
    assert_refused("status_patch_path", path, lambda: DeliverySettings(status_patch_path=path))


@pytest.mark.parametrize("path", ["/state", "/Status", "/status/x", "/ttl"])
def test_cfg_02_status_patch_path_must_be_exactly_status(path: str) -> None:
    """CFG-02: a stamp elsewhere would leave the document pending, so it would be republished forever."""
    assert_refused("status_patch_path", path, lambda: DeliverySettings(status_patch_path=path))


def test_cfg_04_ttl_patch_path_is_always_ttl() -> None:
    assert DeliverySettings().ttl_patch_path == "/ttl"


@pytest.mark.parametrize("value", ["pending", "undeliverable", "", "  ", None, 1], ids=repr)
def test_cfg_03_delivered_status_value_must_be_non_blank_and_distinct(value: Any) -> None:
    """CFG-03 / CTR-08: ``pending`` would republish its own stamp; ``undeliverable`` is a different terminal state."""
    assert_refused("delivered_status_value", value, lambda: DeliverySettings(delivered_status_value=value))


def test_cfg_03_accepts_another_delivered_value() -> None:
    assert DeliverySettings(delivered_status_value="sent").delivered_status_value == "sent"


def test_cfg_05_source_defaults() -> None:
    options = source()
    assert options.key_strategy == "partition_key" and options.max_batch_size == 100
    assert options.delivery == DeliverySettings() and options.lease_prefix == ""
    assert options.lease_duration_seconds == 60.0
    assert options.monitored_source_identity is None and not options.declares_source_identity


def test_cfg_05_partition_paths_are_canonicalised() -> None:
    assert source(partition_key_paths="tenantId").partition_key_paths == ("/tenantId",)
    assert source(partition_key_paths=["tenant//id/", "region"]).partition_key_paths == ("/tenant/id", "/region")


@pytest.mark.parametrize("paths", [(), [], "", ("/a", " "), ("/a", None)], ids=repr)
def test_cfg_05_rejects_empty_path_or_blank_segment(paths: Any) -> None:
    with pytest.raises(ConfigurationError) as caught:
        source(partition_key_paths=paths)
    assert caught.value.option == "partition_key_paths"


@pytest.mark.parametrize("name", ["", "  ", None], ids=repr)
def test_cfg_05_source_name_is_required(name: Any) -> None:
    assert_refused("name", name, lambda: source(name=name))


@pytest.mark.parametrize("strategy", ["key", "", None, "PARTITION_KEY"], ids=repr)
def test_cfg_05_key_strategy_must_be_known(strategy: Any) -> None:
    assert_refused("key_strategy", strategy, lambda: source(key_strategy=strategy))


@pytest.mark.parametrize("strategy", ["partition_key", "message_id", "none"])
def test_f_02_key_strategies_are_accepted(strategy: Any) -> None:
    assert source(key_strategy=strategy).key_strategy == strategy


@pytest.mark.parametrize("size", [0, -1, 1001, 1.5, True, "100", None], ids=repr)
def test_cfg_05_max_batch_size_is_between_1_and_1000(size: Any) -> None:
    assert_refused("max_batch_size", size, lambda: source(max_batch_size=size))


@pytest.mark.parametrize("size", [1, 1000])
def test_cfg_05_max_batch_size_bounds_are_inclusive(size: int) -> None:
    assert source(max_batch_size=size).max_batch_size == size


def test_cfg_05_delivery_must_be_delivery_settings() -> None:
    assert_refused("delivery", {"ttl": 1}, lambda: source(delivery={"ttl": 1}))


@pytest.mark.parametrize(
    ("monitored", "lease", "option"),
    [
        ("shop/orders", None, "monitored_source_identity"),
        (None, "shop/leases", "lease_source_identity"),
        ("  ", "shop/leases", "monitored_source_identity"),
        ("shop/orders", "", "lease_source_identity"),
    ],
)
def test_cfg_06_source_identities_are_both_or_neither_and_non_blank(monitored: Any, lease: Any, option: str) -> None:
    with pytest.raises(ConfigurationError) as caught:
        source(monitored_source_identity=monitored, lease_source_identity=lease)
    assert caught.value.option == option


def test_cfg_06_both_identities_declared_is_accepted() -> None:
    options = source(monitored_source_identity="shop/orders", lease_source_identity="shop/leases")
    assert options.declares_source_identity


@pytest.mark.parametrize("option", ["body_resolver", "additional_pending_filter"])
def test_cfg_05_user_callables_must_be_callable(option: str) -> None:
    assert_refused(option, "not.callable", lambda: source(**{option: "not.callable"}))
    assert getattr(source(**{option: lambda doc: True}), option) is not None


@pytest.mark.parametrize("duration", [0, -1, float("inf"), float("nan"), True, "60"], ids=repr)
def test_cfg_05_lease_duration_is_positive_and_finite(duration: Any) -> None:
    with pytest.raises(ConfigurationError) as caught:
        source(lease_duration_seconds=duration)
    assert caught.value.option == "lease_duration_seconds"


def test_cfg_05_lease_prefix_must_be_a_string() -> None:
    assert_refused("lease_prefix", None, lambda: source(lease_prefix=None))


def test_cfg_08_options_are_independent_values() -> None:
    """CFG-08: each source is its own frozen value; building one never changes another."""
    first, second = source(), source(name="payments", max_batch_size=10)
    assert first.max_batch_size == 100 and second.max_batch_size == 10
    with pytest.raises(AttributeError):
        first.max_batch_size = 5  # type: ignore[misc]


@pytest.mark.parametrize("value", [0, 0.01, 61.0, "0.5", True, float("nan")])
def test_cfg_follow_poll_seconds_out_of_bounds_is_refused_naming_the_field(value: object) -> None:
    with pytest.raises(ConfigurationError) as raised:
        SourceOptions("orders", "/tenantId", follow=True, follow_poll_seconds=value)
    assert "follow_poll_seconds" in str(raised.value)


def test_cfg_follow_defaults_off_with_a_poll_well_under_a_second() -> None:
    options = SourceOptions("orders", "/tenantId")
    assert options.follow is False
    assert 0 < options.follow_poll_seconds < 1
    with pytest.raises(ConfigurationError, match="follow"):
        SourceOptions("orders", "/tenantId", follow="yes")
