"""Keep the Azure SDK's per-request HTTP logging out of task and trigger logs unless a source asks for it.

azure-core's ``HttpLoggingPolicy`` and azure-cosmos's ``CosmosHttpLoggingPolicy`` log the URL and headers of every
request and response at INFO: in a live deployment that was 737 KB of a 753 KB drain log, burying the one summary
line. Every client the project builds (``adapters/cosmos/client.py``) hands the SDK the logger
``airflow_chatter.cosmos.sdk_http``, which is WARNING from the start, so the trigger, the api-server's plugin and
the CLI are quiet too without any block around them. A source's ``cosmos_http_logging: true`` turns the lines back
on for its tasks and triggers (e.g. to debug a connection).
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager

#: The Azure SDK's HTTP logging policies log every request's and response's headers at INFO: 98 % of a drain's log.
COSMOS_HTTP_LOGGERS = (
    "azure.core.pipeline.policies.http_logging_policy",
    "azure.cosmos",
    "azure.cosmos._cosmos_http_logging_policy",
)


@contextmanager
def quiet_cosmos_http_logging(enabled: bool = False) -> Iterator[None]:
    """Raise the SDK's HTTP loggers to WARNING for the block (unless ``enabled``); their levels are restored."""
    if enabled:
        from airflow_chatter.adapters.cosmos.client import SDK_HTTP_LOGGER

        sdk_http = logging.getLogger(SDK_HTTP_LOGGER)
        level = sdk_http.level
        sdk_http.setLevel(logging.INFO)
        try:
            yield
        finally:
            sdk_http.setLevel(level)
        return
    loggers = [logging.getLogger(name) for name in COSMOS_HTTP_LOGGERS]
    saved = [logger.level for logger in loggers]
    for logger in loggers:
        logger.setLevel(max(logger.getEffectiveLevel(), logging.WARNING))
    try:
        yield
    finally:
        for logger, level in zip(loggers, saved, strict=True):
            logger.setLevel(level)
