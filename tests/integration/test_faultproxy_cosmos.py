"""The fault proxy end to end: azure-cosmos through it to the project emulator, with faults set at run time.

The proxy serves the emulator's certificate, so the SDK verifies TLS to it as it does to the emulator; the account
document it relays names the proxy as the read and write location (or the SDK would bypass it after ``GET /``).
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
import requests
from azure.cosmos import ContainerProxy, DatabaseProxy

from airflow_chatter.adapters.cosmos.container import CosmosDocumentContainer, make_cosmos_client
from airflow_chatter.ports import PatchOperation, ServiceUnavailable
from devkit.faultproxy import FaultProxy, FaultRule
from tests.fixtures.cosmos import ContainerFactory, CosmosEndpoint


@pytest.fixture
def proxy(cosmos_endpoint: CosmosEndpoint) -> Iterator[FaultProxy]:
    if not cosmos_endpoint.is_emulator or not isinstance(cosmos_endpoint.verify, str):
        pytest.fail("the fault proxy serves the project emulator's certificate: run against the project emulator")
    cert = cosmos_endpoint.verify
    started = FaultProxy(
        cosmos_endpoint.url, cert_file=cert, key_file=str(Path(cert).with_name("key.pem")), upstream_ca=cert
    ).start_in_thread()
    try:
        yield started
    finally:
        started.stop_thread()


@pytest.fixture
def through_proxy(
    proxy: FaultProxy,
    cosmos_endpoint: CosmosEndpoint,
    cosmos_database: DatabaseProxy,
    cosmos_container_factory: ContainerFactory,
) -> CosmosDocumentContainer:
    made: ContainerProxy = cosmos_container_factory(partition_key_paths=("/pk",))
    client = make_cosmos_client(proxy.url, cosmos_endpoint.key, verify=cosmos_endpoint.verify)
    database = client.get_database_client(cosmos_database.id)
    return CosmosDocumentContainer(database.get_container_client(made.id))


def test_a_request_through_the_proxy_reaches_the_emulator_and_the_account_names_the_proxy(
    proxy: FaultProxy, through_proxy: CosmosDocumentContainer, cosmos_endpoint: CosmosEndpoint
) -> None:
    item = f"d-{uuid.uuid4().hex[:8]}"
    through_proxy.create({"id": item, "pk": "a", "n": 1}, "a")

    assert through_proxy.read(item, "a")["n"] == 1
    seen = proxy.rules.snapshot()["seen"]
    assert seen["create"] == 1 and seen["read"] == 1, seen
    account = requests.get(proxy.url, verify=cosmos_endpoint.verify, timeout=10).json()
    locations = [loc["databaseAccountEndpoint"] for loc in account["writableLocations"]]
    assert locations == [proxy.url], "the SDK must keep talking to the proxy after GET /"


def test_an_injected_503_on_patches_fails_the_patch_and_leaves_the_document_unchanged(
    proxy: FaultProxy, through_proxy: CosmosDocumentContainer
) -> None:
    through_proxy.create({"id": "d1", "pk": "a", "n": 1}, "a")
    proxy.rules.replace([FaultRule(status=503, operations=("patch",))])

    with pytest.raises(ServiceUnavailable, match="injected by the fault proxy"):
        through_proxy.patch("d1", "a", [PatchOperation("set", "/n", 2)])

    proxy.rules.replace([])
    assert through_proxy.read("d1", "a")["n"] == 1


def test_a_lost_acknowledgement_fails_the_call_although_the_write_landed(
    proxy: FaultProxy, through_proxy: CosmosDocumentContainer
) -> None:
    through_proxy.create({"id": "d1", "pk": "a", "n": 1}, "a")
    proxy.rules.replace([FaultRule(action="lost_ack", operations=("patch",), count=1)])

    with pytest.raises(ServiceUnavailable):
        through_proxy.patch("d1", "a", [PatchOperation("set", "/n", 2)])

    assert through_proxy.read("d1", "a")["n"] == 2, "the server applied the patch; only its response was dropped"


def test_rules_set_through_the_admin_endpoint_apply_to_the_next_request_and_a_bad_rule_is_refused(
    proxy: FaultProxy, through_proxy: CosmosDocumentContainer, cosmos_endpoint: CosmosEndpoint
) -> None:
    through_proxy.create({"id": "d1", "pk": "a"}, "a")
    admin = proxy.url + "_faults"
    refused = requests.post(
        admin, json={"rules": [{"status": 503, "operations": ["reads"]}]}, verify=cosmos_endpoint.verify, timeout=10
    )
    assert refused.status_code == 400
    assert "operations must name some of" in refused.json()["message"]

    body = {"rules": [{"status": 503, "operations": ["read"]}]}
    set_ = requests.post(admin, data=json.dumps(body), verify=cosmos_endpoint.verify, timeout=10)
    assert set_.status_code == 200
    with pytest.raises(ServiceUnavailable):
        through_proxy.read("d1", "a")
    cleared = requests.delete(admin, verify=cosmos_endpoint.verify, timeout=10).json()
    assert cleared["rules"] == []
    assert through_proxy.read("d1", "a")["id"] == "d1"
