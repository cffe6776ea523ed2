"""The plugin API's shapes (``api.py`` mounts them): paging (page size, search text, continuation tokens), the
actions' request bodies, and the one error answer every endpoint gives, with the 4xx answers the OpenAPI schema
declares. Kept apart so the app module stays about routes and checks.
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Sequence
from typing import Any

from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict, Field

from airflow_chatter.airflow.sources import BrokenSource
from airflow_chatter.errors import ChatterError, ConfigurationError
from airflow_chatter.operations.interventions import MAX_REQUEUE
from airflow_chatter.operations.monitoring import MAX_PAGE_SIZE
from airflow_chatter.ports import ContainerError, RequestTimeout, ServiceUnavailable, Throttled

# ------------------------------------------------------------------------------------------------
# Paging.
# ------------------------------------------------------------------------------------------------


class InvalidQueryError(ConfigurationError):
    """A bad list request (page size, continuation, search text); names the field, and the API answers 400."""


def valid_page_size(value: object, *, default: int = 25, cap: int = MAX_PAGE_SIZE) -> int:
    """A list request's page size: an integer from 1 to ``cap``; ``InvalidQueryError`` naming ``page_size``."""
    if value is None or value == "":
        return default
    try:
        number = int(str(value))
    except ValueError:
        raise InvalidQueryError("page_size", value, "must be an integer") from None
    if not 1 <= number <= cap:
        raise InvalidQueryError("page_size", value, f"must be between 1 and {cap}")
    return number


def search_text(value: str | None) -> str | None:
    """A MessageId prefix to search for, 1-1023 characters; ``InvalidQueryError`` naming ``message_id``."""
    if value is not None and (not value.strip() or len(value) > 1023):
        raise InvalidQueryError("message_id", value, "must be 1-1023 characters")
    return value


def encode_continuation(after_id: str) -> str:
    """An opaque continuation for the next page: the last item id shown, base64url JSON."""
    raw = json.dumps({"v": 1, "after": after_id}, separators=(",", ":")).encode()
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode("ascii")


def decode_continuation(token: str | None) -> str | None:
    """The item id a continuation resumes after; ``InvalidQueryError`` naming ``continuation`` if malformed."""
    if token is None or token == "":
        return None
    try:
        padded = token + "=" * (-len(token) % 4)
        data = json.loads(base64.urlsafe_b64decode(padded.encode("ascii")))
    except (ValueError, binascii.Error, UnicodeError):
        raise InvalidQueryError("continuation", token, "is not a continuation this API returned") from None
    after = data.get("after") if isinstance(data, dict) else None
    if not isinstance(data, dict) or data.get("v") != 1 or not isinstance(after, str) or not after:
        raise InvalidQueryError("continuation", token, "is not a continuation this API returned")
    return after


# ------------------------------------------------------------------------------------------------
# Request bodies.
# ------------------------------------------------------------------------------------------------


class SelectedDocument(BaseModel):
    model_config = ConfigDict(extra="forbid")

    id: str = Field(min_length=1, max_length=1023, description="The outbox item id.")
    etag: str = Field(
        min_length=1, max_length=200, description="The ETag the page showed (required): the requeue is conditional."
    )


class RequeueBody(BaseModel):
    model_config = ConfigDict(extra="forbid")

    documents: list[SelectedDocument] = Field(min_length=1, max_length=MAX_REQUEUE)


class ReleaseBody(BaseModel):
    model_config = ConfigDict(extra="forbid")

    etag: str = Field(
        min_length=1,
        max_length=200,
        description="The lease ETag the page showed (required): the release is conditional.",
    )


class BackfillBody(BaseModel):
    """The ``chatter_backfill`` DAG's params (validated by Airflow against the DAG's ``Param`` schema): ``start`` is
    ``beginning``, ``resume`` or a UTC timestamp; a dry run unless ``dry_run`` is false, as the DAG's own default. A
    start in the future or unknown feed ranges are refused by ``backfill_check`` before the run is created."""

    model_config = ConfigDict(extra="forbid")

    start: str = "beginning"
    feed_ranges: list[str] = Field(default_factory=list, max_length=100)
    document_budget: int = 10000
    dry_run: bool = True


# ------------------------------------------------------------------------------------------------
# Errors.
# ------------------------------------------------------------------------------------------------


class NotAuthorized(Exception):
    """Raised by a backend: ``status`` 401 (who are you?) or 403 (not allowed)."""

    def __init__(self, status: int, detail: str) -> None:
        self.status = status
        self.detail = detail
        super().__init__(detail)


class ParamsRejected(ChatterError):
    """Airflow refused the run's params (its own validation); the message says which and why."""


class Problem(BaseModel):
    """Every error answer of the API: what is wrong and, when one field is to blame, its name."""

    detail: str
    field: str | None = None
    errors: list[dict[str, Any]] | None = Field(None, description="A 422's every problem (loc, msg, type).")


#: Longest piece of a caller's input an error answer echoes back.
MAX_ECHO = 200


def error_answer(description: str) -> dict[str, Any]:
    """One error answer as the OpenAPI schema declares it: a ``Problem`` body, and what it means here."""
    return {"model": Problem, "description": description}


#: The error answers every ``/api`` endpoint may give, declared in the OpenAPI schema.
READ_ERRORS: dict[int | str, dict[str, Any]] = {
    400: error_answer("A bad query parameter, named in `field`."),
    401: error_answer("Not authenticated."),
    403: error_answer("No permission on the source's DAG."),
    404: error_answer("No such source (or it is broken: `field` names the problem)."),
    422: error_answer("The request does not validate; `field` names the first problem."),
    502: error_answer("Cosmos DB answered an error; its status is named, its text is logged."),
    503: error_answer("Cosmos DB is throttling (429) or unavailable: retry after the `Retry-After` seconds."),
}
ACTION_ERRORS: dict[int | str, dict[str, Any]] = {
    **READ_ERRORS,
    400: error_answer("A missing or malformed Idempotency-Key, or params Airflow refused."),
    409: error_answer("Changed since shown, or a request with this key still in progress."),
    413: error_answer("The request body is too large for the idempotency guard."),
    422: error_answer("The body does not validate, or the Idempotency-Key was used with another."),
    503: error_answer(
        "Cosmos DB is throttling (429) or unavailable (retry after `Retry-After` seconds), or the "
        "source's idempotency container cannot keep keys."
    ),
}


def echo(value: Any) -> Any:
    """A caller's input as an error may echo it: strings cut to ``MAX_ECHO`` characters, containers dropped."""
    if isinstance(value, str):
        return value if len(value) <= MAX_ECHO else value[:MAX_ECHO] + "…"
    return value if isinstance(value, int | float | bool) or value is None else None


def problem(
    status: int,
    detail: str,
    field: str | None = None,
    headers: dict[str, str] | None = None,
    errors: list[dict[str, Any]] | None = None,
) -> JSONResponse:
    body: dict[str, Any] = {"detail": detail}
    if field is not None:
        body["field"] = field
    if errors is not None:
        body["errors"] = errors
    return JSONResponse(body, status_code=status, headers=headers)


#: ``Retry-After`` for a 429 that names no retry-after, and for a 503/408 from Cosmos DB, in seconds.
DEFAULT_RETRY_AFTER_SECONDS = 1


def store_problem(error: ContainerError, source: str | None) -> JSONResponse:
    """A Cosmos DB error during a request, in the API's one shape: a 429 (``Throttled``, which the project's clients
    no longer retry, F-11) and a 503/408 answer 503 with ``Retry-After``; any other status 502. The answer names the
    status and the source, never the service's text (it is logged, at WARNING, by the caller)."""
    where = f" for source {echo(source)!r}" if source else ""
    if isinstance(error, Throttled):
        seconds = error.retry_after_seconds
        detail = f"Cosmos DB is throttling requests{where} (429 request rate too large): retry in {seconds} s"
        return problem(503, detail, headers={"Retry-After": str(seconds)})
    if isinstance(error, ServiceUnavailable | RequestTimeout):
        detail = f"Cosmos DB is unavailable{where} ({error.status_code}): retry in {DEFAULT_RETRY_AFTER_SECONDS} s"
        return problem(503, detail, headers={"Retry-After": str(DEFAULT_RETRY_AFTER_SECONDS)})
    return problem(502, f"Cosmos DB answered {error.status_code} ({type(error).__name__}){where}")


def broken_entry(entry: BrokenSource) -> dict[str, Any]:
    """A broken sources entry as the API lists it: its name, DAG id and each problem as ``field``/``message``."""
    problems = []
    for problem in entry.problems:
        where, sep, message = problem.partition(": ")
        problems.append({"field": where, "message": message} if sep else {"field": None, "message": problem})
    return {"index": entry.index, "name": entry.name, "dag_id": entry.dag_id, "problems": problems}


def validation_problem(raw: Sequence[Any]) -> JSONResponse:
    """FastAPI's 422 (its ``errors()``) in the API's one shape, the input it echoes cut short (never a
    20,000-character body); ``field`` is the first problem's name without "body"/"query" and list indexes."""
    errors = [
        {"loc": list(e.get("loc", ())), "msg": e.get("msg"), "type": e.get("type"), "input": echo(e.get("input"))}
        for e in raw
    ]
    first = errors[0] if errors else {"loc": [], "msg": "invalid request"}
    loc = first["loc"]
    # A body that is no JSON at all is located at ("body", <character offset>): the field is the body.
    names = [str(part) for part in loc[1:] if not isinstance(part, int)] or [str(p) for p in loc[:1]]
    return problem(422, f"{'.'.join(str(p) for p in loc)}: {first['msg']}", names[-1] if names else None, errors=errors)
