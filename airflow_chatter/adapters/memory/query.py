"""The SQL subset the in-memory container runs, with Cosmos's undefined-value semantics.

The grammar (``lark``, LALR) is the subset's definition; :class:`_Compiler` turns a parse tree into closures
over (document, parameters). Whatever the subset lacks is a ``BadRequest`` naming it, so a test that needs more
fails loudly rather than getting an answer the service would not give.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from lark import Lark, Token, Transformer, v_args
from lark.exceptions import UnexpectedCharacters, UnexpectedInput, VisitError
from lark.tree import Meta

from airflow_chatter.ports import BadRequest, Document

SUPPORTED_SQL = (
    "SELECT [TOP n] * FROM c [WHERE expr] [ORDER BY c.path [ASC|DESC], ...] | "
    "(FROM root r also names the alias r) | "
    "SELECT VALUE COUNT(1) FROM c [WHERE expr]; expr: AND/OR/NOT, parentheses, = != <> < <= > >= between "
    'c.a.b / c["x"] / c.a[0] paths, @params and JSON literals, IS_DEFINED(x), STARTSWITH(x, y[, ignore_case])'
)

_GRAMMAR = r"""
query: "SELECT"i ["TOP"i INT] projection from_clause [where] [order_by]
predicate: from_clause where
projection: "*"                                -> select_all
          | "VALUE"i "COUNT"i "(" expression ")" -> select_count
          | "VALUE"i? expression               -> select_other
from_clause: "FROM"i NAME NAME?
?where: "WHERE"i expression
order_by: "ORDER"i "BY"i order_item ("," order_item)*
order_item: path (ASC | DESC)?

?expression: conjunction | expression "OR"i conjunction -> any_of
?conjunction: negation | conjunction "AND"i negation   -> all_of
?negation: "NOT"i negation                         -> negate
         | comparison
?comparison: operand (COMPARATOR operand)?
?operand: "(" expression ")" | path | PARAM | call | literal
call: NAME "(" expression ("," expression)* ")"
path: NAME step*
?step: "." NAME | "[" (STRING | INT) "]"
?literal: NUMBER -> number
        | STRING -> string
        | TRUE | FALSE | NULL
        | "[" [literal ("," literal)*] "]" -> array
        | "{" [STRING ":" literal ("," STRING ":" literal)*] "}" -> object

ASC: "ASC"i
DESC: "DESC"i
TRUE: "true"i
FALSE: "false"i
NULL: "null"i
COMPARATOR: "<=" | ">=" | "!=" | "<>" | "=" | "<" | ">"
PARAM: /@[A-Za-z_][A-Za-z0-9_]*/
NAME: /[A-Za-z_][A-Za-z0-9_]*/
INT: /\d+/
NUMBER: /-?\d+(\.\d+)?([eE][+-]?\d+)?/
STRING: /'(?:[^'\\]|\\.)*'|"(?:[^"\\]|\\.)*"/s
%ignore /\s+/
"""

_PARSER = Lark(_GRAMMAR, start=["query", "predicate"], parser="lalr", propagate_positions=True)

#: Real Cosmos SQL the subset does not implement; named in the error so the reader knows it is a limitation.
_UNSUPPORTED_KEYWORDS = re.compile(
    r"(?<![.@\w])(JOIN|IN|GROUP|HAVING|OFFSET|LIMIT|DISTINCT|BETWEEN|LIKE|EXISTS|ARRAY|UDF|UNDEFINED|AS)(?!\w)",
    re.IGNORECASE,
)
_STRINGS = re.compile(r"""'(?:[^'\\]|\\.)*'|"(?:[^"\\]|\\.)*\"""", re.DOTALL)
_ESCAPE = re.compile(r"\\(u[0-9a-fA-F]{4}|.)", re.DOTALL)
_RANKS: tuple[tuple[type | tuple[type, ...], int], ...] = ((bool, 2), ((int, float), 3), (str, 4), (list, 5))
_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", "b": "\b", "f": "\f"}


class _Undefined:
    """Cosmos's *undefined*: a missing property, or an ill-typed comparison. Never equal to anything."""

    def __repr__(self) -> str:
        return "undefined"


UNDEFINED: Any = _Undefined()

Evaluator = Callable[[Any, Mapping[str, Any]], Any]


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


def _decode_string(text: str) -> str:
    def unescape(match: re.Match[str]) -> str:
        escaped = match.group(1)
        return chr(int(escaped[1:], 16)) if len(escaped) == 5 else _ESCAPES.get(escaped, escaped)

    return _ESCAPE.sub(unescape, text[1:-1])


def _constant(value: Any) -> Evaluator:
    return lambda _document, _parameters: value


@v_args(inline=True)
class _Compiler(Transformer[Token, Any]):
    """Compile a parse tree bottom-up: an expression becomes an ``Evaluator``, the statement a ``ParsedQuery``."""

    def __init__(self, sql: str, alias: str) -> None:
        super().__init__()
        self.sql, self.alias, self.parameters = sql, alias, set[str]()

    def query(self, top: Token | None, count: bool, _alias: str, where: Evaluator | None, order_by: Any) -> ParsedQuery:
        if count and order_by:
            raise _unsupported("ORDER BY with SELECT VALUE COUNT(1)")
        top_count = None if top is None else int(top)
        return ParsedQuery(self.alias, where, order_by or (), count, top_count, frozenset(self.parameters))

    def predicate(self, _alias: str, where: Evaluator) -> ParsedQuery:
        return ParsedQuery(self.alias, where, (), False, None, frozenset(self.parameters))

    def select_all(self) -> bool:
        return False

    @v_args(meta=True)
    def select_count(self, meta: Meta, _argument: Any) -> bool:
        text = self.sql[meta.start_pos : meta.end_pos]
        if not re.fullmatch(r"VALUE\s+COUNT\s*\(\s*1\s*\)", text, re.IGNORECASE):
            raise _unsupported(f"SELECT {text}")
        return True

    @v_args(meta=True)
    def select_other(self, meta: Meta, _expression: Any) -> bool:
        raise _unsupported(f"projection {self.sql[meta.start_pos : meta.end_pos]!r}")

    def from_clause(self, *names: Token) -> str:
        return str(names[-1])  # FROM root r: r is the alias

    def order_by(self, *items: tuple[Evaluator, bool]) -> tuple[tuple[Evaluator, bool], ...]:
        return items

    def order_item(self, key: Evaluator, direction: Token | None = None) -> tuple[Evaluator, bool]:
        return key, direction is not None and direction.upper() == "DESC"

    def any_of(self, left: Evaluator, right: Evaluator) -> Evaluator:
        return lambda document, parameters: _any_of(left(document, parameters), right(document, parameters))

    def all_of(self, left: Evaluator, right: Evaluator) -> Evaluator:
        return lambda document, parameters: _all_of(left(document, parameters), right(document, parameters))

    def negate(self, operand: Evaluator) -> Evaluator:
        def evaluate(document: Any, parameters: Mapping[str, Any]) -> Any:
            value = operand(document, parameters)
            return (not value) if isinstance(value, bool) else UNDEFINED

        return evaluate

    def comparison(self, left: Evaluator, operator: Token, right: Evaluator) -> Evaluator:
        return lambda document, parameters: _compare(
            str(operator), left(document, parameters), right(document, parameters)
        )

    def call(self, name: Token, *arguments: Evaluator) -> Evaluator:
        function = name.upper()
        if function == "IS_DEFINED" and len(arguments) == 1:
            (argument,) = arguments
            return lambda document, parameters: argument(document, parameters) is not UNDEFINED
        if function == "STARTSWITH" and len(arguments) in (2, 3):
            return lambda document, parameters: _startswith(*(a(document, parameters) for a in arguments))
        raise _unsupported(f"function {function} with {len(arguments)} argument(s)")

    def path(self, root: Token, *steps: Token) -> Evaluator:
        if root != self.alias:
            raise BadRequest(f"a path must start with the alias {self.alias!r}, found {str(root)!r}")
        keys = tuple(
            _decode_string(step) if step.type == "STRING" else int(step) if step.type == "INT" else str(step)
            for step in steps
        )
        return lambda document, _parameters: walk(document, keys)

    def PARAM(self, token: Token) -> Evaluator:  # noqa: N802
        self.parameters.add(str(token))
        return lambda _document, parameters: parameters[str(token)]

    def number(self, token: Token) -> Evaluator:
        return _constant(int(token) if re.fullmatch(r"-?\d+", token) else float(token))

    def string(self, token: Token) -> Evaluator:
        return _constant(_decode_string(token))

    def _keyword(self, token: Token) -> Evaluator:
        return _constant({"TRUE": True, "FALSE": False, "NULL": None}[token.upper()])

    TRUE = FALSE = NULL = _keyword  # lark calls a terminal's callback by the terminal's name

    def array(self, *items: Evaluator | None) -> Evaluator:
        return _constant([item(None, {}) for item in items if item is not None])

    def object(self, *members: Any) -> Evaluator:
        pairs = [member for member in members if member is not None]
        return _constant(
            {_decode_string(key): value(None, {}) for key, value in zip(pairs[::2], pairs[1::2], strict=True)}
        )


def _parse(text: str, start: str) -> ParsedQuery:
    try:
        tree = _PARSER.parse(text, start=start)
    except UnexpectedInput as error:
        position = max(error.pos_in_stream or 0, 0)
        unsupported = _UNSUPPORTED_KEYWORDS.search(_STRINGS.sub("''", text))
        if unsupported:
            raise _unsupported(unsupported.group(1).upper()) from error
        if isinstance(error, UnexpectedCharacters):
            raise _unsupported(f"character {text[position]!r} at position {position}") from error
        found = getattr(error, "token", None)
        where = "the query ended" if found is None or found.type == "$END" else f"found {str(found)!r}"
        raise BadRequest(f"malformed query at position {position}, {where}: {text!r}") from error
    from_clause = next(tree.find_data("from_clause"))
    try:
        parsed: ParsedQuery = _Compiler(text, str(from_clause.children[-1])).transform(tree)
    except VisitError as error:
        raise error.orig_exc from None
    return parsed


@lru_cache(maxsize=256)
def parse_query(sql: str) -> ParsedQuery:
    """Parse a query of the supported subset (``SUPPORTED_SQL``); ``BadRequest`` naming whatever is outside it.

    Keywords are case-insensitive; the alias is whatever follows FROM. Cached: a drain repeats a few queries.
    """
    return _parse(sql, "query")


@lru_cache(maxsize=256)
def parse_filter_predicate(predicate: str) -> ParsedQuery:
    """Parse a conditional-patch predicate, ``FROM c WHERE <expr>`` (literals only, no parameters)."""
    return _parse(predicate, "predicate")


def walk(value: Any, keys: tuple[str | int, ...]) -> Any:
    for key in keys:
        if isinstance(key, str) and isinstance(value, dict):
            value = value.get(key, UNDEFINED)
        elif isinstance(key, int) and isinstance(value, list) and key < len(value):
            value = value[key]
        else:
            return UNDEFINED
    return value


def _type_rank(value: Any) -> int:
    """Cosmos's cross-type order: undefined < null < boolean < number < string < array < object."""
    if value is UNDEFINED or value is None:
        return 0 if value is UNDEFINED else 1
    return next((rank for kind, rank in _RANKS if isinstance(value, kind)), 6)


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


def _all_of(left: Any, right: Any) -> Any:
    """Three-valued AND: false wins, then undefined."""
    if left is False or right is False:
        return False
    return True if left is True and right is True else UNDEFINED


def _any_of(left: Any, right: Any) -> Any:
    """Three-valued OR: true wins, then undefined."""
    if left is True or right is True:
        return True
    return False if left is False and right is False else UNDEFINED


def _startswith(text: Any, prefix: Any, ignore_case: Any = False) -> Any:
    if not isinstance(text, str) or not isinstance(prefix, str) or not isinstance(ignore_case, bool):
        return UNDEFINED
    if ignore_case:
        return text.casefold().startswith(prefix.casefold())
    return text.startswith(prefix)


def _order_key(value: Any) -> tuple[int, Any]:
    rank = _type_rank(value)
    if rank in (0, 1):
        return (rank, 0)
    if rank >= 5:
        return (rank, json.dumps(value, sort_keys=True))
    return (rank, value)


def normalise_parameters(parameters: Mapping[str, Any] | Sequence[Mapping[str, Any]] | None) -> dict[str, Any]:
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
        rows.sort(key=lambda document: _order_key(key(document, parameters)), reverse=descending)  # noqa: B023
    if parsed.top is not None:
        rows = rows[: parsed.top]
    return [len(rows)] if parsed.count else rows
