"""Coercion of operator arguments and connection extras: one parser per type, for every module of the layer.

A templated operator argument arrives as a string (``"{{ params.dry_run }}"`` renders to ``"True"``), a
connection extra as whatever JSON or the UI form stored. Each helper converts with pydantic's lax mode (the same
rules for every caller: ``true/false``, ``yes/no``, ``on/off``, ``1/0`` in any case for booleans) and raises
``ConfigurationError`` naming the option, so a bad value fails at the first point it is read, with its name.

``None``, ``""`` and ``"None"`` (what a missing param renders to) mean "not given" and yield the default.
This module does not import Airflow, so hooks, operators and the DAG factory can share it.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any, TypeVar

from pydantic import TypeAdapter, ValidationError

from airflow_chatter.errors import ConfigurationError

T = TypeVar("T")

_BOOL: TypeAdapter[bool] = TypeAdapter(bool)
_INT: TypeAdapter[int] = TypeAdapter(int)
_FLOAT: TypeAdapter[float] = TypeAdapter(float)
_DATETIME: TypeAdapter[datetime] = TypeAdapter(datetime)
_STRINGS: TypeAdapter[list[str]] = TypeAdapter(list[str])


def is_unset(value: Any) -> bool:
    """``None``, blank, or the text a ``None`` param renders to."""
    return value is None or (isinstance(value, str) and value.strip() in {"", "None", "none", "null"})


def _coerce(adapter: TypeAdapter[T], value: Any, option: str, reason: str) -> T:
    try:
        return adapter.validate_python(value.strip() if isinstance(value, str) else value)
    except ValidationError:
        raise ConfigurationError(option, value, reason) from None


def as_bool(value: Any, option: str, *, default: bool = False) -> bool:
    """The one boolean parser of the Airflow layer (operators, sensor, hooks' extras)."""
    if is_unset(value):
        return default
    return _coerce(_BOOL, value, option, "must be true or false")


def as_int(value: Any, option: str, *, minimum: int = 1) -> int:
    number = _coerce(_INT, value, option, "must be an integer")
    if number < minimum:
        raise ConfigurationError(option, value, f"must be at least {minimum}")
    return number


def as_float(value: Any, option: str) -> float:
    number = _coerce(_FLOAT, value, option, "must be a number of seconds")
    if not number > 0:
        raise ConfigurationError(option, value, "must be positive")
    return number


def as_datetime(value: Any, option: str) -> datetime | None:
    """Unset or ``beginning`` → ``None``; otherwise an ISO 8601 timestamp (naive means UTC)."""
    if is_unset(value) or (isinstance(value, str) and value.strip().lower() == "beginning"):
        return None
    if not isinstance(value, (str, datetime)):
        raise ConfigurationError(option, value, "must be an ISO 8601 timestamp such as 2026-01-31T00:00:00Z")
    parsed = _coerce(_DATETIME, value, option, "must be an ISO 8601 timestamp such as 2026-01-31T00:00:00Z")
    return parsed if parsed.tzinfo is not None else parsed.replace(tzinfo=UTC)


def as_list(value: Any, option: str) -> list[str]:
    """A list of strings from a list, a JSON list rendered to text, or a comma-separated string."""
    if is_unset(value):
        return []
    if isinstance(value, str):
        text = value.strip()
        if not text.startswith("["):
            return [part.strip() for part in text.split(",") if part.strip()]
        try:
            value = json.loads(text)
        except ValueError:
            raise ConfigurationError(option, value, "is not a JSON list") from None
    if isinstance(value, (str, bytes)) or not isinstance(value, (list, tuple)):
        raise ConfigurationError(option, value, "must be a list of strings")
    return [v for v in _coerce(_STRINGS, list(value), option, "must be a list of strings") if v]
