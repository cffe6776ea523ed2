"""A fault-injecting HTTPS proxy in front of a Cosmos DB endpoint (the project emulator), for the fault suite.

Why a proxy: the emulator's switches model an account (latency, charges, 429s), but not a gateway that answers 503
to one kind of request, nor a response lost after the write landed. The proxy sits between the SDK and the server,
classifies every request (account read, feed read, point read, query, create, patch, batch, ...), and applies the
first rule that matches it:

* ``status``: answer that status without forwarding (``retry_after_ms`` sets ``x-ms-retry-after-ms`` on a 429);
* ``lost_ack``: forward the request, let the server apply it, then drop the response and reset the connection
  (the client sees a broken connection after a write that landed);
* ``reset``: reset the connection without forwarding.

A rule matches by operation, HTTP method, a regular expression on the path, a container name, and fires ``count``
times (or forever) with ``probability``. Rules are changed at run time through ``/_faults`` on the proxy's own port
(``GET`` lists them with hit counts; ``POST {"rules": [...]}`` replaces them; ``DELETE`` clears them), so a drain
running in another process is affected as it runs. It binds 127.0.0.1 only.

The account document (``GET /``) names the server's own address as the read and write location; the SDK switches
to it after the first call, so the proxy rewrites that address to its own in that answer.
Run it on its own: ``python -m devkit.faultproxy --upstream https://127.0.0.1:8081/
--cert cert.pem --key key.pem --port 0`` prints ``FAULTPROXY_URL=...`` when it listens.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import random
import re
import ssl
import sys
import threading
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

#: Operations a rule can name. ``write`` matches every document write (create, upsert, replace, patch, delete, batch).
OPERATIONS = frozenset(
    {"account", "metadata", "pkranges", "feed", "read", "list", "query", "create", "upsert", "replace", "patch"}
    | {"delete", "batch", "write", "any"}
)
WRITES = frozenset({"create", "upsert", "replace", "patch", "delete", "batch"})
ACTIONS = frozenset({"status", "lost_ack", "reset"})
ADMIN_PATH = "/_faults"
#: Bounds one request or response head (a Cosmos header block is a few KiB).
_MAX_HEAD_BYTES = 256 * 1024
_REASONS = {408: "Request Timeout", 410: "Gone", 429: "Too Many Requests", 500: "Internal Server Error"}
_REASONS |= {503: "Service Unavailable", 449: "Retry With", 404: "Not Found", 412: "Precondition Failed"}
_COLLECTION = re.compile(r"/colls/([^/]+)")


def classify(method: str, path: str, headers: Mapping[str, str]) -> str:
    """The operation a Cosmos REST request performs, from its method, path and headers (lower-case names)."""
    method = method.upper()
    bare = path.split("?", 1)[0].rstrip("/")
    if bare == "":
        return "account"
    parts = bare.strip("/").split("/")
    if "pkranges" in parts:
        return "pkranges"
    if len(parts) < 5 or parts[4] != "docs":
        return "metadata"
    on_item = len(parts) >= 6
    if method == "POST" and not on_item:
        if headers.get("x-ms-cosmos-is-batch-request", "").lower() == "true":
            return "batch"
        if headers.get("x-ms-documentdb-isquery", "").lower() == "true" or "query+json" in headers.get(
            "content-type", ""
        ):
            return "query"
        if headers.get("x-ms-documentdb-is-upsert", "").lower() == "true":
            return "upsert"
        return "create"
    if method == "GET":
        if on_item:
            return "read"
        return "feed" if headers.get("a-im", "").lower() == "incremental feed" else "list"
    return {"PATCH": "patch", "PUT": "replace", "DELETE": "delete"}.get(method, "metadata")


def container_of(path: str) -> str | None:
    found = _COLLECTION.search(path)
    return found.group(1) if found else None


@dataclass
class FaultRule:
    """One fault: which requests it matches, what it does to them, how often. Validated when built."""

    action: str = "status"
    status: int = 503
    operations: tuple[str, ...] = ("any",)
    methods: tuple[str, ...] = ()
    path_pattern: str | None = None
    container: str | None = None
    count: int | None = None
    probability: float = 1.0
    retry_after_ms: int | None = None
    substatus: int | None = None
    hits: int = 0
    _pattern: re.Pattern[str] | None = field(default=None, repr=False, compare=False)

    def __post_init__(self) -> None:
        if self.action not in ACTIONS:
            raise ValueError(f"action must be one of {sorted(ACTIONS)}, got {self.action!r}")
        if isinstance(self.status, bool) or not isinstance(self.status, int) or not 100 <= self.status <= 599:
            raise ValueError(f"status must be an HTTP status code (100-599), got {self.status!r}")
        ops = (self.operations,) if isinstance(self.operations, str) else tuple(self.operations)
        unknown = [op for op in ops if op not in OPERATIONS]
        if not ops or unknown:
            raise ValueError(f"operations must name some of {sorted(OPERATIONS)}, got {list(ops)!r}")
        self.operations = ops
        self.methods = tuple(m.upper() for m in ((self.methods,) if isinstance(self.methods, str) else self.methods))
        if self.count is not None and (isinstance(self.count, bool) or not isinstance(self.count, int)):
            raise ValueError(f"count must be an integer or null, got {self.count!r}")
        if isinstance(self.probability, bool) or not 0.0 <= float(self.probability) <= 1.0:
            raise ValueError(f"probability must be from 0 to 1, got {self.probability!r}")
        if self.path_pattern is not None:
            try:
                self._pattern = re.compile(self.path_pattern)
            except re.error as error:
                raise ValueError(f"path_pattern is not a regular expression: {error}") from None

    @classmethod
    def from_dict(cls, value: Mapping[str, Any]) -> FaultRule:
        known = {"action", "status", "operations", "methods", "path_pattern", "container", "count"}
        known |= {"probability", "retry_after_ms", "substatus"}
        extra = sorted(set(value) - known)
        if extra:
            raise ValueError(f"unknown rule field(s) {extra}; known: {sorted(known)}")
        return cls(**dict(value))

    def to_dict(self) -> dict[str, Any]:
        return {
            "action": self.action,
            "status": self.status,
            "operations": list(self.operations),
            "methods": list(self.methods),
            "path_pattern": self.path_pattern,
            "container": self.container,
            "count": self.count,
            "probability": self.probability,
            "retry_after_ms": self.retry_after_ms,
            "substatus": self.substatus,
            "hits": self.hits,
        }

    def matches(self, operation: str, method: str, path: str) -> bool:
        """Whether the request is one this rule is about (count and probability aside)."""
        ops = self.operations
        if "any" not in ops and operation not in ops and not ("write" in ops and operation in WRITES):
            return False
        if self.methods and method.upper() not in self.methods:
            return False
        if self.container is not None and container_of(path) != self.container:
            return False
        return self._pattern is None or self._pattern.search(path) is not None


class FaultRules:
    """The proxy's rule list (thread-safe): the first live rule that matches a request and wins its draw fires."""

    def __init__(self, rules: Sequence[FaultRule] = (), *, seed: int | None = None) -> None:
        self._lock = threading.Lock()
        self._rules = list(rules)
        self._random = random.Random(seed)
        self.seen: Counter[str] = Counter()

    def replace(self, rules: Sequence[FaultRule]) -> None:
        with self._lock:
            self._rules = list(rules)

    def snapshot(self) -> dict[str, Any]:
        with self._lock:
            return {"rules": [rule.to_dict() for rule in self._rules], "seen": dict(self.seen)}

    def pick(self, operation: str, method: str, path: str) -> FaultRule | None:
        with self._lock:
            self.seen[operation] += 1
            for rule in self._rules:
                if rule.count is not None and rule.hits >= rule.count:
                    continue
                if not rule.matches(operation, method, path):
                    continue
                if rule.probability < 1.0 and self._random.random() >= rule.probability:
                    continue
                rule.hits += 1
                return rule
            return None


# ----------------------------------------------------------------------------------------------------------------
# HTTP/1.1 plumbing: just what the SDK and the emulator speak (Content-Length or chunked bodies, keep-alive).
# ----------------------------------------------------------------------------------------------------------------


@dataclass
class _Message:
    start: str
    headers: list[tuple[str, str]]
    body: bytes

    def header(self, name: str) -> str:
        for key, value in self.headers:
            if key.lower() == name:
                return value
        return ""

    def encode(self) -> bytes:
        lines = [self.start]
        for key, value in self.headers:
            if key.lower() not in ("content-length", "transfer-encoding"):
                lines.append(f"{key}: {value}")
        lines.append(f"Content-Length: {len(self.body)}")
        return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + self.body


async def _read_message(reader: asyncio.StreamReader, *, response_to: str | None = None) -> _Message | None:
    try:
        head = await reader.readuntil(b"\r\n\r\n")
    except asyncio.IncompleteReadError:
        return None
    except asyncio.LimitOverrunError as error:
        raise ConnectionError("message head too large") from error
    lines = head.decode("latin-1").split("\r\n")
    headers = [(k.strip(), v.strip()) for k, _, v in (line.partition(":") for line in lines[1:] if line)]
    message = _Message(lines[0], headers, b"")
    status = int(lines[0].split()[1]) if response_to is not None else 0
    if response_to == "HEAD" or status in (204, 304) or 100 <= status < 200:
        return message
    if message.header("transfer-encoding").lower() == "chunked":
        chunks = []
        while True:
            size = int((await reader.readuntil(b"\r\n")).split(b";")[0], 16)
            chunks.append(await reader.readexactly(size))
            await reader.readuntil(b"\r\n")
            if size == 0:
                break
        message.body = b"".join(chunks)
    elif message.header("content-length"):
        message.body = await reader.readexactly(int(message.header("content-length")))
    elif response_to is not None:
        message.body = await reader.read()
    return message


def _json_response(status: int, body: Mapping[str, Any], extra: Sequence[tuple[str, str]] = ()) -> _Message:
    reason = _REASONS.get(status, "Fault")
    headers = [("Content-Type", "application/json"), ("x-ms-request-charge", "0"), *extra]
    return _Message(f"HTTP/1.1 {status} {reason}", headers, json.dumps(body).encode())


class FaultProxy:
    """The proxy server. ``async with FaultProxy(...)`` or :meth:`start_in_thread` for a synchronous caller."""

    def __init__(
        self,
        upstream: str,
        *,
        cert_file: str,
        key_file: str,
        upstream_ca: str | bool = True,
        rules: FaultRules | None = None,
        port: int = 0,
    ) -> None:
        parts = urlsplit(upstream)
        if parts.scheme != "https" or parts.hostname not in ("127.0.0.1", "localhost"):
            raise ValueError(f"upstream must be an https URL on 127.0.0.1, got {upstream!r}")
        self.upstream_host = parts.hostname
        self.upstream_port = parts.port or 443
        self.rules = rules if rules is not None else FaultRules()
        self.port = port
        self._server_ssl = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        self._server_ssl.load_cert_chain(cert_file, key_file)
        self._client_ssl = ssl.create_default_context(cafile=upstream_ca if isinstance(upstream_ca, str) else None)
        if upstream_ca is False:
            self._client_ssl.check_hostname = False
            self._client_ssl.verify_mode = ssl.CERT_NONE
        self._server: asyncio.Server | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._connections: set[asyncio.Task[None]] = set()

    @property
    def url(self) -> str:
        return f"https://127.0.0.1:{self.port}/"

    async def start(self) -> None:
        self._server = await asyncio.start_server(
            self._serve, "127.0.0.1", self.port, ssl=self._server_ssl, limit=_MAX_HEAD_BYTES
        )
        self.port = self._server.sockets[0].getsockname()[1]

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()
        for task in list(self._connections):
            task.cancel()
        if self._connections:
            await asyncio.gather(*self._connections, return_exceptions=True)
        if self._server is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self._server.wait_closed(), 2)

    async def __aenter__(self) -> FaultProxy:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    def start_in_thread(self) -> FaultProxy:
        """Run the proxy's loop on a daemon thread; returns once it listens (``stop_thread`` ends it)."""
        ready = threading.Event()
        self._loop = asyncio.new_event_loop()

        def run() -> None:
            assert self._loop is not None
            asyncio.set_event_loop(self._loop)
            self._loop.run_until_complete(self.start())
            ready.set()
            self._loop.run_forever()

        self._thread = threading.Thread(target=run, name="faultproxy", daemon=True)
        self._thread.start()
        if not ready.wait(10):
            raise RuntimeError("the fault proxy did not start listening within 10 s")
        return self

    def stop_thread(self) -> None:
        if self._loop is None or self._thread is None:
            return
        asyncio.run_coroutine_threadsafe(self.close(), self._loop).result(5)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(5)
        self._loop.close()

    # --------------------------------------------------------------------------------------------- one connection

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        if task is not None:
            self._connections.add(task)
            task.add_done_callback(self._connections.discard)
        upstream: tuple[asyncio.StreamReader, asyncio.StreamWriter] | None = None
        try:
            while True:
                request = await _read_message(reader)
                if request is None:
                    return
                method, path = request.start.split(" ")[:2]
                if path.split("?")[0].rstrip("/") == ADMIN_PATH:
                    writer.write(self._admin(method, request.body).encode())
                    await writer.drain()
                    continue
                headers = {k.lower(): v for k, v in request.headers}
                rule = self.rules.pick(classify(method, path, headers), method, path)
                if rule is not None and rule.action == "reset":
                    writer.transport.abort()
                    return
                if rule is not None and rule.action == "status":
                    writer.write(self._fault_response(rule).encode())
                    await writer.drain()
                    continue
                if upstream is None:
                    upstream = await asyncio.open_connection(
                        self.upstream_host, self.upstream_port, ssl=self._client_ssl, limit=_MAX_HEAD_BYTES
                    )
                upstream[1].write(request.encode())
                await upstream[1].drain()
                response = await _read_message(upstream[0], response_to=method)
                if response is None:
                    writer.transport.abort()
                    return
                if rule is not None:  # lost_ack: the server applied it; the client never hears
                    writer.transport.abort()
                    return
                if method == "GET" and path.split("?")[0].rstrip("/") == "":
                    response.body = self._rewrite_locations(response.body)
                writer.write(response.encode())
                await writer.drain()
                if response.header("connection").lower() == "close":
                    return
        except (ConnectionError, OSError, asyncio.IncompleteReadError, ssl.SSLError, ValueError, IndexError):
            writer.transport.abort()
        except asyncio.CancelledError:  # the proxy is closing: end this connection quietly
            writer.transport.abort()
        finally:
            if upstream is not None:
                upstream[1].transport.abort()
            with contextlib.suppress(Exception):
                writer.close()

    def _rewrite_locations(self, body: bytes) -> bytes:
        """Point the account's read and write locations at the proxy, or the SDK bypasses it after ``GET /``."""
        mine = f"127.0.0.1:{self.port}".encode()
        for host in (self.upstream_host, "127.0.0.1", "localhost"):
            body = body.replace(f"//{host}:{self.upstream_port}".encode(), b"//" + mine)
        return body

    def _fault_response(self, rule: FaultRule) -> _Message:
        extra: list[tuple[str, str]] = []
        if rule.retry_after_ms is not None:
            extra.append(("x-ms-retry-after-ms", str(rule.retry_after_ms)))
        if rule.substatus is not None:
            extra.append(("x-ms-substatus", str(rule.substatus)))
        code = _REASONS.get(rule.status, "Fault").replace(" ", "")
        return _json_response(rule.status, {"code": code, "message": f"injected by the fault proxy ({code})"}, extra)

    def _admin(self, method: str, body: bytes) -> _Message:
        method = method.upper()
        try:
            if method == "POST":
                payload = json.loads(body or b"{}")
                if not isinstance(payload, dict) or not isinstance(payload.get("rules"), list):
                    raise ValueError('the body must be {"rules": [...]}')
                self.rules.replace([FaultRule.from_dict(rule) for rule in payload["rules"]])
            elif method == "DELETE":
                self.rules.replace([])
            elif method != "GET":
                return _json_response(405, {"message": f"{method} is not allowed on {ADMIN_PATH}"})
        except (ValueError, TypeError) as error:
            return _json_response(400, {"message": str(error)})
        return _json_response(200, self.rules.snapshot())


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--upstream", required=True)
    parser.add_argument("--cert", required=True, help="certificate served to clients (the emulator's cert.pem)")
    parser.add_argument("--key", required=True)
    parser.add_argument("--upstream-ca", default=None, help="CA bundle of the upstream (default: --cert)")
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--seed", type=int, default=None)
    args = parser.parse_args(argv)

    async def run() -> None:
        proxy = FaultProxy(
            args.upstream,
            cert_file=args.cert,
            key_file=args.key,
            upstream_ca=args.upstream_ca or args.cert,
            rules=FaultRules(seed=args.seed),
            port=args.port,
        )
        async with proxy:
            print(f"FAULTPROXY_URL={proxy.url}", flush=True)
            await asyncio.Event().wait()

    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(run())
    sys.exit(0)


if __name__ == "__main__":
    main()
