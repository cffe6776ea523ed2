"""CNT-01..05: the monitored and lease containers are verified once, at drain start, with every violation of both
reported together, each under its own container's name."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, TypeVar

import pytest

from airflow_chatter.adapters.memory import MemoryDocumentContainer
from airflow_chatter.adapters.memory.faults import fail
from airflow_chatter.drain.monitored_container import verify_containers, verify_monitored_container
from airflow_chatter.errors import ConfigurationError, ContainerContractError
from airflow_chatter.ports import ContainerProperties, ServiceUnavailable
from airflow_chatter.ports.delegating import DelegatingContainer
from airflow_chatter.testing.handlers import first_of

T = TypeVar("T")


class PropertiesOnlyContainer(DelegatingContainer):
    """A stub of the port that answers ``properties()`` only, and counts the reads (CNT: one metadata read)."""

    def __init__(self, properties: ContainerProperties | None = None, error: Exception | None = None) -> None:
        super().__init__(MemoryDocumentContainer())
        self._properties = properties
        self._error = error
        self.reads = 0
        self.container_id = "orders"
        self.database_id = "shop"

    def properties(self) -> ContainerProperties:
        self.reads += 1
        if self._error is not None:
            raise self._error
        assert self._properties is not None
        return self._properties

    def forward(self, operation: str, call: Callable[[], T]) -> T:
        raise AssertionError(f"start-time verification performs no document operation ({operation})")


def container(paths: Sequence[str] = ("/tenantId",), default_ttl: int | None = -1) -> PropertiesOnlyContainer:
    return PropertiesOnlyContainer(
        ContainerProperties("https://acct.documents.azure.com/", "shop", "orders", tuple(paths), default_ttl)
    )


def refusal(target: PropertiesOnlyContainer, declared: Sequence[str]) -> ContainerContractError:
    with pytest.raises(ContainerContractError) as caught:
        verify_monitored_container(target, declared)
    assert target.reads == 1, "one metadata read per container, even when refusing"
    return caught.value


@pytest.mark.parametrize("default_ttl", [-1, None])
def test_cnt_01_accepts_ttl_minus_one_or_unset(default_ttl: int | None) -> None:
    target = container(default_ttl=default_ttl)
    properties = verify_monitored_container(target, ["/tenantId"])
    assert properties.default_ttl == default_ttl and target.reads == 1, "the properties read is returned for reuse"


@pytest.mark.parametrize("default_ttl", [0, 1, 86400, -2, -86400])
def test_cnt_01_rejects_any_other_default_ttl_naming_the_value(default_ttl: int) -> None:
    """CNT-01: Cosmos would purge pending documents before they were published."""
    error = refusal(container(default_ttl=default_ttl), ["/tenantId"])
    assert len(error.violations) == 1 and str(default_ttl) in error.violations[0]
    assert str(default_ttl) in str(error) and "defaultTtl" in str(error)


def test_cnt_02_accepts_a_declared_path_without_leading_slash() -> None:
    verify_monitored_container(container(["/tenantId"]), ["tenantId"])


def test_cnt_02_accepts_an_equal_hierarchical_path() -> None:
    verify_monitored_container(container(["/tenantId", "/region"]), ["tenantId", "/region/"])


def test_cnt_02_rejects_a_case_mismatch_naming_both_spellings() -> None:
    """CNT-02: a mismatch recovers null partition keys, so every delivered stamp would fail after publishing."""
    error = refusal(container(["/tenantId"]), ["/TenantId"])
    assert "/TenantId" in str(error) and "/tenantId" in str(error)


def test_cnt_02_rejects_a_reordered_hierarchical_path_listing_both() -> None:
    error = refusal(container(["/tenantId", "/region"]), ["/region", "/tenantId"])
    assert "/region, /tenantId" in str(error) and "/tenantId, /region" in str(error)


@pytest.mark.parametrize("declared", [["/tenantId", "/region"], ["/tenantId/id"]])
def test_cnt_02_rejects_a_wrong_segment_count(declared: list[str]) -> None:
    error = refusal(container(["/tenantId"]), declared)
    assert len(error.violations) == 1


@pytest.mark.parametrize("path", ["/status", "/ttl", "/status/code"])
def test_cnt_03_rejects_a_container_partitioned_on_a_stamped_path(path: str) -> None:
    """CNT-03: Cosmos refuses to patch a partition key, so no stamp could ever land."""
    error = refusal(container([path]), [path])
    assert len(error.violations) == 1 and path in error.violations[0]


def test_cnt_03_rejects_a_stamped_path_inside_a_hierarchical_key() -> None:
    error = refusal(container(["/tenantId", "/ttl"]), ["/tenantId", "/ttl"])
    assert "/ttl" in error.violations[0]


def test_cnt_04_reports_path_mismatch_and_positive_ttl_together() -> None:
    """CNT-04: one error names both, so one fix-and-restart covers all."""
    error = refusal(container(["/tenantId"], default_ttl=86400), ["/TenantId"])
    assert len(error.violations) == 2
    message = str(error)
    assert "86400" in message and "/TenantId" in message and "/tenantId" in message
    assert "orders" in message and "shop" in message, "it names the container and database"
    assert error.container_id == "orders" and error.database_id == "shop"


def test_cnt_04_reports_every_violation_at_once() -> None:
    error = refusal(container(["/status"], default_ttl=0), ["/tenantId"])
    assert len(error.violations) == 3, "ttl, path mismatch and stamped path are all named"


def test_cnt_05_wraps_a_metadata_read_failure_naming_container_and_database() -> None:
    cause = ServiceUnavailable("account offline")
    target = PropertiesOnlyContainer(error=cause)
    with pytest.raises(ContainerContractError) as caught:
        verify_monitored_container(target, ["/tenantId"])
    assert caught.value.__cause__ is cause, "the Cosmos error is kept as the cause"
    assert "orders" in str(caught.value) and "shop" in str(caught.value)
    assert "account offline" in str(caught.value)
    assert target.reads == 1


def test_cnt_05_explicit_ids_win_over_container_attributes() -> None:
    target = PropertiesOnlyContainer(error=ServiceUnavailable("down"))
    with pytest.raises(ContainerContractError) as caught:
        verify_monitored_container(target, ["/tenantId"], container_id="c1", database_id="d1")
    assert (caught.value.container_id, caught.value.database_id) == ("c1", "d1")


def test_cfg_05_bad_declared_path_fails_before_any_read() -> None:
    target = container()
    with pytest.raises(
        ConfigurationError, match="partition_key_paths=\\[\\] must name at least one partition-key path"
    ):
        verify_monitored_container(target, [])
    assert target.reads == 0, "a declaration error needs no metadata read"


def lease_container(paths: Sequence[str] = ("/id",), default_ttl: int | None = None) -> PropertiesOnlyContainer:
    target = PropertiesOnlyContainer(
        ContainerProperties("https://acct.documents.azure.com/", "chatter", "leases", tuple(paths), default_ttl)
    )
    target.container_id, target.database_id = "leases", "chatter"
    return target


def both_refused(monitored: PropertiesOnlyContainer, leases: PropertiesOnlyContainer) -> ContainerContractError:
    with pytest.raises(ContainerContractError) as caught:
        verify_containers(monitored, ["/tenantId"], leases)
    assert monitored.reads == 1 and leases.reads == 1, "one metadata read per container, even when refusing"
    return caught.value


def test_cnt_04_both_containers_wrong_is_one_error_naming_each_containers_own_violations() -> None:
    error = both_refused(container(["/TenantId"], default_ttl=86400), lease_container(["/pk"], default_ttl=3600))
    monitored, leases = error.containers
    assert (monitored.role, monitored.container_id, monitored.database_id) == ("Monitored container", "orders", "shop")
    assert (leases.role, leases.container_id, leases.database_id) == ("Lease container", "leases", "chatter")
    assert (
        len(monitored.violations) == 2 and "86400" in monitored.violations[0] and "/TenantId" in monitored.violations[1]
    )
    assert len(leases.violations) == 2 and "/pk" in leases.violations[0] and "'/id'" in leases.violations[0]
    assert "3600" in leases.violations[1]
    assert error.violations == monitored.violations + leases.violations
    message = str(error)
    assert message.startswith("Monitored container 'orders' in database 'shop' cannot be drained: its defaultTtl is")
    assert "Lease container 'leases' in database 'chatter' cannot hold the drain's leases: it is partitioned on" in (
        message
    )
    assert "Monitored container 'leases'" not in message, "the lease container is never labelled the monitored one"
    assert message.index("86400") < message.index("Lease container") < message.index("3600"), "each under its own"


def test_cnt_04_a_wrong_lease_container_alone_is_named_as_the_lease_container() -> None:
    error = both_refused(container(), lease_container(default_ttl=60))
    (only,) = error.containers
    assert (only.role, error.container_id, error.database_id) == ("Lease container", "leases", "chatter")
    assert str(error).startswith("Lease container 'leases' in database 'chatter' cannot hold the drain's leases: ")
    assert "its defaultTtl 60 would purge leases and their checkpoints" in str(error)


def test_cnt_05_an_unreadable_monitored_container_does_not_hide_the_lease_containers_violations() -> None:
    cause = ServiceUnavailable("account offline")
    error = both_refused(PropertiesOnlyContainer(error=cause), lease_container(["/pk"]))
    assert error.__cause__ is cause, "the read error is kept as the cause"
    monitored, leases = error.containers
    assert monitored.container_id == "orders" and "account offline" in monitored.violations[0]
    assert leases.container_id == "leases" and "/pk" in leases.violations[0]


def test_cnt_05_an_unreadable_lease_container_is_named_with_its_read_error() -> None:
    cause = ServiceUnavailable("lease database missing")
    leases = PropertiesOnlyContainer(error=cause)
    leases.container_id, leases.database_id = "leases", "chatter"
    error = both_refused(container(default_ttl=86400), leases)
    assert error.__cause__ is cause
    assert [c.container_id for c in error.containers] == ["orders", "leases"]
    assert (
        "Lease container 'leases' in database 'chatter' cannot hold the drain's leases: its metadata could not be "
        "read (ServiceUnavailable: lease database missing)" in str(error)
    )


def test_cnt_both_containers_fine_return_both_properties_from_one_read_each() -> None:
    monitored, leases = container(), lease_container()
    assert verify_containers(monitored, ["tenantId"], leases) == (monitored.properties(), leases.properties())


def test_cfg_05_bad_declared_path_fails_before_either_container_is_read() -> None:
    monitored, leases = container(), lease_container(["/pk"])
    with pytest.raises(ConfigurationError):
        verify_containers(monitored, [], leases)
    assert monitored.reads == 0 and leases.reads == 0


# The same rules against the in-memory adapter (the real port implementation), where it can express the setting.
# Cosmos DB itself refuses a defaultTtl of 0 or below -1, so those cases stay on the stub above.


def memory(paths: Sequence[str] = ("/tenantId",), default_ttl: int | None = -1) -> Any:
    # NOTE: imported here so the stub-based tests above still run while the memory adapter is being written.
    adapter = pytest.importorskip("airflow_chatter.adapters.memory.container")
    return adapter.MemoryDocumentContainer(
        partition_key_paths=paths, default_ttl=default_ttl, database_id="shop", container_id="orders"
    )


def test_cnt_01_memory_container_with_ttl_on_and_matching_path_is_accepted() -> None:
    target = memory()
    properties = verify_monitored_container(target, ["tenantId"])
    assert properties.container_id == "orders" and target.calls["properties"] == 1, "exactly one metadata read"


def test_cnt_04_memory_container_reports_path_mismatch_and_positive_ttl_together() -> None:
    target = memory(["/tenantId"], default_ttl=86400)
    with pytest.raises(ContainerContractError) as caught:
        verify_monitored_container(target, ["/TenantId"])
    assert len(caught.value.violations) == 2 and "86400" in str(caught.value) and "/TenantId" in str(caught.value)
    assert target.calls["properties"] == 1


def test_cnt_03_memory_container_partitioned_on_status_is_refused() -> None:
    with pytest.raises(ContainerContractError) as caught:
        verify_monitored_container(memory(["/status"]), ["/status"])
    assert "/status" in str(caught.value)


def test_cnt_05_memory_container_read_failure_is_wrapped_naming_container_and_database() -> None:
    target = memory()
    cause = ServiceUnavailable("metadata read failed")
    target.handler = first_of(target.handler, fail("properties", error=cause))
    with pytest.raises(ContainerContractError) as caught:
        verify_monitored_container(target, ["/tenantId"], container_id="orders", database_id="shop")
    assert caught.value.__cause__ is cause
    assert "'orders'" in str(caught.value) and "'shop'" in str(caught.value)
    assert target.calls["properties"] == 1


def test_cnt_04_the_drain_engine_refuses_two_wrong_memory_containers_naming_each() -> None:
    adapter = pytest.importorskip("airflow_chatter.adapters.memory.container")
    from airflow_chatter.drain.engine import DrainEngine
    from airflow_chatter.drain.options import SourceOptions
    from airflow_chatter.testing.fakes import FakePublisher

    leases = adapter.MemoryDocumentContainer(
        partition_key_paths=("/pk",), default_ttl=3600, database_id="chatter", container_id="leases"
    )
    with pytest.raises(ContainerContractError) as caught:
        DrainEngine.open(
            SourceOptions(name="orders", partition_key_paths=("/TenantId",)),
            memory(["/tenantId"], default_ttl=86400),
            leases,
            FakePublisher(),
        )
    message = str(caught.value)
    assert "Monitored container 'orders' in database 'shop' cannot be drained: " in message
    assert "Lease container 'leases' in database 'chatter' cannot hold the drain's leases: " in message
    assert all(text in message for text in ("86400", "/TenantId", "/pk", "3600"))
    assert "Monitored container 'leases'" not in message
