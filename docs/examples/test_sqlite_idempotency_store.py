"""Run the idempotency conformance suite against your own store: here, a small store over SQLite.

    .venv/bin/python -m pytest docs/examples/test_sqlite_idempotency_store.py -q

The store follows the same two principles as the Cosmos store, in SQL: a key is granted only by an atomic write
(an INSERT that the primary key refuses for a second caller, or an UPDATE conditional on the version that was
read), and expiry is decided from the stored times against the injected clock.
"""

from __future__ import annotations

import json
import sqlite3
import uuid
from collections.abc import Iterator
from contextlib import closing, contextmanager
from datetime import UTC, datetime
from pathlib import Path

import pytest

from airflow_chatter.clock import Clock
from airflow_chatter.idempotency import IdempotencyOptions, Reserved, StoredResponse
from airflow_chatter.idempotency.decision import Entry, Takeover, decide
from airflow_chatter.ports import IdempotencyStore
from airflow_chatter.ports.idempotency import ReservationOutcome
from airflow_chatter.testing.contracts.idempotency import IdempotencyStoreContract

SCHEMA = """CREATE TABLE IF NOT EXISTS idempotency (
    scope TEXT NOT NULL, key TEXT NOT NULL, version INTEGER NOT NULL, fingerprint TEXT NOT NULL,
    reservation_id TEXT, reserved_at REAL NOT NULL, completed_at REAL,
    status INTEGER, headers TEXT, body BLOB, PRIMARY KEY (scope, key))"""


def _time(value: float | None) -> datetime | None:
    return None if value is None else datetime.fromtimestamp(value, UTC)


class SqliteIdempotencyStore(IdempotencyStore):
    def __init__(self, path: Path, options: IdempotencyOptions, clock: Clock) -> None:
        self.path, self.options, self._clock = path, options, clock
        with self._db() as db:
            db.execute(SCHEMA)

    @contextmanager
    def _db(self) -> Iterator[sqlite3.Connection]:
        # One connection per call, autocommit: each statement is its own atomic transaction.
        with closing(sqlite3.connect(self.path, timeout=30, isolation_level=None)) as db:
            yield db

    def reserve(self, scope: str, key: str, fingerprint: str) -> ReservationOutcome:
        self.validate(scope, key, "fingerprint", fingerprint)
        with self._db() as db:
            for _ in range(8):
                now, reservation_id = self._clock(), uuid.uuid4().hex
                try:
                    db.execute(
                        "INSERT INTO idempotency (scope, key, version, fingerprint, reservation_id, reserved_at)"
                        " VALUES (?, ?, 1, ?, ?, ?)",
                        (scope, key, fingerprint, reservation_id, now.timestamp()),
                    )
                    return Reserved(reservation_id)
                except sqlite3.IntegrityError:
                    pass  # the key exists: classify what is there
                row = db.execute(
                    "SELECT version, fingerprint, reservation_id, reserved_at, completed_at, status, headers, body"
                    " FROM idempotency WHERE scope = ? AND key = ?",
                    (scope, key),
                ).fetchone()
                if row is None:
                    continue
                version, stored_fp, held_by, reserved_at, completed_at, status, headers, body = row
                response = None
                if completed_at is not None:
                    response = StoredResponse(status, json.loads(headers), body, stored_fp)
                entry = Entry(stored_fp, _time(reserved_at), held_by, _time(completed_at), response)  # type: ignore[arg-type]
                decision = decide(entry, fingerprint, now, self.options)
                if not isinstance(decision, Takeover):
                    return decision
                taken = db.execute(  # compare-and-set on the version read: the SQL ETag
                    "UPDATE idempotency SET version = version + 1, fingerprint = ?, reservation_id = ?,"
                    " reserved_at = ?, completed_at = NULL, status = NULL, headers = NULL, body = NULL"
                    " WHERE scope = ? AND key = ? AND version = ?",
                    (fingerprint, reservation_id, now.timestamp(), scope, key, version),
                )
                if taken.rowcount == 1:
                    return Reserved(reservation_id)
        raise RuntimeError(f"reserve in scope {scope!r} lost 8 races")

    def complete(self, scope: str, key: str, reservation_id: str, response: StoredResponse) -> None:
        self.validate(scope, key, "reservation_id", reservation_id)
        with self._db() as db:
            db.execute(
                "UPDATE idempotency SET version = version + 1, reservation_id = NULL, completed_at = ?,"
                " status = ?, headers = ?, body = ?"
                " WHERE scope = ? AND key = ? AND reservation_id = ? AND completed_at IS NULL",
                (
                    self._clock().timestamp(),
                    response.status_code,
                    json.dumps({name: list(values) for name, values in response.headers.items()}),
                    response.body,
                    scope,
                    key,
                    reservation_id,
                ),
            )

    def abandon(self, scope: str, key: str, reservation_id: str) -> None:
        self.validate(scope, key, "reservation_id", reservation_id)
        with self._db() as db:
            db.execute(
                "DELETE FROM idempotency WHERE scope = ? AND key = ? AND reservation_id = ? AND completed_at IS NULL",
                (scope, key, reservation_id),
            )


class TestSqliteIdempotencyStore(IdempotencyStoreContract):
    @pytest.fixture(autouse=True)
    def _database(self, tmp_path: Path) -> None:
        self._path = tmp_path / "idempotency.sqlite"

    def make_store(self, clock: Clock) -> IdempotencyStore:
        return SqliteIdempotencyStore(self._path, self.options, clock)
