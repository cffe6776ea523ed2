"""``MemoryDocumentContainer``: a real, in-process implementation of the ``DocumentContainer`` port.

It is not a mock. It keeps documents under one lock with the semantics of Azure Cosmos DB's NoSQL API (the "Real
Cosmos DB" column of the emulator notes' feature matrix), because the drain's correctness leans on exactly them:

* identity is (full partition key, id); hierarchical keys are lists and identity is the whole list;
* every write gets a new opaque ``_etag``, a ``_ts`` in whole seconds from an injectable clock, and a
  per-container monotonic ``_lsn``; ``if_match`` and patch ``filter_predicate`` give 412;
* patch supports set/replace/add/remove/incr on JSON pointers (≤10 operations, all-or-nothing);
* a transactional batch (≤100 operations) commits all or nothing; the culprit keeps its status, the others 424;
* TTL follows the container's ``default_ttl`` (``None`` off, ``-1`` on without a default, ``n`` seconds) and the
  item's ``ttl``; an expired document vanishes at once from reads, queries and the change feed;
* the change feed is latest-version only, per feed range, in ``_lsn`` order; one transactional batch shares an
  ``_lsn`` and is never split across pages (as on the service, a page may then exceed ``max_item_count``);
* partition keys hash into an effective-partition-key (EPK) space cut into feed ranges; ``split_feed_range``
  simulates a partition split, after which the parent range is gone (410) and its continuations resume on the
  children;
* queries run a small, documented SQL subset (:func:`parse_query`) with Cosmos's undefined-value semantics.

Tests reach the failure paths through :class:`FaultPlan` (``container.faults``) and count calls per operation
(``container.calls``). Every operation passes through the :meth:`MemoryDocumentContainer.check` hook before it
applies and :meth:`MemoryDocumentContainer.after_apply` after, so a subclass can inject its own behaviour.
"""

from __future__ import annotations

import bisect
import copy
import hashlib
import itertools
import json
import math
import os
import re
import threading
import uuid
from collections import Counter
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from functools import cached_property, lru_cache
from json.encoder import encode_basestring_ascii
from time import time_ns as _time_ns
from typing import Any, TypeVar, TypeVarTuple, cast

from typing_extensions import override

from airflow_chatter.clock import Clock, utc_now
from airflow_chatter.ports import (
    BadRequest,
    BatchFailed,
    BatchOperation,
    BatchOperationKind,
    BatchOperationResult,
    ChangeFeedPage,
    ChangeFeedStart,
    Conflict,
    ContainerError,
    ContainerProperties,
    Document,
    DocumentContainer,
    FeedRange,
    FeedRangeGone,
    NotFound,
    PartitionKey,
    PatchOperation,
    PreconditionFailed,
)

#: Cosmos DB's service limits. They are constants, not settings: a test that passes only with a bigger limit
#: would fail against the real service.
MAX_PATCH_OPERATIONS = 10
MAX_BATCH_OPERATIONS = 100
MAX_ID_BYTES = 1023
MAX_DOCUMENT_BYTES = 2 * 1024 * 1024
MAX_PARTITION_KEY_LEVELS = 3
#: ``ttl`` and ``defaultTtl`` are signed 32-bit seconds on the service; a larger value is a 400.
MAX_TTL_SECONDS = 2**31 - 1

#: The EPK space: partition keys hash to ``[0, EPK_SPACE)``; feed ranges are half-open intervals of it.
EPK_SPACE = 1 << 60

#: Properties the service owns; a body's own values for them are ignored on every write.
SYSTEM_PROPERTIES = frozenset({"_rid", "_self", "_etag", "_attachments", "_ts", "_lsn"})

_FORBIDDEN_ID_CHARACTERS = frozenset("/\\?#")

#: ``json.dumps(..., allow_nan=False)`` and ``json.dumps(..., separators=(",", ":"))`` without building an encoder
#: per call (same output). ``ensure_ascii`` is on, so the length of the text is its length in UTF-8 bytes.
_BODY_ENCODER = json.JSONEncoder(allow_nan=False)
#: At most what ``_rid``, ``_etag`` and ``_ts`` add to a document's JSON text.
_SYSTEM_PROPERTIES_BYTES = 128
#: At most how much longer an incremented number's JSON gets (the longest float repr has 24 characters).
_NUMBER_GROWTH_BYTES = 32
_KEY_CACHE_SIZE = 4096
_KEY_ENCODER = json.JSONEncoder(separators=(",", ":"))

#: Port method names a fault can target ("*" targets all of them).
OPERATIONS = frozenset(
    {
        "properties",
        "create",
        "read",
        "replace",
        "upsert",
        "delete",
        "patch",
        "execute_batch",
        "query",
        "read_feed_ranges",
        "is_feed_range_subset",
        "feed_range_overlap",
        "read_change_feed",
    }
)


# ============================================================================================================
# Fault injection.
# ============================================================================================================


@dataclass(frozen=True)
class OperationCall:
    """One call of a port method, as fault predicates and the check/apply hooks see it.

    ``number`` counts this operation's calls on the container, from 1. ``arguments`` holds the remaining keyword
    arguments (``document``, ``operations``, ``if_match``, ``sql``, ``feed_range``...).
    """

    operation: str
    number: int
    item_id: str | None = None
    partition_key: PartitionKey | None = None
    arguments: Mapping[str, Any] = field(default_factory=dict)


_new_object = object.__new__


ErrorSource = BaseException | Callable[[OperationCall], BaseException]


@dataclass
class FaultRule:
    """Fail matching calls of one operation; see :meth:`FaultPlan.fail` for the meaning of each field."""

    operation: str
    error: ErrorSource
    on_call: int | None = None
    times: int | None = None
    when: Callable[[OperationCall], bool] | None = None
    after_apply: bool = False
    matched: int = 0
    fired: int = 0

    def fires_for(self, call: OperationCall) -> bool:
        """Count a matching call and say whether this rule fails it."""
        if self.operation not in ("*", call.operation):
            return False
        if self.when is not None and not self.when(call):
            return False
        self.matched += 1
        if self.on_call is not None:
            hit = self.matched == self.on_call
        elif self.times is not None:
            hit = self.fired < self.times
        else:
            hit = True
        if hit:
            self.fired += 1
        return hit

    def error_for(self, call: OperationCall) -> BaseException:
        if isinstance(self.error, BaseException):
            return self.error
        return self.error(call)


class FaultPlan:
    """The faults a test wants; ``container.faults``.

    Example: ``container.faults.fail("patch", on_call=3, error=Throttled(retry_after_ms=10))``.
    """

    def __init__(self) -> None:
        self.rules: list[FaultRule] = []

    def fail(
        self,
        operation: str,
        *,
        error: ErrorSource,
        on_call: int | None = None,
        times: int | None = None,
        when: Callable[[OperationCall], bool] | None = None,
        after_apply: bool = False,
    ) -> FaultRule:
        """Make calls of ``operation`` (a port method name, or ``"*"``) raise ``error``.

        With no ``on_call``/``times`` every matching call fails; ``on_call=n`` fails only the n-th matching call
        counted from now; ``times=n`` fails the next n matching calls. ``when`` restricts matching to calls for
        which it returns true (e.g. ``lambda call: call.item_id == "x"``). ``error`` is an exception, or a
        callable building one from the call. With ``after_apply`` the operation is applied *and then* the error
        raised: the ambiguous outcome of a timeout whose write landed.
        """
        if operation != "*" and operation not in OPERATIONS:
            # NOTE: a misspelt operation would silently never fire and the test would pass for the wrong reason.
            raise ValueError(f"unknown operation {operation!r}; expected one of {sorted(OPERATIONS)}")
        if on_call is not None and times is not None:
            raise ValueError("give on_call or times, not both")
        rule = FaultRule(operation, error, on_call=on_call, times=times, when=when, after_apply=after_apply)
        self.rules.append(rule)
        return rule

    def clear(self) -> None:
        """Remove every rule."""
        self.rules.clear()

    def raise_before(self, call: OperationCall) -> None:
        """Raise the first due fault that fails a call before it applies."""
        if self.rules:
            self._raise_due(call, after_apply=False)

    def raise_after(self, call: OperationCall) -> None:
        """Raise the first due fault that fails a call after it applied."""
        if self.rules:
            self._raise_due(call, after_apply=True)

    def _raise_due(self, call: OperationCall, *, after_apply: bool) -> None:
        for rule in self.rules:
            if rule.after_apply == after_apply and rule.fires_for(call):
                raise rule.error_for(call)


# ============================================================================================================
# Partition keys and the EPK space.
# ============================================================================================================


def _canonical_component(value: Any) -> Any:
    """Return a partition-key component as Cosmos compares it: JSON numbers are doubles, so 1 == 1.0."""
    if value is None or isinstance(value, (str, bool)):
        return value
    if isinstance(value, (int, float)):
        return int(value) if float(value).is_integer() else float(value)
    raise BadRequest(f"a partition-key component must be a JSON scalar, not {type(value).__name__}")


@lru_cache(maxsize=1024)
def _path_tokens(path: str) -> tuple[str, ...]:
    """Split a JSON pointer into unescaped tokens (``~1`` is ``/``, ``~0`` is ``~``). Cached: a drain patches the
    same few paths on every document."""
    if not path.startswith("/") or path == "/":
        raise BadRequest(f"path {path!r} must be a JSON pointer starting with '/'")
    return tuple(token.replace("~1", "/").replace("~0", "~") for token in path[1:].split("/"))


@dataclass(frozen=True)
class _Key:
    """A partition-key value (full or prefix) in canonical form."""

    components: tuple[Any, ...]

    @cached_property
    def json(self) -> str:
        return _KEY_ENCODER.encode(list(self.components))

    @cached_property
    def epk(self) -> int:
        """Hash the full key into the EPK space, the way the service routes a key to a physical partition."""
        return _epk_of(self.json)

    def starts_with(self, prefix: _Key) -> bool:
        return self.components[: len(prefix.components)] == prefix.components


@lru_cache(maxsize=4096)
def _epk_of(key_json: str) -> int:
    digest = hashlib.sha256(key_json.encode("utf-8")).digest()
    return int.from_bytes(digest[:8], "big") >> 4

    def starts_with(self, prefix: _Key) -> bool:
        return self.components[: len(prefix.components)] == prefix.components


@dataclass(frozen=True, order=True)
class _EpkRange:
    """A half-open interval ``[low, high)`` of the EPK space; its token is what ``FeedRange`` carries."""

    low: int
    high: int

    @property
    def token(self) -> str:
        return self.feed_range.token

    @property
    def feed_range(self) -> FeedRange:
        # The token format is FeedRange's (ports); the bounds are fixed-width hex, so they order as strings too.
        return FeedRange.from_epk_bounds(f"{self.low:016X}", f"{self.high:016X}")

    @classmethod
    def parse(cls, token: str) -> _EpkRange:
        bounds = FeedRange(token).epk_bounds()
        try:
            if bounds is None:
                raise ValueError("not a [min, max) feed-range token")
            low, high = int(bounds[0], 16), int(bounds[1], 16)
        except ValueError as error:
            raise BadRequest(f"not a feed range of this container: {token!r}") from error
        if not 0 <= low < high <= EPK_SPACE:
            raise BadRequest(f"feed range {token!r} lies outside the EPK space")
        return cls(low, high)

    def contains(self, epk: int) -> bool:
        return self.low <= epk < self.high

    def covers(self, other: _EpkRange) -> bool:
        return self.low <= other.low and other.high <= self.high


def _overlap(a: FeedRange, b: FeedRange) -> FeedRange | None:
    first, second = _EpkRange.parse(a.token), _EpkRange.parse(b.token)
    low, high = max(first.low, second.low), min(first.high, second.high)
    if low >= high:
        return None
    if (low, high) == (first.low, first.high):
        return a
    if (low, high) == (second.low, second.high):
        return b
    return _EpkRange(low, high).feed_range


def _even_ranges(count: int) -> list[_EpkRange]:
    if count < 1:
        raise ValueError("a container has at least one feed range")
    bounds = [EPK_SPACE * i // count for i in range(count + 1)]
    return [_EpkRange(bounds[i], bounds[i + 1]) for i in range(count)]


# ============================================================================================================
# Change-feed continuations.
# ============================================================================================================


@dataclass(frozen=True)
class _Continuation:
    """Where a reader of one feed range stands: after every change with ``_lsn`` <= ``lsn``.

    It names its container and range so a token is never silently applied to the wrong feed; a child range
    accepts its parent's token, which is how readers carry on after a split.
    """

    container_rid: str
    feed_range: _EpkRange
    lsn: int

    def encode(self) -> str:
        body = {
            "v": 1,
            "container": self.container_rid,
            "min": f"{self.feed_range.low:016X}",
            "max": f"{self.feed_range.high:016X}",
            "lsn": self.lsn,
        }
        return json.dumps(body, sort_keys=True, separators=(",", ":"))

    @classmethod
    def decode(cls, token: str) -> _Continuation:
        try:
            body = json.loads(token)
            if body.get("v") != 1:
                raise ValueError("unknown version")
            feed_range = _EpkRange(int(body["min"], 16), int(body["max"], 16))
            return cls(str(body["container"]), feed_range, int(body["lsn"]))
        except (ValueError, KeyError, TypeError, AttributeError) as error:
            raise BadRequest(f"not a change-feed continuation of the in-memory container: {token!r}") from error


# ============================================================================================================
# The SQL subset.
# ============================================================================================================


class _Undefined:
    """Cosmos's *undefined*: a missing property, or an ill-typed comparison. Never equal to anything."""

    def __repr__(self) -> str:
        return "undefined"


UNDEFINED: Any = _Undefined()

Evaluator = Callable[[Any, Mapping[str, Any]], Any]

_TOKEN_PATTERN = re.compile(
    r"""
    (?P<space>\s+)
    | (?P<number>-?\d+(?:\.\d+)?(?:[eE][+-]?\d+)?)
    | (?P<string>'(?:[^'\\]|\\.)*'|"(?:[^"\\]|\\.)*")
    | (?P<param>@[A-Za-z_][A-Za-z0-9_]*)
    | (?P<ident>[A-Za-z_][A-Za-z0-9_]*)
    | (?P<symbol><=|>=|!=|<>|=|<|>|\(|\)|\[|\]|\.|,|\*|\{|\}|:)
    | (?P<other>.)
    """,
    re.VERBOSE | re.DOTALL,
)

_KEYWORDS = frozenset(
    {"SELECT", "VALUE", "FROM", "WHERE", "ORDER", "BY", "ASC", "DESC", "AND", "OR", "NOT", "TOP"}
    | {"TRUE", "FALSE", "NULL"}
)
#: Real Cosmos SQL the subset does not implement; named in the error so the reader knows it is a limitation.
_UNSUPPORTED_KEYWORDS = frozenset(
    {"JOIN", "IN", "GROUP", "HAVING", "OFFSET", "LIMIT", "DISTINCT", "BETWEEN", "LIKE", "EXISTS", "ARRAY", "UDF"}
    | {"UNDEFINED", "AS"}
)
_COMPARISONS = frozenset({"=", "!=", "<>", "<", "<=", ">", ">="})
_STRING_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", "b": "\b", "f": "\f", "/": "/", "\\": "\\", "'": "'", '"': '"'}

SUPPORTED_SQL = (
    "SELECT [TOP n] * FROM c [WHERE expr] [ORDER BY c.path [ASC|DESC], ...] | "
    "(FROM root r also names the alias r) | "
    "SELECT VALUE COUNT(1) FROM c [WHERE expr]; expr: AND/OR/NOT, parentheses, = != <> < <= > >= between "
    'c.a.b / c["x"] / c.a[0] paths, @params and JSON literals, IS_DEFINED(x), STARTSWITH(x, y[, ignore_case])'
)


@dataclass(frozen=True)
class _Token:
    kind: str
    text: str
    position: int

    @property
    def upper(self) -> str:
        return self.text.upper()


@dataclass(frozen=True)
class ParsedQuery:
    """A query of the subset: ``SELECT [TOP n] *`` or ``SELECT VALUE COUNT(1)``, a filter and an order."""

    alias: str
    where: Evaluator | None
    order_by: tuple[tuple[Evaluator, bool], ...]  # (key, descending)
    count: bool
    top: int | None
    parameters: frozenset[str]


def _unsupported(what: str) -> BadRequest:
    return BadRequest(f"{what} is not supported by the in-memory SQL subset ({SUPPORTED_SQL})")


def _tokenize(sql: str) -> list[_Token]:
    tokens: list[_Token] = []
    for match in _TOKEN_PATTERN.finditer(sql):
        kind = match.lastgroup or "other"
        if kind == "space":
            continue
        if kind == "other":
            raise _unsupported(f"character {match.group()!r} at position {match.start()}")
        tokens.append(_Token(kind, match.group(), match.start()))
    return tokens


def _decode_string(text: str) -> str:
    body, out, index = text[1:-1], [], 0
    while index < len(body):
        char = body[index]
        if char == "\\" and index + 1 < len(body):
            escaped = body[index + 1]
            if escaped == "u" and index + 5 < len(body):
                out.append(chr(int(body[index + 2 : index + 6], 16)))
                index += 6
                continue
            out.append(_STRING_ESCAPES.get(escaped, escaped))
            index += 2
            continue
        out.append(char)
        index += 1
    return "".join(out)


class _Parser:
    """A recursive-descent parser compiling the subset into closures over (document, parameters)."""

    def __init__(self, sql: str) -> None:
        self.sql = sql
        self.tokens = _tokenize(sql)
        self.index = 0
        self.alias = ""
        self.parameters: set[str] = set()

    # -- token plumbing -------------------------------------------------------------------------------------

    def peek(self) -> _Token | None:
        return self.tokens[self.index] if self.index < len(self.tokens) else None

    def advance(self) -> _Token:
        token = self.peek()
        if token is None:
            raise BadRequest(f"query ends too early: {self.sql!r}")
        self.index += 1
        return token

    def at_keyword(self, *words: str) -> bool:
        token = self.peek()
        return token is not None and token.kind == "ident" and token.upper in words

    def at_symbol(self, *symbols: str) -> bool:
        token = self.peek()
        return token is not None and token.kind == "symbol" and token.text in symbols

    def expect_keyword(self, word: str) -> None:
        if not self.at_keyword(word):
            self.fail(f"expected {word}")
        self.index += 1

    def expect_symbol(self, symbol: str) -> None:
        if not self.at_symbol(symbol):
            self.fail(f"expected {symbol!r}")
        self.index += 1

    def fail(self, expectation: str) -> None:
        token = self.peek()
        if token is None:
            raise BadRequest(f"{expectation} but the query ended: {self.sql!r}")
        if token.kind == "ident" and token.upper in _UNSUPPORTED_KEYWORDS:
            raise _unsupported(token.upper)
        raise BadRequest(f"{expectation} at position {token.position}, found {token.text!r}: {self.sql!r}")

    def expect_end(self) -> None:
        if self.peek() is not None:
            self.fail("expected the end of the query")

    # -- statements -----------------------------------------------------------------------------------------

    def query(self) -> ParsedQuery:
        self.expect_keyword("SELECT")
        top: int | None = None
        if self.at_keyword("TOP"):
            self.index += 1
            token = self.advance()
            if token.kind != "number" or not token.text.isdigit():
                raise BadRequest(f"TOP needs a non-negative integer literal, found {token.text!r}")
            top = int(token.text)
        count = self.projection()
        self.from_clause()
        where = self.where_clause()
        order_by = self.order_by_clause()
        self.expect_end()
        if count and order_by:
            raise _unsupported("ORDER BY with SELECT VALUE COUNT(1)")
        return ParsedQuery(self.alias, where, order_by, count, top, frozenset(self.parameters))

    def filter_predicate(self) -> ParsedQuery:
        """Parse a conditional-patch predicate: ``FROM c WHERE <expr>``."""
        self.from_clause()
        where = self.where_clause()
        self.expect_end()
        return ParsedQuery(self.alias, where, (), False, None, frozenset(self.parameters))

    def projection(self) -> bool:
        """Parse ``*`` (False) or ``VALUE COUNT(1)`` (True)."""
        if self.at_symbol("*"):
            self.index += 1
            return False
        if self.at_keyword("VALUE"):
            self.index += 1
            token = self.advance()
            if token.upper != "COUNT":
                raise _unsupported(f"SELECT VALUE {token.text}")
            self.expect_symbol("(")
            argument = self.advance()
            if argument.text != "1":
                raise _unsupported(f"COUNT({argument.text})")
            self.expect_symbol(")")
            return True
        found = self.peek()
        raise _unsupported(f"projection {found.text if found else '<nothing>'!r}")

    def from_clause(self) -> None:
        self.expect_keyword("FROM")
        token = self.advance()
        if token.kind != "ident" or token.upper in _KEYWORDS | _UNSUPPORTED_KEYWORDS:
            raise BadRequest(f"expected a collection alias after FROM, found {token.text!r}")
        self.alias = token.text
        following = self.peek()
        if (
            following is not None
            and following.kind == "ident"
            and following.upper not in _KEYWORDS | _UNSUPPORTED_KEYWORDS
        ):
            self.alias = self.advance().text  # FROM root r: r is the alias
        if self.at_keyword("JOIN", "IN", "AS"):
            self.fail("expected WHERE, ORDER BY or the end")

    def where_clause(self) -> Evaluator | None:
        if not self.at_keyword("WHERE"):
            return None
        self.index += 1
        return self.expression()

    def order_by_clause(self) -> tuple[tuple[Evaluator, bool], ...]:
        if not self.at_keyword("ORDER"):
            return ()
        self.index += 1
        self.expect_keyword("BY")
        items: list[tuple[Evaluator, bool]] = []
        while True:
            key = self.path()
            descending = False
            if self.at_keyword("ASC", "DESC"):
                descending = self.advance().upper == "DESC"
            items.append((key, descending))
            if not self.at_symbol(","):
                return tuple(items)
            self.index += 1

    # -- expressions ----------------------------------------------------------------------------------------

    def expression(self) -> Evaluator:
        left = self.conjunction()
        while self.at_keyword("OR"):
            self.index += 1
            left = _or(left, self.conjunction())
        return left

    def conjunction(self) -> Evaluator:
        left = self.negation()
        while self.at_keyword("AND"):
            self.index += 1
            left = _and(left, self.negation())
        return left

    def negation(self) -> Evaluator:
        if self.at_keyword("NOT"):
            self.index += 1
            return _not(self.negation())
        return self.comparison()

    def comparison(self) -> Evaluator:
        left = self.primary()
        token = self.peek()
        if token is not None and token.kind == "symbol" and token.text in _COMPARISONS:
            self.index += 1
            return _comparison(token.text, left, self.primary())
        return left

    def primary(self) -> Evaluator:
        token = self.peek()
        if token is None:
            self.fail("expected an operand")
        assert token is not None
        if token.kind == "symbol" and token.text == "(":
            self.index += 1
            inner = self.expression()
            self.expect_symbol(")")
            return inner
        if token.kind == "param":
            self.index += 1
            self.parameters.add(token.text)
            name = token.text
            return lambda _document, parameters: parameters[name]
        if token.kind == "ident" and token.text == self.alias:
            return self.path()
        if token.kind == "ident" and self.tokens[self.index + 1 : self.index + 2] and self.at_call():
            return self.function_call()
        value = self.literal()
        return lambda _document, _parameters: value

    def at_call(self) -> bool:
        following = self.tokens[self.index + 1]
        return following.kind == "symbol" and following.text == "("

    def function_call(self) -> Evaluator:
        name = self.advance().upper
        self.expect_symbol("(")
        arguments = [self.expression()]
        while self.at_symbol(","):
            self.index += 1
            arguments.append(self.expression())
        self.expect_symbol(")")
        if name == "IS_DEFINED" and len(arguments) == 1:
            (argument,) = arguments
            return lambda document, parameters: argument(document, parameters) is not UNDEFINED
        if name == "STARTSWITH" and len(arguments) in (2, 3):
            return _startswith(arguments)
        raise _unsupported(f"function {name} with {len(arguments)} argument(s)")

    def path(self) -> Evaluator:
        token = self.advance()
        if token.kind != "ident" or token.text != self.alias:
            raise BadRequest(f"a path must start with the alias {self.alias!r}, found {token.text!r}")
        steps: list[str | int] = []
        while self.at_symbol(".", "["):
            if self.advance().text == ".":
                name = self.advance()
                if name.kind != "ident":
                    raise BadRequest(f"expected a property name after '.', found {name.text!r}")
                steps.append(name.text)
                continue
            key = self.advance()
            if key.kind == "string":
                steps.append(_decode_string(key.text))
            elif key.kind == "number" and key.text.isdigit():
                steps.append(int(key.text))
            else:
                raise BadRequest(f"expected a string or an index inside [], found {key.text!r}")
            self.expect_symbol("]")
        frozen = tuple(steps)
        return lambda document, _parameters: _walk(document, frozen)

    def literal(self) -> Any:
        token = self.advance()
        if token.kind == "number":
            number = float(token.text)
            return int(number) if re.fullmatch(r"-?\d+", token.text) else number
        if token.kind == "string":
            return _decode_string(token.text)
        if token.kind == "ident" and token.upper in ("TRUE", "FALSE", "NULL"):
            return {"TRUE": True, "FALSE": False, "NULL": None}[token.upper]
        if token.kind == "symbol" and token.text == "[":
            return self.array_literal()
        if token.kind == "symbol" and token.text == "{":
            return self.object_literal()
        self.index -= 1
        self.fail("expected a path, a parameter, a literal or a function call")
        raise AssertionError("unreachable")

    def array_literal(self) -> list[Any]:
        items: list[Any] = []
        while not self.at_symbol("]"):
            items.append(self.literal())
            if not self.at_symbol(","):
                break
            self.index += 1
        self.expect_symbol("]")
        return items

    def object_literal(self) -> dict[str, Any]:
        members: dict[str, Any] = {}
        while not self.at_symbol("}"):
            key = self.advance()
            if key.kind != "string":
                raise BadRequest(f"an object literal's keys are strings, found {key.text!r}")
            self.expect_symbol(":")
            members[_decode_string(key.text)] = self.literal()
            if not self.at_symbol(","):
                break
            self.index += 1
        self.expect_symbol("}")
        return members


@lru_cache(maxsize=256)
def parse_query(sql: str) -> ParsedQuery:
    """Parse a query of the supported subset; ``BadRequest`` naming whatever is outside it.

    The subset is ``SUPPORTED_SQL``. Keywords are case-insensitive; the alias is whatever follows FROM.
    """
    return _Parser(sql).query()


@lru_cache(maxsize=256)
def parse_filter_predicate(predicate: str) -> ParsedQuery:
    """Parse a conditional-patch predicate, ``FROM c WHERE <expr>`` (literals only, no parameters)."""
    return _Parser(predicate).filter_predicate()


def _walk(value: Any, steps: tuple[str | int, ...]) -> Any:
    for step in steps:
        if isinstance(step, str) and isinstance(value, dict):
            value = value.get(step, UNDEFINED)
        elif isinstance(step, int) and isinstance(value, list) and step < len(value):
            value = value[step]
        else:
            return UNDEFINED
    return value


def _type_rank(value: Any) -> int:
    """Cosmos's cross-type order: undefined < null < boolean < number < string < array < object."""
    if value is UNDEFINED:
        return 0
    if value is None:
        return 1
    if isinstance(value, bool):
        return 2
    if isinstance(value, (int, float)):
        return 3
    if isinstance(value, str):
        return 4
    return 5 if isinstance(value, list) else 6


def _json_equal(left: Any, right: Any) -> bool:
    if _type_rank(left) != _type_rank(right):
        return False
    if isinstance(left, list):
        return len(left) == len(right) and all(_json_equal(a, b) for a, b in zip(left, right, strict=True))
    if isinstance(left, dict):
        return left.keys() == right.keys() and all(_json_equal(left[k], right[k]) for k in left)
    return bool(left == right)


def _compare(operator: str, left: Any, right: Any) -> Any:
    """Compare two values; *undefined* when either is undefined or their types differ (Cosmos semantics)."""
    rank = _type_rank(left)
    if rank == 0 or rank != _type_rank(right):
        return UNDEFINED
    if operator in ("=", "!=", "<>"):
        equal = _json_equal(left, right)
        return equal if operator == "=" else not equal
    if rank >= 5:
        return UNDEFINED
    if rank == 1:
        return operator in ("<=", ">=")
    return {"<": left < right, "<=": left <= right, ">": left > right, ">=": left >= right}[operator]


def _comparison(operator: str, left: Evaluator, right: Evaluator) -> Evaluator:
    return lambda document, parameters: _compare(operator, left(document, parameters), right(document, parameters))


def _and(left: Evaluator, right: Evaluator) -> Evaluator:
    def evaluate(document: Any, parameters: Mapping[str, Any]) -> Any:
        a, b = left(document, parameters), right(document, parameters)
        if a is False or b is False:
            return False
        return True if a is True and b is True else UNDEFINED

    return evaluate


def _or(left: Evaluator, right: Evaluator) -> Evaluator:
    def evaluate(document: Any, parameters: Mapping[str, Any]) -> Any:
        a, b = left(document, parameters), right(document, parameters)
        if a is True or b is True:
            return True
        return False if a is False and b is False else UNDEFINED

    return evaluate


def _not(operand: Evaluator) -> Evaluator:
    def evaluate(document: Any, parameters: Mapping[str, Any]) -> Any:
        value = operand(document, parameters)
        return (not value) if isinstance(value, bool) else UNDEFINED

    return evaluate


def _startswith(arguments: list[Evaluator]) -> Evaluator:
    def evaluate(document: Any, parameters: Mapping[str, Any]) -> Any:
        values = [argument(document, parameters) for argument in arguments]
        text, prefix = values[0], values[1]
        ignore_case = values[2] if len(values) == 3 else False
        if not isinstance(text, str) or not isinstance(prefix, str) or not isinstance(ignore_case, bool):
            return UNDEFINED
        if ignore_case:
            return text.casefold().startswith(prefix.casefold())
        return text.startswith(prefix)

    return evaluate


def _order_key(value: Any) -> tuple[int, Any]:
    rank = _type_rank(value)
    if rank in (0, 1):
        return (rank, 0)
    if rank >= 5:
        return (rank, json.dumps(value, sort_keys=True))
    return (rank, value)


def _sort_key(key: Evaluator, parameters: Mapping[str, Any]) -> Callable[[Document], tuple[int, Any]]:
    return lambda document: _order_key(key(document, parameters))


def _normalise_parameters(parameters: Mapping[str, Any] | Sequence[Mapping[str, Any]] | None) -> dict[str, Any]:
    """Accept ``{"@name": value}`` (``@`` optional) or the SDK's ``[{"name": "@name", "value": value}]``."""
    if parameters is None:
        return {}
    if isinstance(parameters, Mapping):
        items = list(parameters.items())
    else:
        items = [(entry["name"], entry["value"]) for entry in parameters]
    return {name if name.startswith("@") else f"@{name}": value for name, value in items}


def run_query(parsed: ParsedQuery, documents: Sequence[Document], parameters: Mapping[str, Any]) -> list[Any]:
    """Evaluate a parsed query over documents: filter, order, TOP, or COUNT."""
    missing = parsed.parameters - parameters.keys()
    if missing:
        raise BadRequest(f"query parameter(s) {sorted(missing)} were not supplied")
    where = parsed.where
    rows = [d for d in documents if where is None or where(d, parameters) is True]
    for key, descending in reversed(parsed.order_by):  # stable sorts, last key first
        rows.sort(key=_sort_key(key, parameters), reverse=descending)
    if parsed.top is not None:
        rows = rows[: parsed.top]
    if parsed.count:
        return [len(rows)]
    return rows


# ============================================================================================================
# Patch.
# ============================================================================================================


def _array_index(token: str, array: list[Any], *, allow_end: bool) -> int:
    """Parse an array index token; ``-`` and ``len`` are valid only where appending is (add, set)."""
    limit = len(array) if allow_end else len(array) - 1
    if token == "-" and allow_end:
        return len(array)
    if not token.isdigit() or int(token) > limit:
        raise BadRequest(f"array index {token!r} is out of range for an array of {len(array)}")
    return int(token)


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _apply_patch_operation(document: Document, operation: PatchOperation) -> None:
    """Apply one operation in place; ``BadRequest`` when its target or parent is absent or ill-typed."""
    tokens = _path_tokens(operation.path)
    parent: Any = document
    for token in tokens[:-1]:
        if isinstance(parent, dict) and token in parent:
            parent = parent[token]
        elif isinstance(parent, list):
            parent = parent[_array_index(token, parent, allow_end=False)]
        else:
            raise BadRequest(f"{operation.op} {operation.path}: the parent of the target is absent")
    last = tokens[-1]
    value = operation.value if type(operation.value) in _JSON_SCALARS else copy.deepcopy(operation.value)
    if isinstance(parent, dict):
        _patch_member(parent, last, operation, value)
    elif isinstance(parent, list):
        _patch_element(parent, last, operation, value)
    else:
        raise BadRequest(f"{operation.op} {operation.path}: the parent of the target is not an object or array")


def _patch_member(parent: dict[str, Any], name: str, operation: PatchOperation, value: Any) -> None:
    present = name in parent
    if operation.op in ("set", "add"):
        parent[name] = value
    elif operation.op == "replace":
        if not present:
            raise BadRequest(f"replace {operation.path}: node to be replaced is absent")
        parent[name] = value
    elif operation.op == "remove":
        if not present:
            raise BadRequest(f"remove {operation.path}: node to be removed is absent")
        del parent[name]
    elif operation.op == "incr":
        parent[name] = _incremented(parent.get(name, 0), value, operation.path)
    else:
        raise BadRequest(f"unsupported patch operation {operation.op!r}")


def _patch_element(parent: list[Any], token: str, operation: PatchOperation, value: Any) -> None:
    if operation.op == "add":
        parent.insert(_array_index(token, parent, allow_end=True), value)
    elif operation.op == "set":
        index = _array_index(token, parent, allow_end=True)
        if index == len(parent):
            parent.append(value)
        else:
            parent[index] = value
    elif operation.op == "replace":
        parent[_array_index(token, parent, allow_end=False)] = value
    elif operation.op == "remove":
        del parent[_array_index(token, parent, allow_end=False)]
    elif operation.op == "incr":
        index = _array_index(token, parent, allow_end=False)
        parent[index] = _incremented(parent[index], value, operation.path)
    else:
        raise BadRequest(f"unsupported patch operation {operation.op!r}")


def _name_growth_bound(tokens: tuple[str, ...]) -> int:
    """With ``_scalar_json_length`` of its value: at most how many characters a patch operation at ``tokens`` with a
    JSON-scalar value adds to a document's JSON text.

    A new member adds ``, "name": value``, a new element ``, value``; replacing or removing adds less; an ``incr``
    result is at most one character longer than the longer operand, or a float repr.
    """
    return len(encode_basestring_ascii(tokens[-1])) + 4 + _NUMBER_GROWTH_BYTES


def _scalar_json_length(value: str | int | float | bool | None) -> int:
    """The length of a JSON scalar's text as ``_BODY_ENCODER`` writes it, without building an encoder.

    ``BadRequest`` for a value that is not JSON (NaN, Infinity), as the full encoding of the document would raise.
    """
    if isinstance(value, str):
        return len(encode_basestring_ascii(value))
    if value is None or value is True:
        return 4
    if value is False:
        return 5
    if isinstance(value, float):
        if not math.isfinite(value):
            # The very error encoding the whole document would raise.
            raise BadRequest("the document is not JSON: Out of range float values are not JSON compliant")
        return len(float.__repr__(value))
    return len(int.__repr__(value))


def _incremented(current: Any, amount: Any, path: str) -> Any:
    if not _is_number(amount):
        raise BadRequest(f"incr {path}: the increment must be a number, not {amount!r}")
    if not _is_number(current):
        raise BadRequest(f"incr {path}: the target is not a number ({current!r})")
    return current + amount


# ============================================================================================================
# Copies.
# ============================================================================================================

_JSON_CONTAINERS = (dict, list)
_JSON_CONTAINERS_SET = frozenset(_JSON_CONTAINERS)
_JSON_SCALARS = (str, int, float, bool, type(None))


def _copy_json(value: Any) -> Any:
    """An independent copy of a JSON value: every dict and list is new, the scalars in them are shared.

    INVARIANT: stored documents hold only what ``json.loads`` makes (dicts, lists, str, int, float, bool, None),
    so sharing the scalars is safe (they are immutable) and a caller's copy and the stored version can never see
    each other's mutations (test_returned_documents_are_copies_the_caller_may_mutate and the isolation tests in
    test_memory_container.py). A flat 1 KB outbox document costs one ``dict.copy``, where ``copy.deepcopy`` walked
    and memoised every key and value. Anything else (never stored, but a query row is checked too) is deep-copied.
    """
    kind = type(value)
    if kind is dict:
        copied = value.copy()
        for child in value.values():
            if type(child) in _JSON_CONTAINERS:
                for name, member in copied.items():  # values only are replaced: the dict's size never changes
                    if type(member) in _JSON_CONTAINERS:
                        copied[name] = _copy_json(member)
                break
        return copied
    if kind is list:
        return [item if type(item) not in _JSON_CONTAINERS else _copy_json(item) for item in value]
    if kind in _JSON_SCALARS:
        return value
    return copy.deepcopy(value)


def _is_flat(document: Document) -> bool:
    """Whether no member of a JSON object is a dict or a list (its copy is then one ``dict.copy``)."""
    return _JSON_CONTAINERS_SET.isdisjoint(map(type, document.values()))


# ============================================================================================================
# Stored state.
# ============================================================================================================


class _Stored:
    """One stored document version. Never mutated: a write stores a new one.

    A plain class with slots, not a frozen dataclass: one is built per write, and a frozen dataclass's
    ``__init__`` sets every field through ``object.__setattr__``.
    """

    __slots__ = ("document", "epk", "expires_at", "flat", "key", "lsn", "size_bound")

    def __init__(
        self, document: Document, key: _Key, epk: int, lsn: int, expires_at: int | None, size_bound: int, flat: bool
    ) -> None:
        self.document = document  # the body with _rid, _etag and _ts, without _lsn
        self.key = key
        self.epk = epk
        self.lsn = lsn
        self.expires_at = expires_at  # _ts + effective ttl; None when it never expires
        #: At least the length of ``document``'s JSON text, so a patch can tell it stays far below the 2 MB limit
        #: without re-encoding the whole document (see ``_patch``).
        self.size_bound = size_bound
        #: True only when no member of ``document`` is a dict or a list, so ``document.copy()`` is an independent
        #: copy. False is always safe (``_copy_json`` then walks the document).
        self.flat = flat

    def alive_at(self, now: float) -> bool:
        # INVARIANT: expired means clock() >= _ts + ttl (test_document_expires_after_the_container_default_ttl);
        # comparing with > would keep a document readable for one extra instant.
        return self.expires_at is None or now < self.expires_at

    def copy(self) -> Document:
        """An independent copy of the document (see ``_copy_json``); one ``dict.copy`` when it is flat."""
        return self.document.copy() if self.flat else cast(Document, _copy_json(self.document))


_T = TypeVar("_T")
_Ts = TypeVarTuple("_Ts")
_ItemKey = tuple[str, str]  # (canonical partition-key JSON, id)
#: A body ready to be stored: the body, an upper bound of its JSON text's length, whether it is flat.
_Checked = tuple[Document, int, bool]


class _Transaction:
    """The container's items as one operation (or one batch) sees them; writes land only on commit.

    Every write of one transaction gets the same ``_lsn`` and ``_ts``, as a transactional batch does on the
    service; a failed transaction is dropped, which is what makes a batch all-or-nothing.
    """

    __slots__ = ("_items", "lsn", "now", "ts", "writes")

    def __init__(self, items: dict[_ItemKey, _Stored], last_lsn: int, now: float) -> None:
        self._items = items
        #: The versions this transaction wrote (``None``: deleted), in write order.
        self.writes: dict[_ItemKey, _Stored | None] = {}
        self.lsn = last_lsn + 1
        self.now = now
        self.ts = int(now)

    def get(self, key: _ItemKey) -> _Stored | None:
        writes = self.writes
        stored = writes[key] if key in writes else self._items.get(key)
        if stored is None or (stored.expires_at is not None and self.now >= stored.expires_at):  # not alive_at(now)
            return None
        return stored

    def remove(self, key: _ItemKey) -> None:
        self.writes[key] = None


# ============================================================================================================
# The container.
# ============================================================================================================


class MemoryDocumentContainer(DocumentContainer):
    """An in-memory Cosmos DB container; see the module docstring for the semantics it keeps.

    ``partition_key_paths`` (default ``("/pk",)``, up to three for a hierarchical key) and ``default_ttl``
    (default ``None``: TTL off) are the container's definition; ``clock`` (default UTC wall clock) gives ``_ts``
    and decides expiry; ``feed_range_count`` (default 1) cuts the EPK space into that many feed ranges; the
    account endpoint, database and container ids only feed :meth:`properties`.
    """

    def __init__(
        self,
        *,
        partition_key_paths: Sequence[str] = ("/pk",),
        default_ttl: int | None = None,
        clock: Clock = utc_now,
        feed_range_count: int = 1,
        account_endpoint: str = "memory://localhost/",
        database_id: str = "chatter",
        container_id: str = "outbox",
    ) -> None:
        self._paths = _validated_paths(partition_key_paths)
        self._path_tokens = [_path_tokens(path) for path in self._paths]
        self._single_path = len(self._paths) == 1
        self._default_ttl = _validated_default_ttl(default_ttl)
        self._clock = clock
        self._ranges = _even_ranges(feed_range_count)
        self._properties = ContainerProperties(
            account_endpoint=account_endpoint,
            database_id=database_id,
            container_id=container_id,
            partition_key_paths=self._paths,
            default_ttl=self._default_ttl,
        )
        self._rid = uuid.uuid4().hex[:16]
        # ETags: opaque, quoted and shaped like the service's (a UUID-like hex string). 80 random bits per container
        # and a 48-bit write serial make each unique, without drawing random bytes on every write.
        random = os.urandom(10).hex()
        self._etag_prefix = f'"{random[:8]}-{random[8:12]}-{random[12:16]}-{random[16:]}-'
        self._etag_serials = itertools.count(1)
        self._lock = threading.RLock()
        self._items: dict[_ItemKey, _Stored] = {}
        self._lsn = 0
        #: ``_Key`` values (immutable, their JSON and EPK computed once) of single-path scalar partition keys: str
        #: ones by value, the others by (type, value).
        self._str_keys: dict[str, _Key] = {}
        self._scalar_keys: dict[tuple[type, Any], _Key] = {}
        #: Paths that passed ``_check_patch_target``: their ``_patch_target``.
        self._patch_targets: dict[str, tuple[str | None, int]] = {}
        # The change log: (_lsn, key) of every stored version in commit order, so a change-feed page starts at a
        # bisect of its continuation instead of scanning every item. Entries a later write superseded are skipped
        # on read and dropped when the log is rebuilt.
        self._log_lsns: list[int] = []
        self._log_keys: list[_ItemKey] = []
        #: Faults to inject; see :class:`FaultPlan`.
        self.faults = FaultPlan()
        #: How often each port method was called (including calls that failed), e.g. ``calls["patch"]``.
        self.calls: Counter[str] = Counter()

    # -- hooks ----------------------------------------------------------------------------------------------

    def check(self, call: OperationCall) -> None:
        """Run before an operation applies, under the lock; raise to fail it. Default: the fault plan."""
        self.faults.raise_before(call)

    def after_apply(self, call: OperationCall, result: Any) -> None:
        """Run after an operation applied (and committed), under the lock; raise to report a lost response."""
        self.faults.raise_after(call)

    def _run(
        self,
        operation: str,
        apply: Callable[[_Transaction], _T],
        *,
        item_id: str | None = None,
        partition_key: PartitionKey | None = None,
        **arguments: Any,
    ) -> _T:
        """Count the call, run the hooks and ``apply`` in one transaction, and commit it if ``apply`` returns."""
        return self._execute(operation, item_id, partition_key, arguments, apply)

    def _execute(
        self,
        operation: str,
        item_id: str | None,
        partition_key: PartitionKey | None,
        arguments: dict[str, Any],
        apply: Callable[[_Transaction, *_Ts], _T],
        *args: *_Ts,
    ) -> _T:
        """``_run`` with the call's ``arguments`` already collected and ``apply(transaction, *args)``."""
        with self._lock:
            calls = self.calls
            number = calls[operation] + 1
            calls[operation] = number
            # OperationCall(operation, number, item_id, partition_key, arguments), built without the frozen
            # dataclass's __init__, which sets each field through object.__setattr__ (one call is built for every
            # operation; test_the_hooks_see_every_call_as_a_plain_operation_call pins that it is the same).
            call: OperationCall = _new_object(OperationCall)
            fields = call.__dict__
            fields["operation"] = operation
            fields["number"] = number
            fields["item_id"] = item_id
            fields["partition_key"] = partition_key
            fields["arguments"] = arguments
            self.check(call)
            items = self._items
            transaction = _Transaction(items, self._lsn, self._now())
            result = apply(transaction, *args)
            if transaction.writes:
                # Commit: apply the writes to the items and append the versions stored to the change log.
                log_keys, log_lsns, lsn = self._log_keys, self._log_lsns, transaction.lsn
                for key, stored in transaction.writes.items():
                    items.pop(key, None)  # re-insert so iteration order follows the latest write
                    if stored is not None:
                        items[key] = stored
                        log_keys.append(key)
                        log_lsns.append(lsn)
                self._lsn = lsn
                if len(log_keys) > 2 * len(items) + 1024:
                    # INVARIANT: ``_items`` iterates in commit order (commit re-inserts every key it writes), so it
                    # is the log without its superseded entries.
                    self._log_keys = list(items)
                    self._log_lsns = [stored.lsn for stored in items.values()]
            self.after_apply(call, result)
            return result

    def _now(self) -> float:
        clock = self._clock
        if clock is utc_now:
            # What ``utc_now().timestamp()`` returns for the same reading of the system clock (``datetime.now``
            # floors it to microseconds; ``timestamp()`` divides the microseconds since the epoch by 10**6), without
            # building an aware datetime and converting it back.
            return _time_ns() // 1000 / 1_000_000
        now = clock()
        if now.tzinfo is None:
            now = now.replace(tzinfo=UTC)
        return now.timestamp()

    # -- port: metadata -------------------------------------------------------------------------------------

    @override
    def properties(self) -> ContainerProperties:
        """Read the container's metadata."""
        return self._run("properties", lambda _t: self._properties)

    # -- port: point operations -----------------------------------------------------------------------------

    @override
    def create(self, document: Document, partition_key: PartitionKey) -> Document:
        """Create a document; ``Conflict`` if its id exists in that partition."""
        return self._run(
            "create",
            lambda t: self._create(t, document, partition_key),
            item_id=_id_of(document),
            partition_key=partition_key,
            document=document,
        )

    @override
    def read(self, item_id: str, partition_key: PartitionKey) -> Document:
        """Point-read a document; ``NotFound`` if absent (or expired)."""
        return self._run(
            "read",
            lambda t: self._public(self._existing(t, item_id, partition_key)),
            item_id=item_id,
            partition_key=partition_key,
        )

    @override
    def replace(
        self,
        item_id: str,
        partition_key: PartitionKey,
        document: Document,
        *,
        if_match: str | None = None,
    ) -> Document:
        """Replace a document; ``NotFound`` if absent, ``PreconditionFailed`` on a stale ``if_match``."""
        return self._run(
            "replace",
            lambda t: self._replace(t, item_id, partition_key, document, if_match),
            item_id=item_id,
            partition_key=partition_key,
            document=document,
            if_match=if_match,
        )

    @override
    def upsert(self, document: Document, partition_key: PartitionKey, *, if_match: str | None = None) -> Document:
        """Create or replace a document; ``PreconditionFailed`` when ``if_match`` does not hold."""
        return self._run(
            "upsert",
            lambda t: self._upsert(t, document, partition_key, if_match)[0],
            item_id=_id_of(document),
            partition_key=partition_key,
            document=document,
            if_match=if_match,
        )

    @override
    def delete(self, item_id: str, partition_key: PartitionKey, *, if_match: str | None = None) -> None:
        """Delete a document; ``NotFound`` if absent, ``PreconditionFailed`` on a stale ETag."""
        self._run(
            "delete",
            lambda t: self._delete(t, item_id, partition_key, if_match),
            item_id=item_id,
            partition_key=partition_key,
            if_match=if_match,
        )

    @override
    def patch(
        self,
        item_id: str,
        partition_key: PartitionKey,
        operations: Sequence[PatchOperation],
        *,
        if_match: str | None = None,
        filter_predicate: str | None = None,
    ) -> Document:
        """Apply patch operations atomically; ``PreconditionFailed`` if the ETag or the filter fails."""
        # _execute, not _run: the drain patches every document it delivers, and this skips building a closure
        # and collecting keyword arguments (the call's arguments are the ones _run would collect).
        arguments = {"operations": tuple(operations), "if_match": if_match, "filter_predicate": filter_predicate}
        return self._execute(
            "patch",
            item_id,
            partition_key,
            arguments,
            self._patch,
            item_id,
            partition_key,
            operations,
            if_match,
            filter_predicate,
        )

    @override
    def execute_batch(
        self, partition_key: PartitionKey, operations: Sequence[BatchOperation]
    ) -> list[BatchOperationResult]:
        """Run operations all-or-nothing in one partition; ``BatchFailed`` names the culprit."""
        return self._run(
            "execute_batch",
            lambda t: self._batch(t, partition_key, operations),
            partition_key=partition_key,
            operations=tuple(operations),
        )

    # -- port: query ----------------------------------------------------------------------------------------

    @override
    def query(
        self,
        sql: str,
        parameters: Mapping[str, Any] | None = None,
        *,
        partition_key: PartitionKey | None = None,
    ) -> Iterator[Any]:
        """Run a query of the SQL subset (``SUPPORTED_SQL``), scoped to ``partition_key`` when given.

        Results are computed eagerly under the lock (a consistent snapshot), so a ``BadRequest`` is raised by
        this call, not by the first ``next()``. ``SELECT VALUE COUNT(1)`` yields one integer.
        """
        rows = self._run(
            "query",
            lambda t: self._query(t, sql, parameters, partition_key),
            partition_key=partition_key,
            sql=sql,
            parameters=parameters,
        )
        return iter(rows)

    # -- port: feed ranges and the change feed --------------------------------------------------------------

    @override
    def read_feed_ranges(self, *, force_refresh: bool = False) -> list[FeedRange]:
        """List the current feed ranges, in EPK order."""
        return self._run(
            "read_feed_ranges", lambda _t: [r.feed_range for r in self._ranges], force_refresh=force_refresh
        )

    @override
    def is_feed_range_subset(self, parent: FeedRange, child: FeedRange) -> bool:
        """Whether ``child`` lies inside ``parent``."""
        return self._run(
            "is_feed_range_subset",
            lambda _t: _EpkRange.parse(parent.token).covers(_EpkRange.parse(child.token)),
            parent=parent,
            child=child,
        )

    @override
    def feed_range_overlap(self, a: FeedRange, b: FeedRange) -> FeedRange | None:
        """The feed range ``a`` and ``b`` share; ``None`` if they are disjoint."""
        return self._run("feed_range_overlap", lambda _t: _overlap(a, b), a=a, b=b)

    @override
    def read_change_feed(
        self,
        feed_range: FeedRange,
        *,
        continuation: str | None = None,
        start: ChangeFeedStart | datetime = ChangeFeedStart.BEGINNING,
        max_item_count: int = 100,
    ) -> ChangeFeedPage:
        """Read one page of latest-version changes for a feed range after a continuation (or from ``start``).

        ``continuation`` wins over ``start``. A continuation of a parent range is accepted for its children.
        ``FeedRangeGone`` when the range spans more than one current range (it split).
        """
        return self._run(
            "read_change_feed",
            lambda t: self._change_feed(t, feed_range, continuation, start, max_item_count),
            feed_range=feed_range,
            continuation=continuation,
            start=start,
            max_item_count=max_item_count,
        )

    # -- test helpers (not part of the port) ----------------------------------------------------------------

    def split_feed_range(self, feed_range: FeedRange) -> tuple[FeedRange, FeedRange]:
        """Split a current feed range in two at its EPK midpoint, as a partition split does.

        Afterwards reading the parent raises ``FeedRangeGone``; the parent's continuations resume on either child.
        """
        with self._lock:
            parent = _EpkRange.parse(feed_range.token)
            if parent not in self._ranges:
                raise FeedRangeGone(f"{feed_range.token} is not a current feed range")
            if parent.high - parent.low < 2:
                raise BadRequest("the feed range is too narrow to split")
            middle = (parent.low + parent.high) // 2
            left, right = _EpkRange(parent.low, middle), _EpkRange(middle, parent.high)
            position = self._ranges.index(parent)
            self._ranges[position : position + 1] = [left, right]
            return left.feed_range, right.feed_range

    def halve_feed_range(self, feed_range: FeedRange) -> tuple[FeedRange, FeedRange]:
        """The two halves of a feed range at its EPK midpoint, without splitting it: sub-ranges a reader may hold
        (as after a split or a merge) while the range itself stays current."""
        whole = _EpkRange.parse(feed_range.token)
        if whole.high - whole.low < 2:
            raise BadRequest("the feed range is too narrow to halve")
        middle = (whole.low + whole.high) // 2
        return _EpkRange(whole.low, middle).feed_range, _EpkRange(middle, whole.high).feed_range

    def merge_feed_ranges(self, left: FeedRange, right: FeedRange) -> FeedRange:
        """Merge two adjacent current feed ranges into one, as a partition merge does.

        Afterwards both old ranges are still readable (each lies inside the merged one, and their continuations
        resume there), as the SDK serves a sub-range of a physical partition; ``read_feed_ranges`` lists the merge.
        """
        with self._lock:
            first, second = sorted((_EpkRange.parse(left.token), _EpkRange.parse(right.token)), key=lambda r: r.low)
            if first not in self._ranges or second not in self._ranges:
                raise FeedRangeGone("only two current feed ranges can merge")
            position = self._ranges.index(first)
            if position + 1 >= len(self._ranges) or self._ranges[position + 1] != second:
                raise BadRequest("only adjacent feed ranges can merge")
            merged = _EpkRange(first.low, second.high)
            self._ranges[position : position + 2] = [merged]
            return merged.feed_range

    def feed_range_of(self, partition_key: PartitionKey) -> FeedRange:
        """Return the current feed range that holds a (full) partition key."""
        with self._lock:
            epk = self._full_key(partition_key).epk
            return next(r.feed_range for r in self._ranges if r.contains(epk))

    @property
    def last_lsn(self) -> int:
        """The ``_lsn`` of the latest committed write (0 for a container never written)."""
        return self._lsn

    # -- partition keys -------------------------------------------------------------------------------------

    def _key(self, partition_key: PartitionKey, *, allow_prefix: bool = False) -> _Key:
        if self._single_path and type(partition_key) is str:
            key = self._str_keys.get(partition_key)
            if key is None:
                if len(self._str_keys) >= _KEY_CACHE_SIZE:
                    self._str_keys.clear()
                key = self._str_keys[partition_key] = self._new_key(partition_key, allow_prefix)
            return key
        if self._single_path and type(partition_key) in _JSON_SCALARS:
            # The type is part of the cache key: True == 1 in Python, but not in Cosmos.
            cache_key = (type(partition_key), partition_key)
            key = self._scalar_keys.get(cache_key)
            if key is None:
                if len(self._scalar_keys) >= _KEY_CACHE_SIZE:
                    self._scalar_keys.clear()
                key = self._scalar_keys[cache_key] = self._new_key(partition_key, allow_prefix)
            return key
        return self._new_key(partition_key, allow_prefix)

    def _new_key(self, partition_key: PartitionKey, allow_prefix: bool) -> _Key:
        levels = len(self._paths)
        if isinstance(partition_key, (list, tuple)):
            components = tuple(partition_key)
        elif levels == 1:
            components = (partition_key,)
        else:
            raise BadRequest(f"a hierarchical container {list(self._paths)} takes a list partition key")
        if not components or len(components) > levels or (len(components) < levels and not allow_prefix):
            raise BadRequest(f"partition key {partition_key!r} does not match the paths {list(self._paths)}")
        return _Key(tuple(_canonical_component(component) for component in components))

    def _full_key(self, partition_key: PartitionKey) -> _Key:
        return self._key(partition_key)

    def _key_in(self, document: Document) -> _Key:
        """Read the partition key out of a body; an absent value is ``None``, as the port defines it."""
        components = []
        for tokens in self._path_tokens:
            value = _walk(document, tokens)
            components.append(None if value is UNDEFINED else _canonical_component(value))
        return _Key(tuple(components))

    # -- writes ---------------------------------------------------------------------------------------------

    def _body(self, document: Document, key: _Key, *, private: bool = False) -> _Checked:
        """Validate and copy a body: JSON, a legal id, the same partition key as the argument, a legal ttl.

        ``private``: ``document`` is already this container's own copy and holds nothing but JSON values (dicts,
        lists, str, int, float, bool, None), so the round trip through JSON text, which copies and normalises a
        caller's body, would change nothing; it is validated and used as it is. Returns the body, the length of
        its JSON text (an upper bound once system properties are dropped) and whether it is flat (``_is_flat``).
        """
        if not isinstance(document, dict):
            raise BadRequest("a document must be a JSON object")
        try:
            encoded = _BODY_ENCODER.encode(document)
        except (TypeError, ValueError) as error:
            raise BadRequest(f"the document is not JSON: {error}") from error
        if len(encoded) > MAX_DOCUMENT_BYTES:  # ASCII text (ensure_ascii): characters are bytes
            raise ContainerError("the document exceeds 2 MB", status_code=413)
        body: Document = document if private else json.loads(encoded)
        return self._checked(body, key), len(encoded), _is_flat(body)

    def _checked(self, body: Document, key: _Key) -> Document:
        """The checks of a body known to be JSON within the size limit: id, partition key, ttl; system properties
        are dropped (the write sets them)."""
        _check_id(body.get("id"))
        if self._key_in(body) != key:
            raise BadRequest(
                f"the partition key in the document {list(self._key_in(body).components)} differs from the "
                f"one given {list(key.components)}"
            )
        _check_item_ttl(body.get("ttl"))
        for name in SYSTEM_PROPERTIES:
            body.pop(name, None)
        return body

    @staticmethod
    def _checked_patch(body: Document) -> Document:
        """``_checked`` for a patched copy of a stored body: only the ttl can have changed.

        INVARIANT: ``_check_patch_target`` refuses any path at the id, at a system property, or at or above a
        partition-key path, and a path below one fails because a stored partition value is a scalar or absent. So the
        id and the partition key are the stored ones, which ``_checked`` verified when they were written. Of the
        system properties, a stored body holds only those ``_write`` sets (``_checked`` drops the others, and no
        patch can add one), so only those are dropped.
        """
        ttl = body.get("ttl")
        if ttl is not None and not (type(ttl) is int and 0 < ttl <= MAX_TTL_SECONDS):  # not an obviously legal ttl
            _check_item_ttl(ttl)
        del body["_rid"], body["_etag"], body["_ts"]
        return body

    def _write(
        self,
        transaction: _Transaction,
        checked: _Checked,
        key: _Key,
        previous: _Stored | None,
        item_key: _ItemKey | None = None,
    ) -> _Stored:
        """Store a checked body (with its size bound and flatness) as the new version, under ``item_key`` (by
        default its partition key and id). It becomes stored state: callers pass a body no one else holds."""
        body, size_bound, flat = checked
        body["_rid"] = previous.document["_rid"] if previous is not None else os.urandom(8).hex()
        body["_etag"] = f'{self._etag_prefix}{next(self._etag_serials):012x}"'
        ts = body["_ts"] = transaction.ts
        # Expiry: _ts + the effective ttl, the item's ``ttl`` over the container default; -1 and TTL-off never.
        default_ttl = self._default_ttl
        if default_ttl is None:
            expires_at = None
        else:
            ttl = body.get("ttl")
            effective = default_ttl if ttl is None else int(ttl)
            expires_at = None if effective == -1 else ts + effective
        stored = _Stored(body, key, key.epk, transaction.lsn, expires_at, size_bound + _SYSTEM_PROPERTIES_BYTES, flat)
        transaction.writes[item_key or (key.json, str(body["id"]))] = stored
        return stored

    def _existing(self, transaction: _Transaction, item_id: str, partition_key: PartitionKey) -> _Stored:
        stored = transaction.get((self._key(partition_key).json, str(item_id)))
        if stored is None:
            raise NotFound(f"no document {item_id!r} in partition {partition_key!r}")
        return stored

    @staticmethod
    def _check_etag(stored: _Stored, if_match: str | None) -> None:
        if if_match is not None and stored.document["_etag"] != if_match:
            raise PreconditionFailed(f"ETag {if_match} is stale for {stored.document['id']!r}")

    def _create(self, transaction: _Transaction, document: Document, partition_key: PartitionKey) -> Document:
        key = self._full_key(partition_key)
        checked = self._body(document, key)
        body = checked[0]
        if transaction.get((key.json, body["id"])) is not None:
            raise Conflict(f"a document with id {body['id']!r} already exists in partition {partition_key!r}")
        return self._public(self._write(transaction, checked, key, None))

    def _replace(
        self,
        transaction: _Transaction,
        item_id: str,
        partition_key: PartitionKey,
        document: Document,
        if_match: str | None,
    ) -> Document:
        stored = self._existing(transaction, item_id, partition_key)
        self._check_etag(stored, if_match)
        checked = self._body(document, stored.key)
        body = checked[0]
        if body["id"] != item_id:
            raise BadRequest(f"the body's id {body['id']!r} differs from the replaced id {item_id!r}")
        return self._public(self._write(transaction, checked, stored.key, stored))

    def _upsert(
        self, transaction: _Transaction, document: Document, partition_key: PartitionKey, if_match: str | None
    ) -> tuple[Document, bool]:
        key = self._full_key(partition_key)
        checked = self._body(document, key)
        body = checked[0]
        previous = transaction.get((key.json, body["id"]))
        if previous is None and if_match is not None:
            raise PreconditionFailed(f"if_match given but {body['id']!r} does not exist")
        if previous is not None:
            self._check_etag(previous, if_match)
        return self._public(self._write(transaction, checked, key, previous)), previous is None

    def _delete(
        self, transaction: _Transaction, item_id: str, partition_key: PartitionKey, if_match: str | None
    ) -> None:
        stored = self._existing(transaction, item_id, partition_key)
        self._check_etag(stored, if_match)
        transaction.remove((stored.key.json, item_id))

    def _patch(
        self,
        transaction: _Transaction,
        item_id: str,
        partition_key: PartitionKey,
        operations: Sequence[PatchOperation],
        if_match: str | None,
        filter_predicate: str | None,
    ) -> Document:
        if not 1 <= len(operations) <= MAX_PATCH_OPERATIONS:
            raise BadRequest(f"a patch takes 1 to {MAX_PATCH_OPERATIONS} operations, not {len(operations)}")
        predicate = parse_filter_predicate(filter_predicate) if filter_predicate is not None else None
        if self._single_path and type(partition_key) is str:
            key = self._str_keys.get(partition_key) or self._key(partition_key)  # _key, inlined for the common case
        else:
            key = self._key(partition_key)
        item_key = (key.json, str(item_id))
        stored = transaction.get(item_key)
        if stored is None:
            raise NotFound(f"no document {item_id!r} in partition {partition_key!r}")  # as _existing
        if if_match is not None:
            self._check_etag(stored, if_match)
        if predicate is not None and run_query(predicate, [stored.document], {}) == []:
            raise PreconditionFailed("condition specified in the patch request is not satisfied")
        # The stored version stays as it is if an operation fails.
        body = stored.document.copy() if stored.flat else _copy_json(stored.document)  # stored.copy(), inlined
        targets = self._patch_targets
        scalar = True  # every value is a JSON scalar
        floats = False  # some value is a float, measured once every operation applied
        size_bound = stored.size_bound
        for operation in operations:
            member, growth = targets.get(operation.path) or self._patch_target(operation)
            value = operation.value
            kind = type(value)
            if kind is str:
                size_bound += growth + len(encode_basestring_ascii(value))
            elif kind is int:
                size_bound += growth + len(repr(value))
            elif kind is float:
                size_bound += growth
                floats = True
            elif kind is bool or value is None:
                size_bound += growth + 5
            else:
                scalar = False
                _apply_patch_operation(body, operation)
                continue
            if member is not None and operation.op == "set":
                body[member] = value  # what _apply_patch_operation does for it
            else:
                _apply_patch_operation(body, operation)
        if not scalar:
            # A list, an object, a tuple...: the JSON round trip that normalises a caller's body.
            checked = self._body(body, key)
        else:
            # JSON scalars (the drain's stamps) leave the copy holding only JSON values. Re-encoding it only to
            # measure it is needed when the stored size plus what these operations can add might pass the limit.
            if floats:
                # After every operation applied, as encoding the document would refuse a NaN or an infinity.
                for operation in operations:
                    if type(operation.value) is float:
                        size_bound += _scalar_json_length(operation.value)
            if size_bound <= MAX_DOCUMENT_BYTES:
                # A scalar value keeps a flat body flat (one it made flat by a remove stays marked nested, which
                # only costs a deeper copy).
                checked = self._checked_patch(body), size_bound, stored.flat
            else:
                checked = self._body(body, key, private=True)
        written = self._write(transaction, checked, key, stored, item_key)
        return written.document.copy() if written.flat else _copy_json(written.document)  # written.copy(), inlined

    def _patch_target(self, operation: PatchOperation) -> tuple[str | None, int]:
        """Check that an operation's path may be patched (``_check_patch_target``) and remember it as a target:
        the member it names when it is a top-level member (else None), and ``_name_growth_bound``."""
        self._check_patch_target(operation)
        tokens = _path_tokens(operation.path)
        target = (tokens[0] if len(tokens) == 1 else None, _name_growth_bound(tokens))
        if len(self._patch_targets) >= _KEY_CACHE_SIZE:
            self._patch_targets.clear()
        self._patch_targets[operation.path] = target
        return target

    def _check_patch_target(self, operation: PatchOperation) -> None:
        """Refuse patches of the id, a partition-key path (or an ancestor of one) and system properties.

        Whether a path passes depends on the path and the container only: ``_patch_target`` remembers those that do.
        """
        tokens = _path_tokens(operation.path)
        if tokens[0] == "id" or tokens[0] in SYSTEM_PROPERTIES:
            raise BadRequest(f"{operation.op} {operation.path}: {tokens[0]} cannot be patched")
        for path_tokens in self._path_tokens:
            if path_tokens[: len(tokens)] == tokens:
                raise BadRequest(f"{operation.op} {operation.path}: the partition key cannot be patched")

    # -- batch ----------------------------------------------------------------------------------------------

    def _batch(
        self, transaction: _Transaction, partition_key: PartitionKey, operations: Sequence[BatchOperation]
    ) -> list[BatchOperationResult]:
        if not 1 <= len(operations) <= MAX_BATCH_OPERATIONS:
            raise BadRequest(f"a batch takes 1 to {MAX_BATCH_OPERATIONS} operations, not {len(operations)}")
        self._full_key(partition_key)
        results: list[BatchOperationResult] = []
        for index, operation in enumerate(operations):
            try:
                results.append(self._batch_operation(transaction, partition_key, operation))
            except ContainerError as error:
                # INVARIANT: the transaction is never committed, so nothing of the batch is written
                # (test_batch_is_all_or_nothing_when_an_operation_fails); committing per operation breaks it.
                statuses = [424] * len(operations)
                statuses[index] = error.status_code
                raise BatchFailed(
                    f"batch operation {index} ({operation.kind.value} {operation.id!r}) failed: {error}",
                    failed_index=index,
                    status_code=error.status_code,
                    operation_statuses=statuses,
                ) from error
        return results

    def _batch_operation(
        self, transaction: _Transaction, partition_key: PartitionKey, operation: BatchOperation
    ) -> BatchOperationResult:
        kind = operation.kind
        needs_body = (BatchOperationKind.CREATE, BatchOperationKind.UPSERT, BatchOperationKind.REPLACE)
        if kind in needs_body and operation.body is None:
            raise BadRequest(f"a batch {kind.value} needs a body")
        if kind is BatchOperationKind.CREATE:
            return _result(201, self._create(transaction, cast(Document, operation.body), partition_key))
        if kind is BatchOperationKind.UPSERT:
            body, created = self._upsert(transaction, cast(Document, operation.body), partition_key, operation.if_match)
            return _result(201 if created else 200, body)
        if kind is BatchOperationKind.READ:
            return _result(200, self._public(self._existing(transaction, operation.id, partition_key)))
        if kind is BatchOperationKind.REPLACE:
            document = cast(Document, operation.body)
            return _result(200, self._replace(transaction, operation.id, partition_key, document, operation.if_match))
        if kind is BatchOperationKind.DELETE:
            self._delete(transaction, operation.id, partition_key, operation.if_match)
            return BatchOperationResult(204)
        patched = self._patch(
            transaction,
            operation.id,
            partition_key,
            operation.patch_operations,
            operation.if_match,
            operation.filter_predicate,
        )
        return _result(200, patched)

    # -- query ----------------------------------------------------------------------------------------------

    def _query(
        self,
        transaction: _Transaction,
        sql: str,
        parameters: Mapping[str, Any] | None,
        partition_key: PartitionKey | None,
    ) -> list[Any]:
        parsed = parse_query(sql)
        scope = None if partition_key is None else self._key(partition_key, allow_prefix=True)
        documents = [
            stored.document for stored in self._live(transaction) if scope is None or stored.key.starts_with(scope)
        ]
        rows = run_query(parsed, documents, _normalise_parameters(parameters))
        return [_copy_json(row) for row in rows]

    def _live(self, transaction: _Transaction) -> list[_Stored]:
        return [stored for stored in self._items.values() if stored.alive_at(transaction.now)]

    # -- change feed ----------------------------------------------------------------------------------------

    def _change_feed(
        self,
        transaction: _Transaction,
        feed_range: FeedRange,
        continuation: str | None,
        start: ChangeFeedStart | datetime,
        max_item_count: int,
    ) -> ChangeFeedPage:
        if max_item_count < 1:
            raise BadRequest("max_item_count must be at least 1")
        requested = _EpkRange.parse(feed_range.token)
        if not any(current.covers(requested) for current in self._ranges):
            # NOTE: a range wider than one physical partition no longer exists after a split; the reader must
            # re-read the ranges and carry its continuation onto the children.
            raise FeedRangeGone(f"feed range {feed_range.token} is gone (split); re-read the feed ranges")
        after_lsn, since_ts = self._position(requested, continuation, start)
        page = self._changes_after(transaction, requested, after_lsn, since_ts, max_item_count)
        if page:
            next_lsn = page[-1].lsn
        elif since_ts is not None:
            next_lsn = self._lsn  # nothing since that time: everything written so far is behind the reader
        else:
            next_lsn = after_lsn
        token = _Continuation(self._rid, requested, next_lsn).encode()
        return ChangeFeedPage(tuple([self._feed_document(stored) for stored in page]), token)

    def _changes_after(
        self, transaction: _Transaction, requested: _EpkRange, after_lsn: int, since_ts: float | None, count: int
    ) -> list[_Stored]:
        """The live latest versions in ``requested`` written after ``after_lsn`` (and at or after ``since_ts``), in
        ``_lsn`` order: ``count`` of them, plus any that share the last one's ``_lsn`` (one batch is never split
        across pages; the service does the same, so a page can exceed the requested count)."""
        items, lsns, keys, now = self._items, self._log_lsns, self._log_keys, transaction.now
        low, high = requested.low, requested.high
        page: list[_Stored] = []
        for position in range(bisect.bisect_right(lsns, after_lsn), len(lsns)):
            lsn = lsns[position]
            if len(page) >= count and lsn != page[-1].lsn:
                break
            stored = items.get(keys[position])
            if stored is None or stored.lsn != lsn:
                continue  # deleted, or superseded by a later version (which has its own entry further on)
            expires_at = stored.expires_at
            if (expires_at is not None and now >= expires_at) or not low <= stored.epk < high:
                continue  # expired (not alive_at(now)), or outside the requested range (not requested.contains)
            if since_ts is not None and stored.document["_ts"] < since_ts:
                continue
            page.append(stored)
        return page

    def _position(
        self, requested: _EpkRange, continuation: str | None, start: ChangeFeedStart | datetime
    ) -> tuple[int, float | None]:
        """Return (read changes after this ``_lsn``, only those with ``_ts`` at or after this time)."""
        if continuation is not None:
            position = _Continuation.decode(continuation)
            if position.container_rid != self._rid:
                raise BadRequest("the continuation belongs to another container")
            if not position.feed_range.covers(requested):
                raise BadRequest("the continuation belongs to a feed range that does not contain this one")
            return position.lsn, None
        if isinstance(start, datetime):
            moment = start if start.tzinfo is not None else start.replace(tzinfo=UTC)
            return 0, moment.timestamp()
        if start is ChangeFeedStart.NOW:
            return self._lsn, None
        if start is ChangeFeedStart.BEGINNING:
            return 0, None
        raise BadRequest(f"unknown change-feed start {start!r}")

    # -- output ---------------------------------------------------------------------------------------------

    @staticmethod
    def _public(stored: _Stored) -> Document:
        """A caller's copy of a stored document: mutating it never changes the container, nor the reverse."""
        return stored.copy()

    @staticmethod
    def _feed_document(stored: _Stored) -> Document:
        document = stored.copy()
        document["_lsn"] = stored.lsn
        return document


def _result(status_code: int, document: Document) -> BatchOperationResult:
    return BatchOperationResult(status_code, etag=document.get("_etag"), body=document)


def _id_of(document: Any) -> str | None:
    return str(document["id"]) if isinstance(document, dict) and "id" in document else None


def _check_id(item_id: Any) -> None:
    if not isinstance(item_id, str) or not item_id:
        raise BadRequest(f"a document needs a non-empty string id, not {item_id!r}")
    if len(item_id.encode("utf-8")) > MAX_ID_BYTES:
        raise BadRequest(f"an id is at most {MAX_ID_BYTES} bytes")
    if any(character in item_id for character in _FORBIDDEN_ID_CHARACTERS):
        raise BadRequest(f"an id may not contain any of {''.join(sorted(_FORBIDDEN_ID_CHARACTERS))}")


def _check_item_ttl(ttl: Any) -> None:
    if ttl is None:
        return
    if isinstance(ttl, bool) or not isinstance(ttl, int) or not (ttl == -1 or 0 < ttl <= MAX_TTL_SECONDS):
        raise BadRequest(f"an item ttl is -1 or 1..{MAX_TTL_SECONDS} whole seconds, not {ttl!r}")


def _validated_paths(paths: Sequence[str]) -> tuple[str, ...]:
    if isinstance(paths, str):
        paths = (paths,)
    checked = tuple(paths)
    if not 1 <= len(checked) <= MAX_PARTITION_KEY_LEVELS:
        raise ValueError(f"a container has 1 to {MAX_PARTITION_KEY_LEVELS} partition-key paths, not {checked}")
    for path in checked:
        _path_tokens(path)
    return checked


def _validated_default_ttl(default_ttl: int | None) -> int | None:
    if default_ttl is None or default_ttl == -1:
        return default_ttl
    if isinstance(default_ttl, bool) or not isinstance(default_ttl, int) or not 0 < default_ttl <= MAX_TTL_SECONDS:
        raise ValueError(f"default_ttl is None, -1 or a positive number of seconds, not {default_ttl!r}")
    return default_ttl


__all__ = [
    "EPK_SPACE",
    "MAX_BATCH_OPERATIONS",
    "MAX_PATCH_OPERATIONS",
    "OPERATIONS",
    "SUPPORTED_SQL",
    "FaultPlan",
    "FaultRule",
    "MemoryDocumentContainer",
    "OperationCall",
    "ParsedQuery",
    "parse_filter_predicate",
    "parse_query",
    "run_query",
]
