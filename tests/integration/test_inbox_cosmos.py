"""The downstream conformance suite (Unit of Work, standalone Inbox, idempotent receiver) on the emulator, or on a
real account when ``COSMOS_ENDPOINT`` names one. Each test gets fresh containers."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from airflow_chatter.adapters.cosmos.container import CosmosDocumentContainer
from airflow_chatter.ports import DocumentContainer
from airflow_chatter.testing.contracts.inbox import InboxContract
from tests.fixtures.cosmos import ContainerFactory

pytestmark = pytest.mark.cosmos


class TestCosmosInbox(InboxContract):
    @pytest.fixture(autouse=True)
    def _use_factory(self, cosmos_container_factory: ContainerFactory) -> None:
        self._factory = cosmos_container_factory

    def make_container(self, partition_key_paths: Sequence[str], default_ttl: int | None = None) -> DocumentContainer:
        return CosmosDocumentContainer(self._factory(tuple(partition_key_paths), default_ttl=default_ttl))
