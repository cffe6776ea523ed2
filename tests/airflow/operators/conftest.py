"""Fixtures shared by the operator tests."""

from __future__ import annotations

import pytest

from airflow_chatter.adapters.memory.container import MemoryDocumentContainer
from airflow_chatter.adapters.memory.source import MemoryMessageSource
from tests.airflow._support import install_world


@pytest.fixture
def receiving(monkeypatch: pytest.MonkeyPatch) -> tuple[MemoryMessageSource, MemoryDocumentContainer]:
    """The receive operator on a memory message source and a memory application container (``/customerId``)."""
    from airflow_chatter.adapters.kafka import source as kafka_source
    from airflow_chatter.airflow.hooks.cosmos import ChatterCosmosHook
    from airflow_chatter.airflow.hooks.kafka import ChatterKafkaHook

    install_world(monkeypatch)
    messages = MemoryMessageSource()
    container = MemoryDocumentContainer(partition_key_paths=("/customerId",), database_id="shop", container_id="app")
    monkeypatch.setattr(ChatterKafkaHook, "get_consumer", lambda self, topics, group_id, **_: None)
    monkeypatch.setattr(kafka_source, "KafkaMessageSource", lambda consumer: messages)
    monkeypatch.setattr(ChatterCosmosHook, "get_container", lambda self, name, **_: container)
    return messages, container
