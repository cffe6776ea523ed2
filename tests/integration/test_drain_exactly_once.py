"""Exactly-once drains against the real broker (in-memory containers): one transaction per page, recovery of a page
committed but not stamped, a fenced drain that stops, a split parent's committed page finished before its children
publish, and the refusal of a missing checkpoint topic. Every claim is read back from Kafka with a read_committed
consumer, up to a barrier document drained last."""

from __future__ import annotations

import uuid
from collections import Counter
from collections.abc import Iterator
from typing import Any

import pytest

from airflow_chatter.adapters.kafka.admin import CHECKPOINT_TOPIC_CONFIGS, ensure_topics
from airflow_chatter.adapters.kafka.publisher import KafkaPublisher
from airflow_chatter.adapters.kafka.settings import KafkaSettings
from airflow_chatter.drain.exactly_once import transactional_id
from airflow_chatter.drain.follow import Follow
from airflow_chatter.drain.telemetry import FENCED, RECOVERED_PAGES, TRANSACTIONS
from airflow_chatter.outbox.document import MESSAGE_ID_FIELD
from airflow_chatter.ports import ServiceUnavailable
from tests.fixtures.kafka import consume_records
from tests.unit.drain._drain_support import Rig, clear_faults, fail_stamp, outbox_doc, split
from tests.unit.drain._follow_script import Script

pytestmark = pytest.mark.kafka


@pytest.fixture
def kafka(kafka_bootstrap: str) -> Iterator[dict[str, Any]]:
    settings = KafkaSettings(bootstrap_servers=kafka_bootstrap, client_id="chatter-test-eo-drain", max_block_ms=15_000)
    run = uuid.uuid4().hex[:10]
    topic, checkpoints = f"chatter-test.eo.{run}", f"chatter-test.eo-checkpoints.{run}"
    ensure_topics(settings, [topic], partitions=3)
    ensure_topics(settings, [checkpoints], partitions=3, configs=CHECKPOINT_TOPIC_CONFIGS)
    publisher = KafkaPublisher(settings)
    yield {"settings": settings, "topic": topic, "checkpoints": checkpoints, "publisher": publisher}
    publisher.close()


def _rig(kafka: dict[str, Any]) -> Rig:
    rig = Rig()
    rig.publisher = kafka["publisher"]
    return rig


def _eo(rig: Rig, kafka: dict[str, Any], **kwargs: Any) -> Any:
    kwargs.setdefault("max_batch_size", 4)
    return rig.engine(guarantee="exactly_once", checkpoint_topic=kafka["checkpoints"], **kwargs)


def _docs(kafka: dict[str, Any], tag: str, count: int) -> list[Any]:
    return [outbox_doc(f"{tag}-{i}", f"t{i % 3}", destination=kafka["topic"]) for i in range(count)]


def _seen(kafka: dict[str, Any], rig: Rig, **engine: Any) -> Counter[str]:
    """Every message id a read_committed consumer reads, up to a barrier document drained last (so absence and
    duplicates are judged only after everything before the barrier was committed)."""
    barrier = f"barrier-{uuid.uuid4().hex[:6]}"
    rig.seed(outbox_doc(barrier, "t0", destination=kafka["topic"]))
    for summary in _eo(rig, kafka, **engine).drain_all():
        summary.raise_for_error()
    seen: Counter[str] = Counter()
    bootstrap = kafka["settings"].servers
    for _ in range(20):
        records = consume_records(bootstrap, kafka["topic"], 1, timeout_s=10, isolation_level="read_committed")
        seen = Counter(dict(r.headers)["message-id"].decode() for r in records)
        if barrier in seen:
            break
    assert seen.pop(barrier, 0) == 1, "the barrier arrived once"
    return seen


def test_an_exactly_once_drain_commits_one_transaction_per_page_and_stamps_every_document(
    kafka: dict[str, Any],
) -> None:
    rig = _rig(kafka)
    docs = rig.seed(*_docs(kafka, "m", 10))

    summary = rig.drain(_eo(rig, kafka))

    assert summary.error is None, summary.error
    assert (summary.guarantee, summary.published, summary.delivered) == ("exactly_once", 10, 10)
    assert summary.transactions_committed == 3, "pages of 4, 4 and 2 documents; the empty last page commits none"
    assert all(rig.current(d)["status"] == "delivered" for d in docs)
    assert rig.metrics.counter(TRANSACTIONS, chatter__messaging__outbox__drain__outcome="committed") == 3
    assert _seen(kafka, rig) == Counter({d[MESSAGE_ID_FIELD]: 1 for d in docs})


def test_a_page_committed_but_not_stamped_is_stamped_by_recovery_and_never_republished(
    kafka: dict[str, Any],
) -> None:
    """The stamp after the commit fails (a 503 on one document's stamp, injected in the container): a Confirmation
    Failure as before, but the next drain finds the committed page ahead of the lease, stamps it and moves the lease
    on without publishing it again."""
    rig = _rig(kafka)
    docs = rig.seed(*_docs(kafka, "r", 4))
    fail_stamp(rig.monitored, docs[2]["id"], ServiceUnavailable("injected after the commit", status_code=503))

    first = rig.drain(_eo(rig, kafka))

    assert isinstance(first.error, ServiceUnavailable) and first.confirmation_failures == 1
    assert first.transactions_committed == 1 and rig.current(docs[2])["status"] == "pending"
    clear_faults(rig.monitored)

    second = rig.drain(_eo(rig, kafka))

    assert second.error is None, second.error
    assert (second.recovered_pages, second.published) == (1, 0), "recovered, and nothing published again"
    assert all(rig.current(d)["status"] == "delivered" for d in docs)
    assert rig.metrics.counter(RECOVERED_PAGES) == 1
    assert "guarantee=exactly_once transactions=0/0 recovered_pages=1 fenced=False" in second.log_line()
    assert _seen(kafka, rig) == Counter({d[MESSAGE_ID_FIELD]: 1 for d in docs}), "each message once for read_committed"


def test_an_at_least_once_drain_republishes_the_same_page_after_the_same_fault(kafka: dict[str, Any]) -> None:
    """The negative control of the recovery test: at least once (the default), the page goes out again."""
    rig = _rig(kafka)
    docs = rig.seed(*_docs(kafka, "a", 4))
    fail_stamp(rig.monitored, docs[0]["id"], ServiceUnavailable("injected after the publish", status_code=503))
    assert rig.drain(rig.engine(max_batch_size=4)).confirmation_failures == 1
    clear_faults(rig.monitored)

    again = rig.drain(rig.engine(max_batch_size=4))

    assert again.published == 1, "the document whose stamp failed goes out again (the others' stamps landed, F-10)"
    assert _seen(kafka, rig) == Counter({d[MESSAGE_ID_FIELD]: 2 if d is docs[0] else 1 for d in docs})


def test_a_fenced_drain_stops_at_once_stamps_nothing_more_and_says_so(kafka: dict[str, Any]) -> None:
    """A takeover opens the lease's transactional id while this drain's page is open: its commit is refused
    (ProducerFenced), nothing of the page is visible or stamped, and the summary says it was fenced."""
    rig = _rig(kafka)
    docs = rig.seed(*_docs(kafka, "f", 8))
    engine = _eo(rig, kafka, additional_pending_filter=lambda doc: taken_over(doc))
    identity = engine.source_identity
    rivals: list[Any] = []

    def taken_over(doc: Any) -> bool:
        if doc[MESSAGE_ID_FIELD] == "f-5" and not rivals:
            lease_id = rig.lease(engine).id
            rivals.append(
                kafka["publisher"].lease_transactions(transactional_id(identity, lease_id), kafka["checkpoints"])
            )
        return True

    summary = rig.drain(engine)

    assert summary.fenced and summary.error_type == "ProducerFenced", summary.log_line()
    assert summary.delivered == 4, "the first page only: nothing of the fenced page is stamped"
    assert [rig.current(d)["status"] for d in docs[4:]] == ["pending"] * 4
    assert rig.metrics.counter(FENCED) == 1
    rivals[0].close()
    assert _seen(kafka, rig, additional_pending_filter=None) == Counter({d[MESSAGE_ID_FIELD]: 1 for d in docs})


def test_a_split_parents_committed_page_is_finished_before_its_children_publish(kafka: dict[str, Any]) -> None:
    rig = _rig(kafka)
    docs = rig.seed(*_docs(kafka, "s", 4))
    fail_stamp(rig.monitored, docs[1]["id"], ServiceUnavailable("injected after the commit", status_code=503))
    engine = _eo(rig, kafka)
    assert rig.drain(engine).transactions_committed == 1
    clear_faults(rig.monitored)
    parent = rig.lease(engine)
    split(rig.monitored, parent.feed_range)

    summaries = _eo(rig, kafka).drain_all()

    assert [s.error for s in summaries if s.error] == []
    assert sum(s.recovered_pages for s in summaries) >= 1 and sum(s.published for s in summaries) == 0
    assert all(rig.current(d)["status"] == "delivered" for d in docs)
    assert _seen(kafka, rig) == Counter({d[MESSAGE_ID_FIELD]: 1 for d in docs})


def test_a_missing_checkpoint_topic_refuses_the_drain_at_start_with_nothing_published(kafka: dict[str, Any]) -> None:
    rig = _rig(kafka)
    docs = rig.seed(*_docs(kafka, "x", 3))

    summary = rig.drain(rig.engine(guarantee="exactly_once", checkpoint_topic=f"chatter-test.none.{uuid.uuid4().hex}"))

    assert summary.error_type == "ConfigurationError" and "checkpoint_topic" in (summary.error_message or "")
    assert (summary.published, summary.pages) == (0, 0)
    assert all(rig.current(d)["status"] == "pending" for d in docs)


def test_f_16_a_following_exactly_once_drain_commits_the_writes_that_arrive_while_it_follows_once_each(
    kafka: dict[str, Any],
) -> None:
    """Follow mode in exactly-once: writes arriving between polls go out in transactions of their own pages, each
    once for a read_committed consumer; a following run whose stamp fails after the commit leaves the page to the
    next following run, which recovers it and publishes nothing of it again."""
    rig = _rig(kafka)
    first_docs = rig.seed(*_docs(kafka, "w0", 3))
    later, more = _docs(kafka, "w1", 4), _docs(kafka, "w2", 2)
    script = Script(
        lambda: rig.monitored.calls["read_change_feed"],
        rig.clock.advance,
        {2: lambda: rig.seed(*later), 4: lambda: rig.seed(*more)},
    )
    engine = _eo(rig, kafka)
    lease_id = engine.ensure_leases()[0].id

    following = engine.drain_lease(lease_id, max_documents=100, follow=script.follow(stop=lambda: script.waits >= 6))

    assert following.error is None, following.error
    assert (following.guarantee, following.published, following.delivered) == ("exactly_once", 9, 9)
    assert following.transactions_committed >= 3, "the first page and one per arrival"
    assert following.empty_polls >= 1, "it followed: polls found nothing between the arrivals"
    stalled = rig.seed(*_docs(kafka, "w3", 3))
    fail_stamp(rig.monitored, stalled[1]["id"], ServiceUnavailable("injected after the commit", status_code=503))
    broken = _eo(rig, kafka).drain_lease(lease_id, max_documents=3, follow=Follow(0.01))
    assert isinstance(broken.error, ServiceUnavailable) and broken.transactions_committed == 1
    clear_faults(rig.monitored)

    again = _eo(rig, kafka).drain_lease(lease_id, max_documents=1, follow=Follow(0.01), max_seconds=5)

    assert again.error is None, again.error
    assert (again.recovered_pages, again.published) == (1, 0), "recovered while following, nothing republished"
    every = [*first_docs, *later, *more, *stalled]
    assert all(rig.current(d)["status"] == "delivered" for d in every)
    assert _seen(kafka, rig) == Counter({d[MESSAGE_ID_FIELD]: 1 for d in every})
