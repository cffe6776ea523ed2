"""Injected transient faults (``supports_fault_injection``)."""

from __future__ import annotations

import pytest

from airflow_chatter.ports import (
    ContainerError,
    NotFound,
    PatchOperation,
    PreconditionFailed,
    RequestTimeout,
    ServiceUnavailable,
    Throttled,
)
from airflow_chatter.testing.contracts.container.base import (
    ContainerContractBase,
)


class FaultContracts(ContainerContractBase):
    # ----------------------------------------------------------------------------------------------------------
    # Optional: transient faults.
    # ----------------------------------------------------------------------------------------------------------

    @pytest.mark.parametrize(
        "error",
        [Throttled(retry_after_ms=10), ServiceUnavailable(), RequestTimeout()],
        ids=["429", "503", "408"],
    )
    def test_an_injected_transient_error_surfaces_with_its_status_and_writes_nothing(
        self, error: ContainerError
    ) -> None:
        self._require("supports_fault_injection")
        container = self.make_container()
        self.inject_fault(container, "create", error)
        with pytest.raises(type(error)) as caught:
            container.create(self._doc("p", "a"), "p")
        assert caught.value.status_code == error.status_code
        with pytest.raises(NotFound):
            container.read("a", "p")
        container.create(self._doc("p", "a"), "p")  # the fault was for one call only

    def test_an_injected_412_on_patch_leaves_the_document_unchanged(self) -> None:
        self._require("supports_fault_injection")
        container = self.make_container()
        etag = container.create(self._doc("p", "a", n=0), "p")["_etag"]
        self.inject_fault(container, "patch", PreconditionFailed())
        with pytest.raises(PreconditionFailed):
            container.patch("a", "p", [PatchOperation("set", "/n", 1)])
        assert container.read("a", "p")["_etag"] == etag
