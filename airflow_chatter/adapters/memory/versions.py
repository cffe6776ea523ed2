"""The in-memory container's stored state: immutable document versions, and the transaction one operation sees."""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import Any

from airflow_chatter.adapters.memory.ranges import PartitionKeyValue
from airflow_chatter.ports import Document

#: An item's address: (canonical partition-key JSON, id).
ItemKey = tuple[str, str]


@dataclass(frozen=True)
class StoredVersion:
    """One stored document version. Never mutated: a write stores a new one."""

    document: Document  # the body with _rid, _etag and _ts, without _lsn
    key: PartitionKeyValue
    lsn: int
    expires_at: int | None  # _ts + effective ttl; None when it never expires

    def alive_at(self, now: float) -> bool:
        # INVARIANT: expired means clock() >= _ts + ttl (test_a_document_is_readable_until_the_instant_ts_plus_ttl);
        # comparing with > would keep a document readable for one extra instant.
        return self.expires_at is None or now < self.expires_at

    def copy(self, **extra: Any) -> Document:
        """A caller's copy: mutating it never changes the container, nor the reverse."""
        return {**copy.deepcopy(self.document), **extra}


@dataclass
class Transaction:
    """The items as one operation (or one batch) sees them. Its writes share one ``_lsn`` and ``_ts``, as a
    transactional batch's do on the service, and land only on commit: a failed one is dropped, whole."""

    items: dict[ItemKey, StoredVersion]
    lsn: int
    now: float
    #: The versions this transaction wrote (``None``: deleted), in write order.
    writes: dict[ItemKey, StoredVersion | None] = field(default_factory=dict)

    def get(self, key: ItemKey) -> StoredVersion | None:
        stored = self.writes[key] if key in self.writes else self.items.get(key)
        return stored if stored is not None and stored.alive_at(self.now) else None
