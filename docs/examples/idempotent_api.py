"""An HTTP API whose write endpoint runs at most once per ``Idempotency-Key``: the FastAPI guard over the in-memory
store. Run it with

    .venv/bin/uvicorn --app-dir docs/examples idempotent_api:app

and send a request twice: the second answer is the first one again, with ``Idempotent-Replayed: true``::

    curl -si localhost:8000/orders -H 'Idempotency-Key: "o-1"' -H 'Content-Type: application/json' \\
         -d '{"customer": "c-7", "amount": 3}'

The guard declares what it adds in the app's OpenAPI (``/openapi.json``): the ``Idempotency-Key`` header, the
``Idempotent-Replayed`` header, and its problem answers (400 no or a malformed key, 409 the key's first request still
running, 413 a body too large to fingerprint, 422 the key used with another body). The scope, whose keys are kept
apart, is the caller: here the ``X-Client-Id`` header stands in for authentication. The in-memory store is right for
one process; over several, give ``Idempotency`` a ``ContainerIdempotencyStore`` over a Cosmos DB container.
"""

from __future__ import annotations

import itertools
import threading

from fastapi import APIRouter, FastAPI, HTTPException, Request, Response
from pydantic import BaseModel, Field

from airflow_chatter.adapters.fastapi.idempotency import Idempotency
from airflow_chatter.adapters.memory.idempotency import MemoryIdempotencyStore
from airflow_chatter.ports import IdempotencyStore


class NewOrder(BaseModel):
    customer: str = Field(min_length=1, max_length=100)
    amount: int = Field(ge=1, le=1_000_000)


class Order(NewOrder):
    id: str


class Detail(BaseModel):
    """FastAPI's own error answer (``HTTPException``), beside the guard's problem answers."""

    detail: str


class Orders:
    """The example's data: orders in memory, each created once."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._numbers = itertools.count(1)
        self.by_id: dict[str, Order] = {}

    def create(self, order: NewOrder) -> Order:
        with self._lock:
            created = Order(id=f"order-{next(self._numbers)}", **order.model_dump())
            self.by_id[created.id] = created
            return created


def client_id(request: Request) -> str:
    """The idempotency scope: one client's keys never replay to another (in a real API, the authenticated user)."""
    return request.headers.get("x-client-id") or "anonymous"


def create_app(store: IdempotencyStore | None = None, orders: Orders | None = None) -> FastAPI:
    orders = orders or Orders()
    idempotency = Idempotency(store or MemoryIdempotencyStore(), scope=client_id)
    app = FastAPI(title="idempotent orders", version="1")
    writes = APIRouter(route_class=idempotency.route_class)

    @writes.post(
        "/orders",
        status_code=201,
        summary="Create an order, once per Idempotency-Key",
        responses={400: {"model": Detail, "description": "The body is not JSON."}},
    )
    def create_order(order: NewOrder, response: Response) -> Order:
        created = orders.create(order)
        response.headers["Location"] = f"/orders/{created.id}"
        return created

    @app.get("/orders/{order_id}", responses={404: {"model": Detail}}, summary="One order")
    def read_order(order_id: str) -> Order:
        if order_id not in orders.by_id:
            raise HTTPException(404, f"no order {order_id}")
        return orders.by_id[order_id]

    app.include_router(writes)
    app.state.orders = orders
    return app


app = create_app()
