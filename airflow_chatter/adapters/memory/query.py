"""The SQL subset the in-memory container runs, with Cosmos's undefined-value semantics.

The grammar (``lark``, LALR) is the subset's definition; :func:`_parse` checks what a grammar cannot say (the
alias, the functions, the projection) and :func:`_evaluate` interprets the tree per document. Whatever the subset
lacks is a ``BadRequest`` naming it, so a test that needs more fails loudly rather than getting an answer the
service would not give.
"""

from __future__ import annotations

import json
import operator
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from lark import Lark, Token, Tree
from lark.exceptions import UnexpectedCharacters, UnexpectedInput

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
projection: "*"                                  -> select_all
          | "VALUE"i "COUNT"i "(" expression ")" -> select_count
          | "VALUE"i? expression                 -> select_other
from_clause: "FROM"i NAME NAME?
?where: "WHERE"i expression
order_by: "ORDER"i "BY"i order_item ("," order_item)*
order_item: path (ASC | DESC)?

?expression: conjunction | expression "OR"i conjunction -> any_of
?conjunction: negation | conjunction "AND"i negation   -> all_of
?negation: "NOT"i negation -> negate | comparison
?comparison: operand (COMPARATOR operand)?
?operand: "(" expression ")" | path | PARAM | call | literal
call: NAME "(" expression ("," expression)* ")"
path: NAME step*
?step: "." NAME | "[" (STRING | INT) "]"
?literal: NUMBER | STRING | TRUE | FALSE | NULL
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
_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", "b": "\b", "f": "\f"}
_FUNCTIONS = {("IS_DEFINED", 1), ("STARTSWITH", 2), ("STARTSWITH", 3)}
_KEYWORDS = {"TRUE": True, "FALSE": False, "NULL": None}
_ORDERINGS = {"<": operator.lt, "<=": operator.le, ">": operator.gt, ">=": operator.ge}
_RANKS: tuple[tuple[type | tuple[type, ...], int], ...] = ((bool, 2), ((int, float), 3), (str, 4), (list, 5))


class _Undefined:
    """Cosmos's *undefined*: a missing property, or an ill-typed comparison. Never equal to anything."""

    def __repr__(self) -> str:
        return "undefined"


UNDEFINED: Any = _Undefined()

Node = Tree[Token] | Token


@dataclass(frozen=True)
class ParsedQuery:
    """A query of the subset: ``SELECT [TOP n] *`` or ``SELECT VALUE COUNT(1)``, a filter and an order."""

    where: Node | None
    order_by: tuple[tuple[Node, bool], ...]  # (path, descending)
    count: bool
    top: int | None
    parameters: frozenset[str]


def _unsupported(what: str) -> BadRequest:
    return BadRequest(f"{what} is not supported by the in-memory SQL subset ({SUPPORTED_SQL})")


def _tree(node: Node | None) -> Tree[Token]:
    assert isinstance(node, Tree), node  # the grammar puts a rule here
    return node


def _parse(text: str, start: str) -> ParsedQuery:
    """Parse, then check what the grammar leaves open: the alias of every path, the functions, the projection."""
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
        seen = "the query ended" if found is None or found.type == "$END" else f"found {str(found)!r}"
        raise BadRequest(f"malformed query at position {position}, {seen}: {text!r}") from error
    alias = str(next(tree.find_data("from_clause")).children[-1])  # FROM root r: r is the alias
    for path in tree.find_data("path"):
        if path.children[0] != alias:
            raise BadRequest(f"a path must start with the alias {alias!r}, found {str(path.children[0])!r}")
    for call in tree.find_data("call"):
        name, arity = str(call.children[0]).upper(), len(call.children) - 1
        if (name, arity) not in _FUNCTIONS:
            raise _unsupported(f"function {name} with {arity} argument(s)")
    parameters = frozenset(str(v) for v in tree.scan_values(lambda v: isinstance(v, Token) and v.type == "PARAM"))
    if start == "predicate":
        return ParsedQuery(tree.children[1], (), False, None, parameters)
    top, projection, _, where, order_by = tree.children
    projection = _tree(projection)
    selected = text[projection.meta.start_pos : projection.meta.end_pos]
    if projection.data == "select_other":
        raise _unsupported(f"projection {selected!r}")
    count = projection.data == "select_count"
    if count and not re.fullmatch(r"VALUE\s+COUNT\s*\(\s*1\s*\)", selected, re.IGNORECASE):
        raise _unsupported(f"SELECT {selected}")
    if count and order_by is not None:
        raise _unsupported("ORDER BY with SELECT VALUE COUNT(1)")
    items = [_tree(item).children for item in _tree(order_by).children] if order_by is not None else []
    orders = tuple((item[0], str(item[-1]).upper() == "DESC") for item in items)
    return ParsedQuery(where, orders, count, None if top is None else int(str(top)), parameters)


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


def _decode_string(text: str) -> str:
    return _ESCAPE.sub(lambda m: chr(int(m[1][1:], 16)) if len(m[1]) == 5 else _ESCAPES.get(m[1], m[1]), text[1:-1])


def _evaluate(node: Node, document: Any, parameters: Mapping[str, Any]) -> Any:
    """The value of an expression for one document: a JSON value, or ``UNDEFINED``."""
    if isinstance(node, Token):
        if node.type == "PARAM":
            return parameters[str(node)]
        if node.type == "STRING":
            return _decode_string(node)
        if node.type == "NUMBER":
            return int(node) if re.fullmatch(r"-?\d+", node) else float(node)
        return _KEYWORDS[node.upper()]
    children = [child for child in node.children if child is not None]
    if node.data == "path":
        return walk(document, tuple(_step(key) for key in children[1:]))
    if node.data == "call":
        name, arguments = str(children[0]).upper(), [_evaluate(a, document, parameters) for a in children[1:]]
        return arguments[0] is not UNDEFINED if name == "IS_DEFINED" else _startswith(*arguments)
    if node.data == "comparison":
        left, symbol, right = children
        return _compare(str(symbol), _evaluate(left, document, parameters), _evaluate(right, document, parameters))
    values = [_evaluate(child, document, parameters) for child in children]
    if node.data == "any_of":  # three-valued OR: true wins, then undefined
        return True if any(v is True for v in values) else False if all(v is False for v in values) else UNDEFINED
    if node.data == "all_of":  # three-valued AND: false wins, then undefined
        return False if any(v is False for v in values) else True if all(v is True for v in values) else UNDEFINED
    if node.data == "negate":
        return (not values[0]) if isinstance(values[0], bool) else UNDEFINED
    if node.data == "array":
        return values
    return dict(zip(values[::2], values[1::2], strict=True))  # object: keys and values alternate


def _step(key: Node) -> str | int:
    assert isinstance(key, Token)
    return _decode_string(key) if key.type == "STRING" else int(key) if key.type == "INT" else str(key)


def walk(value: Any, keys: tuple[str | int, ...]) -> Any:
    """Follow property names and array indices into a JSON value; ``UNDEFINED`` where one is missing."""
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


def _compare(symbol: str, left: Any, right: Any) -> Any:
    """Compare two values; *undefined* when either is undefined or their types differ (Cosmos semantics)."""
    rank = _type_rank(left)
    if rank == 0 or rank != _type_rank(right):
        return UNDEFINED
    if symbol in ("=", "!=", "<>"):
        return _json_equal(left, right) is (symbol == "=")
    if rank >= 5:
        return UNDEFINED
    return symbol in ("<=", ">=") if rank == 1 else _ORDERINGS[symbol](left, right)


def _startswith(text: Any, prefix: Any, ignore_case: Any = False) -> Any:
    if not isinstance(text, str) or not isinstance(prefix, str) or not isinstance(ignore_case, bool):
        return UNDEFINED
    return text.casefold().startswith(prefix.casefold()) if ignore_case else text.startswith(prefix)


def _order_key(value: Any) -> tuple[int, Any]:
    rank = _type_rank(value)
    if rank in (0, 1):
        return (rank, 0)
    return (rank, json.dumps(value, sort_keys=True) if rank >= 5 else value)


def normalise_parameters(parameters: Mapping[str, Any] | Sequence[Mapping[str, Any]] | None) -> dict[str, Any]:
    """Accept ``{"@name": value}`` (``@`` optional) or the SDK's ``[{"name": "@name", "value": value}]``."""
    if parameters is None:
        return {}
    pairs = parameters.items() if isinstance(parameters, Mapping) else [(p["name"], p["value"]) for p in parameters]
    return {name if name.startswith("@") else f"@{name}": value for name, value in pairs}


def run_query(parsed: ParsedQuery, documents: Sequence[Document], parameters: Mapping[str, Any]) -> list[Any]:
    """Evaluate a parsed query over documents: filter, order, TOP, or COUNT."""
    missing = parsed.parameters - parameters.keys()
    if missing:
        raise BadRequest(f"query parameter(s) {sorted(missing)} were not supplied")
    where = parsed.where
    rows = [d for d in documents if where is None or _evaluate(where, d, parameters) is True]
    for key, descending in reversed(parsed.order_by):  # stable sorts, last key first
        rows.sort(key=lambda document: _order_key(_evaluate(key, document, parameters)), reverse=descending)  # noqa: B023
    if parsed.top is not None:
        rows = rows[: parsed.top]
    return [len(rows)] if parsed.count else rows
