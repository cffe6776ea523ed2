"""How many records of a topic a consumer group has not committed yet: read-only, for watchers.

An event-driven receiver (``ChatterTopicBacklogTrigger``) must know whether there is work without taking any: it
neither joins the group (no rebalance of the group's real consumers) nor commits, it only compares each
partition's end offset with the group's committed offset (the partition's beginning when the group never
committed there).
"""

from __future__ import annotations

from typing import Any


def uncommitted_ranges(consumer: Any, topic: str) -> dict[int, tuple[int, int]]:
    """The offsets past ``consumer``'s group's committed offsets, per partition of ``topic`` with any: ``(first,
    end)``, the first uncommitted offset and the partition's end offset.

    ``consumer`` is a ``kafka.KafkaConsumer`` built with the group's ``group_id``, subscribed to nothing and with
    auto-commit off: ``committed`` reads the group's offsets without joining it.
    """
    from kafka import TopicPartition

    partitions = [TopicPartition(topic, p) for p in sorted(consumer.partitions_for_topic(topic) or ())]
    if not partitions:
        return {}
    ends = consumer.end_offsets(partitions)
    beginnings = consumer.beginning_offsets(partitions)
    ranges: dict[int, tuple[int, int]] = {}
    for tp in partitions:
        committed = consumer.committed(tp)
        start = beginnings[tp] if committed is None else max(committed, beginnings[tp])
        if ends[tp] > start:
            ranges[tp.partition] = (start, ends[tp])
    return ranges


__all__ = ["uncommitted_ranges"]
