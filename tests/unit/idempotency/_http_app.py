"""A FastAPI app with idempotent write endpoints, shared by the TestClient tests and the uvicorn test."""

from __future__ import annotations

import asyncio
import threading
from collections import Counter
from collections.abc import AsyncIterator
from typing import Any

from fastapi import APIRouter, FastAPI, Request
from fastapi.responses import JSONResponse, StreamingResponse

from airflow_chatter.adapters.fastapi.idempotency import HttpIdempotencyOptions, Idempotency
from airflow_chatter.ports import IdempotencyStore


class Calls:
    """How often each endpoint's handler really ran (thread-safe: sync handlers run in a thread pool)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.counts: Counter[str] = Counter()

    def hit(self, name: str) -> int:
        with self._lock:
            self.counts[name] += 1
            return self.counts[name]


def make_app(
    store: IdempotencyStore, calls: Calls, options: HttpIdempotencyOptions | None = None, handler_delay: float = 0.0
) -> FastAPI:
    app = FastAPI()
    idempotency = Idempotency(store, options, scope=lambda request: request.headers.get("x-tenant", "anonymous"))
    router = APIRouter(route_class=idempotency.route_class)

    @router.post("/orders", status_code=201)
    async def create_order(request: Request) -> JSONResponse:
        number = calls.hit("orders")
        if handler_delay:
            await asyncio.sleep(handler_delay)
        payload: Any = await request.json()
        response = JSONResponse(
            {"order": number, "echo": payload}, status_code=201, headers={"Location": f"/orders/{number}"}
        )
        response.raw_headers.append((b"x-multi", b"one"))
        response.raw_headers.append((b"x-multi", b"two"))
        response.set_cookie("session", "secret-cookie")
        return response

    @router.get("/orders")
    def list_orders() -> dict[str, int]:
        return {"listed": calls.hit("list")}

    @router.post("/unavailable")
    def unavailable() -> JSONResponse:
        return JSONResponse({"try": calls.hit("unavailable")}, status_code=503)

    @router.post("/boom")
    def boom() -> None:
        calls.hit("boom")
        raise RuntimeError("handler failed")

    @router.post("/big")
    def big() -> JSONResponse:
        return JSONResponse({"n": calls.hit("big"), "pad": "x" * 2048})

    @router.post("/stream")
    def stream() -> StreamingResponse:
        number = calls.hit("stream")

        async def chunks() -> AsyncIterator[bytes]:
            for part in (b"part-", str(number).encode(), b"-end"):
                yield part

        return StreamingResponse(chunks(), media_type="text/plain")

    @router.post("/stream-fails")
    def stream_fails() -> StreamingResponse:
        calls.hit("stream-fails")

        async def chunks() -> AsyncIterator[bytes]:
            yield b"partial"
            raise RuntimeError("the body generator failed")

        return StreamingResponse(chunks(), media_type="text/plain")

    app.include_router(router)

    @idempotency.route(app.router, "/single", methods=["POST"], status_code=202)
    def single() -> dict[str, int]:
        return {"single": calls.hit("single")}

    @app.post("/plain")
    def plain() -> dict[str, int]:
        return {"plain": calls.hit("plain")}

    return app
