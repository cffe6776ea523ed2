"""Error translation: the only place an azure-cosmos / azure-core exception is looked at.

Every call of ``CosmosDocumentContainer`` runs inside :func:`translated_errors`, where an SDK exception becomes the
port's :class:`~airflow_chatter.ports.ContainerError` subclass for its status. A response without a message (the
emulator answers a missing database with ``404 {"message":""}``) gets one naming its status, so no error reads blank.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Callable, Iterator, Mapping

from azure.core.exceptions import (
    AzureError,
    HttpResponseError,
    ServiceRequestError,
    ServiceRequestTimeoutError,
    ServiceResponseError,
    ServiceResponseTimeoutError,
)
from azure.cosmos import exceptions

from airflow_chatter.ports import (
    BadRequest,
    BatchFailed,
    Conflict,
    ContainerError,
    FeedRangeGone,
    NotFound,
    PreconditionFailed,
    RequestTimeout,
    ServiceUnavailable,
    Throttled,
)

__all__ = ["translate_error", "translated_errors"]

#: A response body with nothing to say: the emulator's ``{"message":""}`` (as the SDK's message's last line).
_BLANK_BODY = re.compile(r'(Message: )?(\{\s*"message"\s*:\s*""\s*\})?')
_STATUS_LINE = re.compile(r"^Status code: \d+\s*")
_REASONS = {400: "Bad Request", 404: "Not Found", 409: "Conflict", 410: "Gone", 412: "Precondition Failed"}

_STATUS_ERRORS: dict[int, type[ContainerError]] = {
    400: BadRequest,
    404: NotFound,
    408: RequestTimeout,
    409: Conflict,
    410: FeedRangeGone,
    412: PreconditionFailed,
    503: ServiceUnavailable,
}


def _retry_after_ms(headers: Mapping[str, str] | None) -> int | None:
    if not headers:
        return None
    for name in ("x-ms-retry-after-ms", "retry-after-ms"):
        value = headers.get(name)
        if value is not None:
            try:
                return int(float(value))
            except ValueError:
                return None
    return None


def _message(error: HttpResponseError, status: int, where: str | None = None) -> str:
    """The SDK's message, or the status in words when it has none (the emulator answers 404 ``{"message":""}``).

    ``where`` names the container and database the request went to: a blank 404 is what a missing container or
    database answers, and "404 with no message" alone left a user guessing which one was meant.
    """
    text = str(error.message or "").strip()
    said = _STATUS_LINE.sub("", text).strip()  # azure-cosmos prefixes "Status code: 404" to the body
    if said and not _BLANK_BODY.fullmatch(said):
        return text
    reason = getattr(getattr(error, "response", None), "reason", None) or _REASONS.get(status, "error")
    target = f" for {where}" if where else ""
    hint = " (does the container exist in that database?)" if status == 404 and where else ""
    return f"Cosmos DB answered {status} {reason} with no message{target}{hint}"


def translate_error(error: BaseException, where: str | None = None) -> ContainerError | None:
    """Return the port error for an SDK exception, or ``None`` when it is not an SDK error.

    ``where`` (e.g. "container 'c' in database 'd'") completes a message the service left blank."""
    if isinstance(error, exceptions.CosmosBatchOperationError):
        statuses = [int(r.get("statusCode", 424)) for r in (error.operation_responses or [])]
        status = int(error.status_code or (statuses[error.error_index] if statuses else 500))
        return BatchFailed(
            str(error.message or error),
            failed_index=int(error.error_index),
            status_code=status,
            operation_statuses=statuses,
        )
    if isinstance(error, exceptions.CosmosHttpResponseError | HttpResponseError):
        status = int(error.status_code or 500)
        message = _message(error, status, where)
        if status == 429:
            return Throttled(message, retry_after_ms=_retry_after_ms(getattr(error, "headers", None)))
        cls = _STATUS_ERRORS.get(status)
        return cls(message) if cls else ContainerError(message, status_code=status)
    timeouts = exceptions.CosmosClientTimeoutError | ServiceRequestTimeoutError | ServiceResponseTimeoutError
    if isinstance(error, timeouts):
        return RequestTimeout(str(error))
    if isinstance(error, ServiceRequestError | ServiceResponseError):
        return ServiceUnavailable(str(error))
    if isinstance(error, AzureError):
        return ContainerError(str(error))
    return None


@contextlib.contextmanager
def translated_errors(where: Callable[[], str | None] | None = None) -> Iterator[None]:
    """Re-raise azure-cosmos / azure-core exceptions as the port's ``ContainerError`` subclasses.

    ``where`` is asked, only on an error, which container and database the request went to."""
    try:
        yield
    except ContainerError:
        raise
    except Exception as error:
        translated = translate_error(error, where() if where is not None else None)
        if translated is None:
            raise
        raise translated from error
