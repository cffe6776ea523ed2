"""The FastAPI side: serve a write endpoint at most once per ``Idempotency-Key``, replaying its stored response.

The request side of the IETF Idempotency-Key draft (draft-ietf-httpapi-idempotency-key-header) over any
:class:`~airflow_chatter.ports.IdempotencyStore`:

* no key on an opted-in endpoint → **400**; a key that is not an RFC 8941 sf-string, or is over 200 characters
  (or its item id over 1023 bytes) → **400** naming the limit; a body over ``max_request_body_bytes`` → **413**
  naming the limit. In every one of these nothing is stored and the handler does not run.
* the key reused with another request (a different fingerprint) → **422**;
* the key held by a request still running → **409** with ``Retry-After`` (seconds);
* a completed key → the stored status, headers and body, plus ``Idempotent-Replayed: true``;
* the store throttled (a 429 from its container) → **503** with ``Retry-After``: nothing reserved, handler not run.

Attach it per route, so only write endpoints pay for it::

    idempotency = Idempotency(store, scope=lambda request: request.headers.get("x-tenant", "anonymous"))
    router = APIRouter(route_class=idempotency.route_class)      # every route of this router

    @router.post("/orders", status_code=201)
    def create_order(order: Order) -> dict: ...

    @idempotency.route(app.router, "/refunds", methods=["POST"])  # or one route at a time
    def refund(...): ...

What is stored: responses below 500 whose body fits ``max_response_body_bytes`` (a bigger one is still sent, and
its reservation abandoned). A 5xx, or an exception out of the handler, abandons the reservation, so a retry runs
the handler again. ``Set-Cookie`` is never stored unless asked. FastAPI is imported here only.
"""

from __future__ import annotations

import copy
import inspect
import logging
import math
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable
from dataclasses import dataclass
from typing import Any

from fastapi import Request, Response
from fastapi.responses import JSONResponse, StreamingResponse
from fastapi.routing import APIRoute, APIRouter
from starlette.concurrency import run_in_threadpool

from airflow_chatter.idempotency.decision import should_store
from airflow_chatter.idempotency.fingerprint import HEADER_NAME, parse_sf_string, request_fingerprint
from airflow_chatter.ports import IdempotencyStore, Throttled
from airflow_chatter.ports.idempotency import (
    MAX_KEY_LENGTH,
    AlreadyInFlight,
    BodyHashMismatch,
    InvalidIdempotencyRequestError,
    Replay,
    Reserved,
    StoredResponse,
    validate_key,
    validate_scope,
)

log = logging.getLogger(__name__)

MIB = 1024 * 1024
#: Headers that describe one connection or one encoding of the body, never the response itself.
_NOT_STORED = frozenset(
    {"content-length", "connection", "keep-alive", "transfer-encoding", "te", "trailer", "upgrade", "date", "server"}
)

ScopeResolver = Callable[[Request], str | Awaitable[str]]
Endpoint = Callable[..., Any]


def _anonymous(request: Request) -> str:
    return "anonymous"


@dataclass(frozen=True)
class HttpIdempotencyOptions:
    """IDM-O01..O06. ``store_status`` decides which statuses are recorded (default: below 500)."""

    header_name: str = HEADER_NAME
    replay_header_name: str = "Idempotent-Replayed"
    require_key: bool = True
    methods: frozenset[str] = frozenset({"POST", "PATCH"})
    max_request_body_bytes: int = MIB
    max_response_body_bytes: int = MIB
    mismatch_status_code: int = 422
    include_set_cookie: bool = False
    additional_fingerprint_headers: tuple[str, ...] = ()
    store_status: Callable[[int], bool] = should_store

    def __post_init__(self) -> None:
        for name in ("max_request_body_bytes", "max_response_body_bytes"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise InvalidIdempotencyRequestError(name, f"must be a non-negative int, got {value!r}")
        object.__setattr__(self, "methods", frozenset(method.upper() for method in self.methods))


#: RFC 9457 problem details as :func:`problem` answers them, for the OpenAPI schema.
PROBLEM_SCHEMA: dict[str, Any] = {
    "type": "object",
    "title": "Problem",
    "required": ["type", "title", "status", "detail"],
    "properties": {
        "type": {"type": "string"},
        "title": {"type": "string"},
        "status": {"type": "integer"},
        "detail": {"type": "string"},
    },
}
#: An RFC 8941 sf-string the guard accepts: printable ASCII in double quotes (a quote or backslash escaped with a
#: backslash), 1 to ``MAX_KEY_LENGTH`` characters.
_SF_STRING_PATTERN = r'^"(?:[\x20\x21\x23-\x5b\x5d-\x7e]|\\["\\]){1,' + str(MAX_KEY_LENGTH) + '}"$'


def problem(status: int, title: str, detail: str, headers: dict[str, str] | None = None) -> JSONResponse:
    """An RFC 9457 problem-details response."""
    return JSONResponse(
        {"type": "about:blank", "title": title, "status": status, "detail": detail},
        status_code=status,
        headers=headers,
        media_type="application/problem+json",
    )


class _Refused(Exception):
    def __init__(self, response: Response) -> None:
        self.response = response


class Idempotency:
    """Wraps endpoints so each runs at most once per idempotency key; see the module docstring."""

    def __init__(
        self,
        store: IdempotencyStore,
        options: HttpIdempotencyOptions | None = None,
        *,
        scope: ScopeResolver = _anonymous,
    ) -> None:
        self.store = store
        self.options = options or HttpIdempotencyOptions()
        self._scope = scope
        guard = self

        class IdempotentRoute(APIRoute):
            def __init__(self, path: str, endpoint: Endpoint, **kwargs: Any) -> None:
                super().__init__(path, endpoint, **kwargs)
                if self.methods & guard.options.methods:
                    self.openapi_extra = guard.openapi(self.openapi_extra, self.status_code)

            def get_route_handler(self) -> Callable[[Request], Any]:
                original = super().get_route_handler()

                async def handler(request: Request) -> Response:
                    return await guard.handle(request, original)

                return handler

        #: An ``APIRoute`` class: give it to ``APIRouter(route_class=...)`` or ``route_class_override``.
        self.route_class: type[APIRoute] = IdempotentRoute

    def route(self, router: APIRouter, path: str, **kwargs: Any) -> Callable[[Endpoint], Endpoint]:
        """Register one idempotent route on ``router`` (``methods``, ``status_code``... as ``add_api_route``)."""

        def register(endpoint: Endpoint) -> Endpoint:
            kwargs.setdefault("methods", sorted(self.options.methods))
            router.add_api_route(path, endpoint, route_class_override=self.route_class, **kwargs)
            return endpoint

        return register

    def openapi(self, extra: dict[str, Any] | None = None, status_code: int | None = None) -> dict[str, Any]:
        """``extra`` (a route's ``openapi_extra``) plus what the guard adds to the operation: the key header, the
        replay header on the success answer, and the problem answers it gives (400, 409, 413 and the mismatch's)."""
        name = self.options.header_name
        merged = copy.deepcopy(extra or {})
        parameters = merged.setdefault("parameters", [])
        if not any(p.get("in") == "header" and str(p.get("name")).lower() == name.lower() for p in parameters):
            parameters.append(
                {
                    "name": name,
                    "in": "header",
                    "required": self.options.require_key,
                    "description": f"A quoted RFC 8941 string of 1 to {MAX_KEY_LENGTH} characters, e.g. "
                    '"8e0f3c2a": a request sent again with the same key and body gets the first answer again.',
                    "schema": {"type": "string", "pattern": _SF_STRING_PATTERN},
                }
            )
        responses = merged.setdefault("responses", {})
        success = responses.setdefault(str(status_code or 200), {})
        success.setdefault("headers", {})[self.options.replay_header_name] = {
            "description": "`true` when this is the stored answer to an earlier request with the same key.",
            "schema": {"type": "string", "enum": ["true"]},
        }
        refusals = {
            400: ("The idempotency key is missing or malformed, or the scope is invalid.", None),
            409: ("A request with this key is still being processed; retry after `Retry-After` seconds.", "retry"),
            413: (f"The request body is over {self.options.max_request_body_bytes} bytes.", None),
            self.options.mismatch_status_code: ("The key was already used with a different request.", None),
        }
        for status, (description, headers) in refusals.items():
            answer = responses.setdefault(str(status), {})
            answer.setdefault("description", description)
            answer.setdefault("content", {})["application/problem+json"] = {"schema": PROBLEM_SCHEMA}
            if headers:
                answer.setdefault("headers", {})["Retry-After"] = {
                    "description": "Seconds to wait before retrying.",
                    "required": True,
                    "schema": {"type": "string", "pattern": "^[0-9]+$"},
                }
        return merged

    # -- the request flow ------------------------------------------------------------------------------------------

    async def handle(self, request: Request, call_next: Callable[[Request], Awaitable[Response]]) -> Response:
        if request.method.upper() not in self.options.methods:
            return await call_next(request)
        try:
            key = self._key(request)
            if key is None:
                return await call_next(request)
            body = await self._body(request)
            scope = await self._resolve_scope(request)
        except _Refused as refused:
            return refused.response
        fingerprint = self.fingerprint(request, body)
        try:
            outcome = await run_in_threadpool(self.store.reserve, scope, key, fingerprint)
        except Throttled as throttled:
            # The store's container answered 429 (the project's Cosmos clients leave 429s to their callers, F-11):
            # nothing was reserved and the handler did not run, so the client's retry with the same key is safe.
            seconds = throttled.retry_after_seconds
            return problem(
                503,
                "Idempotency store throttled",
                f"The idempotency store is throttled (429); retry in {seconds} s with the same "
                f"{self.options.header_name}.",
                headers={"Retry-After": str(seconds)},
            )
        if isinstance(outcome, Replay):
            return self._replay(outcome.response)
        if isinstance(outcome, BodyHashMismatch):
            return problem(
                self.options.mismatch_status_code,
                "Idempotency key reused",
                f"This {self.options.header_name} was already used with a different request; use a new key.",
            )
        if isinstance(outcome, AlreadyInFlight):
            seconds = max(1, math.ceil(outcome.retry_after.total_seconds()))
            return problem(
                409,
                "Request in progress",
                f"A request with this {self.options.header_name} is still being processed; retry later.",
                headers={"Retry-After": str(seconds)},
            )
        return await self._run(request, scope, key, fingerprint, outcome, call_next)

    def fingerprint(self, request: Request, body: bytes) -> str:
        extra = [
            (name, value)
            for name in self.options.additional_fingerprint_headers
            for value in request.headers.getlist(name)
        ]
        return request_fingerprint(
            request.method,
            request.url.path,
            request.url.query,
            body,
            content_type=request.headers.get("content-type"),
            content_encoding=request.headers.get("content-encoding"),
            extra_headers=extra,
        )

    def _key(self, request: Request) -> str | None:
        name = self.options.header_name
        values = request.headers.getlist(name)
        if not values:
            if self.options.require_key:
                raise _Refused(problem(400, "Idempotency key required", f"This endpoint requires a {name} header."))
            return None
        if len(values) > 1:
            raise _Refused(problem(400, "Invalid idempotency key", f"Send exactly one {name} header."))
        try:
            return validate_key(parse_sf_string(values[0], field=f"{name} header"))
        except InvalidIdempotencyRequestError as error:
            raise _Refused(problem(400, "Invalid idempotency key", f"The {error}.")) from error

    async def _body(self, request: Request) -> bytes:
        limit = self.options.max_request_body_bytes
        too_large = problem(
            413, "Request body too large", f"An idempotent request body may be at most {limit} bytes (limit {limit})."
        )
        declared = request.headers.get("content-length")
        if declared is not None and declared.isdigit() and int(declared) > limit:
            raise _Refused(too_large)
        chunks: list[bytes] = []
        size = 0
        async for chunk in request.stream():
            size += len(chunk)
            if size > limit:
                raise _Refused(too_large)
            chunks.append(chunk)
        body = b"".join(chunks)
        request._body = body  # the handler reads the body again; Starlette serves it from here
        return body

    async def _resolve_scope(self, request: Request) -> str:
        scope = self._scope(request)
        if inspect.isawaitable(scope):
            scope = await scope
        try:
            return validate_scope(scope)
        except InvalidIdempotencyRequestError as error:
            raise _Refused(problem(400, "Invalid idempotency scope", f"The {error}.")) from error

    async def _run(
        self,
        request: Request,
        scope: str,
        key: str,
        fingerprint: str,
        reserved: Reserved,
        call_next: Callable[[Request], Awaitable[Response]],
    ) -> Response:
        rid = reserved.reservation_id
        try:
            response = await call_next(request)
            body, response = await self._captured(response)
        except BaseException:
            # The handler (or its streamed body) failed: release the key so the client's retry runs it again.
            await run_in_threadpool(self.store.abandon, scope, key, rid)
            raise
        if body is None or not self.options.store_status(response.status_code):
            await run_in_threadpool(self.store.abandon, scope, key, rid)
            return response
        snapshot = StoredResponse(response.status_code, self._stored_headers(response.raw_headers), body, fingerprint)
        try:
            await run_in_threadpool(self.store.complete, scope, key, rid, snapshot)
        except Exception:
            # The handler ran; its answer still goes out. The slot is released if it is still ours.
            log.exception("idempotency complete failed for scope %r; the response is sent but not stored", scope)
            await run_in_threadpool(self.store.abandon, scope, key, rid)
        return response

    async def _captured(self, response: Response) -> tuple[bytes | None, Response]:
        """The response body if it can be stored (``None`` if too big or not capturable), and what to send."""
        limit = self.options.max_response_body_bytes
        if isinstance(response, StreamingResponse):
            buffered: list[bytes] = []
            size = 0
            iterator = response.body_iterator.__aiter__()
            async for chunk in iterator:
                data = chunk if isinstance(chunk, bytes) else str(chunk).encode(response.charset)
                buffered.append(data)
                size += len(data)
                if size > limit:
                    return None, _resumed(response, buffered, iterator)
            body = b"".join(buffered)
            replacement = Response(content=body, status_code=response.status_code)
            replacement.raw_headers = [(n, v) for n, v in response.raw_headers if n.lower() != b"content-length"]
            replacement.raw_headers.append((b"content-length", str(len(body)).encode()))
            return body, replacement
        plain = getattr(response, "body", None)
        if not isinstance(plain, bytes) or len(plain) > limit:
            return None, response
        return plain, response

    def _stored_headers(self, raw: Iterable[tuple[bytes, bytes]]) -> list[tuple[str, str]]:
        headers = []
        for name_bytes, value_bytes in raw:
            name = name_bytes.decode("latin-1")
            lower = name.lower()
            if lower in _NOT_STORED or (lower == "set-cookie" and not self.options.include_set_cookie):
                continue
            headers.append((name, value_bytes.decode("latin-1")))
        return headers

    def _replay(self, stored: StoredResponse) -> Response:
        response = Response(content=stored.body, status_code=stored.status_code)
        for name, values in stored.headers.items():
            if name.lower() in _NOT_STORED:
                continue
            response.raw_headers.extend((name.lower().encode("latin-1"), v.encode("latin-1")) for v in values)
        response.raw_headers.append((self.options.replay_header_name.lower().encode("latin-1"), b"true"))
        return response


def _resumed(response: StreamingResponse, buffered: list[bytes], rest: AsyncIterator[Any]) -> StreamingResponse:
    async def chained() -> AsyncIterator[bytes]:
        for chunk in buffered:
            yield chunk
        async for chunk in rest:
            yield chunk if isinstance(chunk, bytes) else str(chunk).encode(response.charset)

    resumed = StreamingResponse(chained(), status_code=response.status_code)
    resumed.raw_headers = list(response.raw_headers)
    return resumed


__all__ = ["PROBLEM_SCHEMA", "HttpIdempotencyOptions", "Idempotency", "problem"]
