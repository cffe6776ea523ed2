"""The idempotent example API (``idempotent_api.py``) fuzzed from the OpenAPI the guard declares:

    .venv/bin/python -m pytest docs/examples/test_idempotent_api.py -q

For requests schemathesis generates (valid and not): no 5xx, every status, header, content type and body is one the
schema declares. A request that created an order, sent again with the same key, gets the stored answer and creates
nothing; the same key with another body is refused (422) and creates nothing either. Every case runs as a client of
its own (``X-Client-Id``), so one case's keys never meet another's.
"""

from __future__ import annotations

import uuid
from typing import Any

import schemathesis
from fastapi.testclient import TestClient
from hypothesis import HealthCheck, settings
from idempotent_api import Orders, create_app

ORDERS = Orders()
APP = create_app(orders=ORDERS)
schema = schemathesis.openapi.from_asgi("/openapi.json", APP)


@schema.parametrize()
@settings(max_examples=25, deadline=None, suppress_health_check=list(HealthCheck))
def test_the_example_api_answers_what_its_schema_declares_and_replays_by_key(case: Any) -> None:
    client = {"X-Client-Id": f"client-{uuid.uuid4().hex}"}
    response = case.call_and_validate(headers=client)
    created = response.status_code == 201 and response.headers.get("idempotent-replayed") is None
    if not created:
        return
    count = len(ORDERS.by_id)
    replay = case.call(headers=client)
    assert (replay.status_code, replay.json()) == (201, response.json())
    assert replay.headers["idempotent-replayed"] == ["true"]
    assert len(ORDERS.by_id) == count
    other = {**case.body, "amount": case.body["amount"] % 1_000_000 + 1}
    refused = case.call(headers=client, json=other)
    assert refused.status_code == 422, refused.text
    assert refused.headers["content-type"] == ["application/problem+json"]
    assert "different request" in refused.json()["detail"]
    assert len(ORDERS.by_id) == count


def test_the_guard_declares_its_header_and_problem_answers() -> None:
    operation = TestClient(create_app()).get("/openapi.json").json()["paths"]["/orders"]["post"]
    (key,) = [p for p in operation["parameters"] if p["name"] == "Idempotency-Key"]
    assert (key["in"], key["required"]) == ("header", True)
    for status in ("400", "409", "413", "422"):
        assert "application/problem+json" in operation["responses"][status]["content"], status
    assert operation["responses"]["409"]["headers"]["Retry-After"]["required"] is True
    assert "Idempotent-Replayed" in operation["responses"]["201"]["headers"]
    # FastAPI's own validation answer stays declared beside the guard's mismatch answer.
    assert "application/json" in operation["responses"]["422"]["content"]
