"""A message its publisher rejects as unsendable (an illegal topic name, a field that does not encode) is stamped
``undeliverable`` and the lease advances past it (CTR-04), in both stamp modes (F-10).

Found by the fault suite (tests/reliability/fault_suite.py, scenario 7, docs/reliability.md): a fuzzed ``Destination``
of 300,000 characters passed the contract check, kafka-python refused the record, and the page failed closed on it
on every run, so the valid documents behind it were never published.
"""

from __future__ import annotations

import pytest

from airflow_chatter.ports import MessageRejected, PublishError
from airflow_chatter.testing.fakes import fail_topic

from ._drain_support import Rig, outbox_doc

MODES = ("batched", "sequential")


def published(rig: Rig) -> list[str]:
    return [dict(m.headers)["message-id"].decode() for m in rig.publisher.sent]


@pytest.mark.parametrize("stamp_mode", MODES)
def test_ctr_04_a_message_the_publisher_rejects_is_stamped_undeliverable_and_the_lease_advances(
    stamp_mode: str,
) -> None:
    rig = Rig()
    bad = "x" * 300
    docs = rig.seed(
        outbox_doc("m-1", "t1"),
        outbox_doc("m-2", "t2", destination=bad),
        outbox_doc("m-3", "t1"),
    )
    rig.publisher.handler = fail_topic(bad, MessageRejected(f"topic name {bad[:10]}... is illegal"))
    engine = rig.engine(stamp_mode=stamp_mode)

    summary = rig.drain(engine)

    summary.raise_for_error()
    assert [rig.current(d)["status"] for d in docs] == ["delivered", "undeliverable", "delivered"]
    assert "ttl" not in rig.current(docs[1]), "an undeliverable stamp carries no ttl (CTR-08)"
    assert published(rig) == ["m-1", "m-3"]
    assert summary.undeliverable == 1
    assert rig.lease(engine).continuation is not None, "the page is checkpointed past the rejected document"
    rig.publisher.handler = None
    again = rig.drain(engine)
    assert again.published == 0, "nothing is republished: the lease moved past all three"


@pytest.mark.parametrize("stamp_mode", MODES)
def test_rly_05_a_publish_failure_that_is_not_a_rejection_still_fails_the_page_closed(stamp_mode: str) -> None:
    rig = Rig()
    docs = rig.seed(outbox_doc("m-1", "t1"), outbox_doc("m-2", "t1", destination="down"))
    rig.publisher.handler = fail_topic("down", PublishError("broker unreachable"))
    engine = rig.engine(stamp_mode=stamp_mode)

    summary = rig.drain(engine)

    assert summary.failed
    assert rig.current(docs[1])["status"] == "pending", "a broker failure is never a verdict on the document"
    assert rig.lease(engine).continuation is None
