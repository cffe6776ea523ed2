"""The container contract suite, run against ``CosmosDocumentContainer``.

Against the project emulator by default, or a real account when ``COSMOS_ENDPOINT``/``COSMOS_KEY`` are set
(tests/fixtures/cosmos.py). Capabilities the emulator structurally lacks are not claimed (cosmos-emulator.md §5):

* splits: the emulator always has exactly one feed range, and a real account cannot be split on demand;
* fault injection: neither the emulator nor a real account fails on request (429/503/408 mapping is pinned by the
  adapter's own error-translation tests instead);
* hierarchical-key prefix queries on the emulator: azure-cosmos sends a prefix as a hashed effective-partition-key
  range (``x-ms-start-epk``/``x-ms-end-epk``), and the emulator's compat layer does no EPK hashing. Claimed on a
  real account.
"""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from airflow_chatter.adapters.cosmos import CosmosDocumentContainer
from airflow_chatter.ports import DocumentContainer
from airflow_chatter.testing.container_contract import DocumentContainerContract
from tests.fixtures.cosmos import ContainerFactory, CosmosEndpoint

pytestmark = pytest.mark.cosmos


class TestCosmosContainerContract(DocumentContainerContract):
    supports_clock_control = False
    supports_splits = False
    supports_fault_injection = False
    supports_hierarchical_prefix_queries = True

    @pytest.fixture(autouse=True)
    def _use_cosmos(self, cosmos_endpoint: CosmosEndpoint, cosmos_container_factory: ContainerFactory) -> None:
        self._new_container = cosmos_container_factory
        # Prefix queries are routed by hashed EPK ranges, which the emulator cannot evaluate (see above).
        self.supports_hierarchical_prefix_queries = not cosmos_endpoint.is_emulator

    def make_container(
        self, partition_key_paths: Sequence[str] = ("/pk",), default_ttl: int | None = -1
    ) -> DocumentContainer:
        return CosmosDocumentContainer(self._new_container(partition_key_paths, default_ttl))
