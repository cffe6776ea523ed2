"""F-06: the project's exception classes carry what the operator needs to act."""

from __future__ import annotations

import pytest

from airflow_chatter.errors import (
    ChatterError,
    ConfigurationError,
    ConfirmationFailed,
    ContainerContractError,
    DrainSuspendedError,
    DuplicateSourceError,
    InvalidLeaseDocumentError,
    ItemIdTooLongError,
    ReservedIdError,
    UnknownPublisherError,
)


def test_f_06_configuration_error_names_option_and_value() -> None:
    error = ConfigurationError("max_batch_size", 0, "must be from 1 to 1000")
    assert (error.option, error.value) == ("max_batch_size", 0)
    assert "max_batch_size" in str(error) and "0" in str(error)
    assert isinstance(error, ValueError) and isinstance(error, ChatterError)


def test_f_06_argument_errors_are_value_errors() -> None:
    assert isinstance(ItemIdTooLongError(1025, 1023, "outbox"), ValueError)
    assert isinstance(ReservedIdError("outbox:x"), ValueError)


def test_src_04_duplicate_source_error_names_both_sources() -> None:
    error = DuplicateSourceError("chatter-cosmos-outbox-relay:abc", "first", "second")
    assert "first" in str(error) and "second" in str(error)
    assert isinstance(error, ConfigurationError)


def test_cnt_container_contract_error_keeps_violations() -> None:
    error = ContainerContractError("orders", "shop", ["a", "b"])
    assert error.violations == ("a", "b") and error.container_id == "orders" and error.database_id == "shop"
    assert "orders" in str(error) and "shop" in str(error)


def test_sus_04_drain_suspended_error_names_lease_and_source() -> None:
    error = DrainSuspendedError("0", "chatter-cosmos-outbox-relay:abc")
    assert error.lease_token == "0" and error.source_identity == "chatter-cosmos-outbox-relay:abc"
    assert "'0'" in str(error)


def test_rly_06_confirmation_failed_carries_the_original() -> None:
    original = TimeoutError("patch timed out")
    assert ConfirmationFailed(original).original is original


def test_rly_06_confirmation_failed_refuses_an_empty_carrier() -> None:
    """A carrier with no stamp fault would leave the engine nothing to re-raise."""
    with pytest.raises(TypeError):
        ConfirmationFailed(None)  # type: ignore[arg-type]


def test_f_03_unknown_publisher_names_the_infrastructure() -> None:
    assert "asb" in str(UnknownPublisherError("asb", "msg-1"))


def test_f_04_invalid_lease_names_the_lease() -> None:
    error = InvalidLeaseDocumentError("lease-0", "missing continuation")
    assert "lease-0" in str(error) and error.lease_id == "lease-0"
