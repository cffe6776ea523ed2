"""The transactional batch: all or nothing, statuses per operation, limits."""

from __future__ import annotations

import pytest

from airflow_chatter.ports import BadRequest, BatchFailed, BatchOperation, NotFound, PatchOperation
from airflow_chatter.testing.contracts.container.base import MAX_BATCH_OPERATIONS, ContainerContractBase


class BatchContracts(ContainerContractBase):
    # ----------------------------------------------------------------------------------------------------------
    # Transactional batch.
    # ----------------------------------------------------------------------------------------------------------

    def test_batch_runs_every_operation_kind_and_reports_their_statuses(self) -> None:
        container = self.make_container()
        for item_id in ("read-me", "replace-me", "upsert-me", "delete-me", "patch-me"):
            container.create(self._doc(item_id=item_id, n=0), "p")
        results = container.execute_batch(
            "p",
            [
                BatchOperation.create(self._doc(item_id="new", n=1)),
                BatchOperation.upsert(self._doc(item_id="upsert-new", n=1)),
                BatchOperation.upsert(self._doc(item_id="upsert-me", n=1)),
                BatchOperation.read("read-me"),
                BatchOperation.replace(self._doc(item_id="replace-me", n=1)),
                BatchOperation.delete("delete-me"),
                BatchOperation.patch("patch-me", [PatchOperation("incr", "/n", 1)]),
            ],
        )
        assert [r.status_code for r in results] == [201, 201, 200, 200, 200, 204, 200]
        assert results[3].body is not None and results[3].body["id"] == "read-me", "a read returns its body"
        for item_id in ("new", "upsert-new", "upsert-me", "replace-me", "patch-me"):
            assert container.read(item_id, "p")["n"] == 1, f"{item_id} was written by the batch"
        with pytest.raises(NotFound):
            container.read("delete-me", "p")

    def test_batch_is_all_or_nothing_when_an_operation_fails(self) -> None:
        container = self.make_container()
        container.create(self._doc(item_id="exists"), "p")
        operations = [
            BatchOperation.create(self._doc(item_id="first")),
            BatchOperation.create(self._doc(item_id="second")),
            BatchOperation.create(self._doc(item_id="exists")),
            BatchOperation.create(self._doc(item_id="fourth")),
        ]
        with pytest.raises(BatchFailed) as caught:
            container.execute_batch("p", operations)
        assert caught.value.failed_index == 2 and caught.value.status_code == 409
        assert caught.value.operation_statuses == (424, 424, 409, 424), "every other op is a failed dependency"
        for item_id in ("first", "second", "fourth"):
            with pytest.raises(NotFound):
                container.read(item_id, "p")  # nothing before or after the culprit was persisted

    def test_failed_batch_writes_nothing_to_the_change_feed(self) -> None:
        container = self.make_container()
        container.create(self._doc(item_id="exists"), "p")
        with pytest.raises(BatchFailed):
            container.execute_batch(
                "p",
                [
                    BatchOperation.create(self._doc(item_id="ghost")),
                    BatchOperation.create(self._doc(item_id="exists")),
                ],
            )
        assert self._drain(container).ids == ["exists"], "a rolled-back write must never reach the feed"

    def test_batch_reports_412_for_a_stale_etag_at_its_index(self) -> None:
        container = self.make_container()
        stale = container.create(self._doc(item_id="a", n=0), "p")["_etag"]
        container.patch("a", "p", [PatchOperation("set", "/n", 1)])
        with pytest.raises(BatchFailed) as caught:
            container.execute_batch(
                "p",
                [
                    BatchOperation.create(self._doc(item_id="b")),
                    BatchOperation.replace(self._doc(item_id="a", n=2), if_match=stale),
                ],
            )
        assert caught.value.failed_index == 1 and caught.value.status_code == 412
        assert caught.value.operation_statuses == (424, 412)
        assert container.read("a", "p")["n"] == 1

    def test_batch_patch_with_a_false_filter_fails_the_batch_with_412(self) -> None:
        container = self.make_container()
        container.create(self._doc(item_id="a", status="delivered"), "p")
        with pytest.raises(BatchFailed) as caught:
            container.execute_batch(
                "p",
                [
                    BatchOperation.patch(
                        "a",
                        [PatchOperation("set", "/status", "x")],
                        filter_predicate="FROM c WHERE c.status = 'pending'",
                    ),
                    BatchOperation.create(self._doc(item_id="b")),
                ],
            )
        assert caught.value.failed_index == 0 and caught.value.operation_statuses == (412, 424)
        assert container.read("a", "p")["status"] == "delivered"

    def test_batch_with_more_than_100_operations_raises_400(self) -> None:
        """The service refuses it; an adapter may refuse it client-side, as ``BadRequest`` or a 400 batch."""
        container = self.make_container()
        operations = [BatchOperation.create(self._doc(item_id=f"d{i}")) for i in range(MAX_BATCH_OPERATIONS + 1)]
        with pytest.raises((BadRequest, BatchFailed)) as caught:
            container.execute_batch("p", operations)
        assert caught.value.status_code == 400
        with pytest.raises(NotFound):
            container.read("d0", "p")
