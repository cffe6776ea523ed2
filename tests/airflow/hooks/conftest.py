"""Fixtures shared by the hook tests."""

from __future__ import annotations

from typing import Any
from unittest import mock

import pytest


@pytest.fixture
def patched_cosmos_client() -> Any:
    with mock.patch("airflow_chatter.adapters.cosmos.client.CosmosClient", autospec=False) as client:
        yield client
