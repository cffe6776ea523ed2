"""Keep connection secrets out of messages: Airflow masks logs, but an exception text is ours to clean."""

from __future__ import annotations

from collections.abc import Iterable

REDACTED = "***"


def scrub(text: str, secrets: Iterable[str | None]) -> str:
    """Replace every occurrence of each non-empty secret in ``text`` with ``***``."""
    for secret in sorted((s for s in secrets if s), key=len, reverse=True):
        text = text.replace(secret, REDACTED)
    return text


def mask(*secrets: str | None) -> None:
    """Register secrets with Airflow's log masker (task and supervisor processes)."""
    from airflow.sdk.log import mask_secret

    for secret in secrets:
        if secret:
            mask_secret(secret)
