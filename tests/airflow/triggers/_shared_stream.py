"""A stand-in for the triggerer's loop around Airflow's real ``SharedStreamManager``: it runs event triggers the way
``TriggerRunner.run_trigger`` does (subscribe, ``filter_shared_stream``, bind each event right after it came out),
and persists events only when the test says so (``persist``), as the supervisor's confirmation would."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any

import pytest
from airflow.triggers.base import BaseEventTrigger
from airflow.triggers.shared_stream import SharedStreamManager


@dataclass
class Fired:
    trigger_id: int
    payload: dict[str, Any]
    seq: int | None


@dataclass
class Triggerer:
    """One triggerer process: a manager and the tasks of the triggers it runs."""

    ack_timeout: float = 30.0
    manager: SharedStreamManager = field(init=False)
    fired: list[Fired] = field(default_factory=list)
    tasks: list[asyncio.Task[None]] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.manager = SharedStreamManager(ack_timeout=self.ack_timeout)

    def start(self, trigger_id: int, trigger: BaseEventTrigger) -> None:
        async def run() -> None:
            key = trigger.shared_stream_key()
            stream = self.manager.subscribe(trigger_id=trigger_id, trigger=trigger, key=key)
            try:
                async for event in trigger.filter_shared_stream(stream):
                    seq = self.manager.bind_pending_event(trigger_id=trigger_id, key=key)
                    self.fired.append(Fired(trigger_id, dict(event.payload), seq))
            finally:
                await self.manager.unsubscribe(trigger_id, key)

        self.tasks.append(asyncio.create_task(run()))

    def persist(self) -> None:
        """The supervisor stored every event fired so far: confirm them, as the next state sync does."""
        self.manager.confirm_persisted([f.seq for f in self.fired if f.seq is not None])

    async def kill(self) -> None:
        """The process ends: nothing more is confirmed, nothing is stored on the way out."""
        for task in self.tasks:
            task.cancel()
        await asyncio.gather(*self.tasks, return_exceptions=True)
        await self.manager.stop_all()


async def until(condition: Callable[[], Any], what: str, timeout_s: float = 10.0) -> Any:
    """Poll ``condition`` on the event loop until it is truthy, at most ``timeout_s`` seconds."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        await asyncio.sleep(0.005)
    raise AssertionError(f"timed out waiting for {what}")


def quick_polls(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    """Make the producer's pauses between polls a tick and record each one (one per poll): the poll count without
    waiting out real intervals."""
    from airflow_chatter.airflow.triggers import _shared as shared

    pauses: list[float] = []

    async def pause(seconds: float) -> None:
        pauses.append(seconds)
        await asyncio.sleep(0.001)

    monkeypatch.setattr(shared, "asyncio", SimpleNamespace(sleep=pause, to_thread=asyncio.to_thread, Lock=asyncio.Lock))
    return pauses
