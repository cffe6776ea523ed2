"""The emulator as Microsoft's other SDKs see it: a Java client (azure-cosmos for Java, what the Change Feed
Processor and the Kafka and Spark connectors use) and a Node client (@azure/cosmos) drive a container of 4 partition
key ranges through CRUD, patch, two transactional batches, a query and the change feed of every feed range from the
beginning, page by page with continuations; then one range splits, more documents arrive, and each client resumes
from its continuations (docs/emulator.md, "Other SDKs").

The clients are built by ``scripts/sdk-clients.sh install`` (cached; scripts/test.sh runs it) and print one JSON
object. The Java client is skipped, with the reason, when java or mvn is not on PATH; built clients are required.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.fixtures.cosmos import ContainerFactory, CosmosEndpoint, emulator_admin, emulator_configured

pytestmark = pytest.mark.cosmos

CHECKOUT = Path(__file__).resolve().parents[2]
SDK_CLIENTS_SH = CHECKOUT / "scripts" / "sdk-clients.sh"
COUNT = 40
CLIENT_TIMEOUT_S = 300


def _built(sdk: str) -> Path:
    result = subprocess.run(
        [str(SDK_CLIENTS_SH), "where", sdk], capture_output=True, text=True, check=False, timeout=30
    )
    reason = result.stderr.strip()
    if result.returncode == 3 and "not found on PATH" in reason:
        pytest.skip(f"the {sdk} SDK client cannot run here: {reason}")
    assert result.returncode == 0, f"the {sdk} SDK client: {reason}"
    return Path(result.stdout.strip())


def _command(sdk: str, endpoint: CosmosEndpoint, tmp_path: Path) -> tuple[list[str], dict[str, str]]:
    env = dict(os.environ)
    where = _built(sdk)
    cert = endpoint.verify if isinstance(endpoint.verify, str) else None
    if sdk == "node":
        env["NODE_PATH"] = str(where)
        if cert:
            env["NODE_EXTRA_CA_CERTS"] = cert
        elif endpoint.verify is False:
            env["NODE_TLS_REJECT_UNAUTHORIZED"] = "0"
        return ["node", str(CHECKOUT / "tests" / "sdk" / "node" / "client.js")], env
    java = ["java", "-cp", f"{where}/target/classes:{where}/target/lib/*"]
    if cert:
        store = tmp_path / "truststore.p12"
        subprocess.run(
            ["keytool", "-importcert", "-noprompt", "-alias", "emulator", "-file", cert, "-keystore", str(store),
             "-storetype", "PKCS12", "-storepass", "changeit"],
            capture_output=True, check=True, timeout=60,
        )  # fmt: skip
        java[1:1] = [f"-Djavax.net.ssl.trustStore={store}", "-Djavax.net.ssl.trustStorePassword=changeit"]
    return [*java, "chatter.SdkClient"], env


def _run(command: list[str], env: dict[str, str], *args: str) -> tuple[dict[str, Any], str]:
    result = subprocess.run(
        [*command, *args], env=env, capture_output=True, text=True, check=False, timeout=CLIENT_TIMEOUT_S
    )
    assert result.returncode == 0, f"{args[0]} exited {result.returncode}:\n{result.stderr[-4000:]}"
    out: dict[str, Any] = json.loads(result.stdout.strip().splitlines()[-1])
    return out, result.stderr


def _feed_ids(feed: dict[str, Any]) -> list[str]:
    return [doc_id for feed_range in feed["ranges"] for doc_id in feed_range["ids"]]


def _expected(label: str) -> set[str]:
    # The COUNT documents and the two the committed batch wrote (the CRUD item was deleted; b3 rolled back).
    return {f"{label}-{i}" for i in range(COUNT)} | {f"{label}-b1", f"{label}-b2"}


def _sdk_errors(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if " ERROR " in line]


@pytest.mark.parametrize("sdk", ["java", "node"])
def test_other_sdks_see_an_account_crud_batch_query_and_the_feed_across_a_split(
    sdk: str, cosmos_endpoint: CosmosEndpoint, cosmos_container_factory: ContainerFactory, tmp_path: Path
) -> None:
    if not cosmos_endpoint.is_emulator:
        pytest.skip("a real account cannot be given 4 ranges and split on demand")
    command, env = _command(sdk, cosmos_endpoint, tmp_path)
    with emulator_configured(cosmos_endpoint, partition_ranges=4):
        container = cosmos_container_factory(("/pk",))
    database = container.container_link.split("/")[1]
    target = [cosmos_endpoint.url, cosmos_endpoint.key, database, container.id]

    wrote, write_log = _run(command, env, "write", *target, "a", str(COUNT))
    assert wrote["crud"] == {
        "create": 201, "create_again": 409, "read_n": 1, "replace": 200, "upsert": 200,
        "read_after_upsert_n": 3, "delete": 204, "read_deleted": 404,
    }  # fmt: skip
    assert wrote["patch"] == {"status": "patched", "n": 13}
    batch = wrote["batch"]
    assert batch["committed"] and batch["committed_codes"] == [201, 201, 200] and batch["tag"] == "in-batch"
    assert batch["rolled_back_codes"] == [424, 409], "the failing operation 409, the other 424 (not applied)"
    assert batch["rolled_back_item_read"] == 404, "a failed batch leaves nothing written"
    assert sorted(wrote["queried"]) == sorted(wrote["written"]), "the query fans out over every range"

    first, first_log = _run(command, env, "feed", *target, "-")
    assert first["feed_ranges"] == 4
    ids = _feed_ids(first)
    assert len(ids) == len(set(ids)) and set(ids) == _expected("a"), "every document once, over the 4 ranges"
    assert all(feed_range["ids"] for feed_range in first["ranges"]), "16 partition keys reach every range"
    paged = max(first["ranges"], key=lambda r: len(r["ids"]))
    assert paged["pages"] > 2 and len(set(paged["continuations"])) > 2, "a range of many pages, each continued"

    # The busiest range splits; the continuation that named it must still read on, through the children.
    ranges = emulator_admin(cosmos_endpoint, "GET", "ranges", params={"container": container.container_link})
    busiest = first["ranges"].index(paged)
    split = emulator_admin(
        cosmos_endpoint, "POST", "split",
        body={"container": container.container_link, "range_id": ranges["ranges"][busiest]["id"]},
    )  # fmt: skip
    assert len(split["children"]) == 2
    _run(command, env, "write", *target, "b", str(COUNT))
    state = tmp_path / f"{sdk}-feed.json"
    state.write_text(json.dumps(first))
    resumed, resumed_log = _run(command, env, "feed", *target, str(state))

    assert resumed["feed_ranges"] == 5, "the SDK lists the split's two children"
    ids = _feed_ids(resumed)
    assert len(ids) == len(set(ids)) and set(ids) == _expected("b"), "only what came after, each once"
    assert resumed["ranges"][busiest]["ids"], "the split range's continuation read its children's documents"
    for log in (write_log, first_log, resumed_log):
        assert not _sdk_errors(log), f"the {sdk} SDK logged errors: {_sdk_errors(log)[:3]}"
