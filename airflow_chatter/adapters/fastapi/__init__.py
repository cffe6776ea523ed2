"""The FastAPI adapter: serve a write endpoint at most once per ``Idempotency-Key`` (``idempotency``), over any
``IdempotencyStore``. The only package that imports FastAPI outside the Airflow plugin."""

from airflow_chatter.adapters.fastapi.idempotency import HttpIdempotencyOptions, Idempotency, problem

__all__ = ["HttpIdempotencyOptions", "Idempotency", "problem"]
