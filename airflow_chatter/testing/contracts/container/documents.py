"""Point operations: create, read, replace, upsert, delete, ETags, patch, properties and TTL."""

from __future__ import annotations

import pytest

from airflow_chatter.ports import BadRequest, Conflict, NotFound, PatchOperation, PreconditionFailed
from airflow_chatter.testing.contracts.container.base import MAX_PATCH_OPERATIONS, ContainerContractBase, feed_ids


class DocumentContracts(ContainerContractBase):
    # ----------------------------------------------------------------------------------------------------------
    # Create and read.
    # ----------------------------------------------------------------------------------------------------------

    def test_create_returns_the_document_with_system_properties(self) -> None:
        container = self.make_container()
        created = container.create(self._doc(item_id="a", n=1), "p")
        assert created["id"] == "a" and created["n"] == 1, "the body comes back as written"
        assert isinstance(created["_etag"], str) and created["_etag"], "every document carries an opaque ETag"
        assert isinstance(created["_ts"], int), "_ts is whole seconds since the epoch"

    def test_create_rejects_duplicate_id_in_same_partition_with_409(self) -> None:
        container = self.make_container()
        container.create(self._doc(item_id="a", n=1), "p")
        with pytest.raises(Conflict) as caught:
            container.create(self._doc(item_id="a", n=2), "p")
        assert caught.value.status_code == 409
        assert container.read("a", "p")["n"] == 1, "a rejected create must not overwrite the original"

    def test_create_allows_the_same_id_in_another_partition(self) -> None:
        container = self.make_container()
        container.create(self._doc("p1", "a", n=1), "p1")
        container.create(self._doc("p2", "a", n=2), "p2")
        assert container.read("a", "p1")["n"] == 1, "an id is unique per partition key only"
        assert container.read("a", "p2")["n"] == 2

    def test_create_rejects_a_document_whose_partition_key_differs_from_the_argument_with_400(self) -> None:
        """Real Cosmos DB answers 400 ("PartitionKey extracted from document doesn't match")."""
        container = self.make_container()
        with pytest.raises(BadRequest):
            container.create(self._doc("p1", "a"), "p2")

    def test_read_returns_what_was_created(self) -> None:
        container = self.make_container()
        created = container.create(self._doc(item_id="a", nested={"x": [1, 2]}), "p")
        read = container.read("a", "p")
        assert read["nested"] == {"x": [1, 2]}
        assert read["_etag"] == created["_etag"], "a read does not change the ETag"

    def test_read_of_a_missing_id_raises_404(self) -> None:
        container = self.make_container()
        with pytest.raises(NotFound) as caught:
            container.read("missing", "p")
        assert caught.value.status_code == 404

    def test_read_with_the_wrong_partition_key_raises_404(self) -> None:
        container = self.make_container()
        container.create(self._doc("p1", "a"), "p1")
        with pytest.raises(NotFound):
            container.read("a", "p2")

    def test_returned_documents_are_copies_the_caller_may_mutate(self) -> None:
        container = self.make_container()
        created = container.create(self._doc(item_id="a", tags=["x"]), "p")
        created["tags"].append("mutated")
        read = container.read("a", "p")
        read["tags"].append("mutated")
        assert container.read("a", "p")["tags"] == ["x"], "only a write changes a stored document"

    # ----------------------------------------------------------------------------------------------------------
    # Replace, upsert, delete and ETags.
    # ----------------------------------------------------------------------------------------------------------

    def test_every_write_changes_the_etag(self) -> None:
        container = self.make_container()
        etags = [container.create(self._doc(item_id="a", n=0), "p")["_etag"]]
        etags.append(container.replace("a", "p", self._doc(item_id="a", n=1))["_etag"])
        etags.append(container.upsert(self._doc(item_id="a", n=2), "p")["_etag"])
        etags.append(container.patch("a", "p", [PatchOperation("set", "/n", 3)])["_etag"])
        assert len(set(etags)) == len(etags), "an unchanged ETag would let a stale writer win"

    def test_replace_with_the_current_etag_succeeds(self) -> None:
        container = self.make_container()
        created = container.create(self._doc(item_id="a", n=0), "p")
        replaced = container.replace("a", "p", self._doc(item_id="a", n=1), if_match=created["_etag"])
        assert replaced["n"] == 1 and container.read("a", "p")["n"] == 1

    def test_replace_with_a_stale_etag_raises_412_and_keeps_the_document(self) -> None:
        container = self.make_container()
        stale = container.create(self._doc(item_id="a", n=0), "p")["_etag"]
        container.replace("a", "p", self._doc(item_id="a", n=1))
        with pytest.raises(PreconditionFailed) as caught:
            container.replace("a", "p", self._doc(item_id="a", n=2), if_match=stale)
        assert caught.value.status_code == 412
        assert container.read("a", "p")["n"] == 1, "a refused replace writes nothing"

    def test_replace_of_a_missing_document_raises_404(self) -> None:
        container = self.make_container()
        with pytest.raises(NotFound):
            container.replace("a", "p", self._doc(item_id="a"))

    def test_upsert_creates_then_replaces(self) -> None:
        container = self.make_container()
        container.upsert(self._doc(item_id="a", n=1), "p")
        assert container.read("a", "p")["n"] == 1, "upsert of a new id creates it"
        container.upsert(self._doc(item_id="a", n=2), "p")
        assert container.read("a", "p")["n"] == 2, "upsert of an existing id replaces it"

    def test_upsert_with_a_stale_etag_raises_412_and_current_etag_works(self) -> None:
        container = self.make_container()
        stale = container.create(self._doc(item_id="a", n=0), "p")["_etag"]
        current = container.upsert(self._doc(item_id="a", n=1), "p")["_etag"]
        with pytest.raises(PreconditionFailed):
            container.upsert(self._doc(item_id="a", n=2), "p", if_match=stale)
        container.upsert(self._doc(item_id="a", n=3), "p", if_match=current)
        assert container.read("a", "p")["n"] == 3

    def test_delete_with_a_stale_etag_raises_412_and_keeps_the_document(self) -> None:
        container = self.make_container()
        stale = container.create(self._doc(item_id="a", n=0), "p")["_etag"]
        container.patch("a", "p", [PatchOperation("set", "/n", 1)])
        with pytest.raises(PreconditionFailed):
            container.delete("a", "p", if_match=stale)
        assert container.read("a", "p")["n"] == 1, "a refused delete deletes nothing"

    def test_delete_with_the_current_etag_removes_the_document(self) -> None:
        container = self.make_container()
        current = container.create(self._doc(item_id="a"), "p")["_etag"]
        container.delete("a", "p", if_match=current)
        with pytest.raises(NotFound):
            container.read("a", "p")

    def test_delete_of_a_missing_document_raises_404(self) -> None:
        container = self.make_container()
        with pytest.raises(NotFound):
            container.delete("a", "p")

    def test_create_after_delete_reuses_the_id(self) -> None:
        container = self.make_container()
        container.create(self._doc(item_id="a", n=1), "p")
        container.delete("a", "p")
        container.create(self._doc(item_id="a", n=2), "p")
        assert container.read("a", "p")["n"] == 2

    # ----------------------------------------------------------------------------------------------------------
    # Patch.
    # ----------------------------------------------------------------------------------------------------------

    def test_patch_set_adds_and_overwrites_fields_including_nested_paths(self) -> None:
        container = self.make_container()
        container.create(self._doc(item_id="a", status="pending", meta={"attempts": 0}), "p")
        patched = container.patch(
            "a",
            "p",
            [
                PatchOperation("set", "/status", "delivered"),
                PatchOperation("set", "/meta/attempts", 1),
                PatchOperation("set", "/meta/receipt", {"offset": 7}),
                PatchOperation("set", "/new", True),
            ],
        )
        assert patched["status"] == "delivered" and patched["new"] is True
        assert patched["meta"] == {"attempts": 1, "receipt": {"offset": 7}}
        assert container.read("a", "p") == patched, "the returned document is what was stored"

    def test_patch_replace_overwrites_an_existing_field(self) -> None:
        container = self.make_container()
        container.create(self._doc(item_id="a", status="pending"), "p")
        patched = container.patch("a", "p", [PatchOperation("replace", "/status", "delivered")])
        assert patched["status"] == "delivered"

    def test_patch_replace_of_an_absent_path_raises_400(self) -> None:
        container = self.make_container()
        container.create(self._doc(item_id="a"), "p")
        with pytest.raises(BadRequest):
            container.patch("a", "p", [PatchOperation("replace", "/absent", 1)])

    def test_patch_add_appends_with_dash_and_inserts_at_an_index(self) -> None:
        container = self.make_container()
        container.create(self._doc(item_id="a", tags=["b"]), "p")
        patched = container.patch(
            "a",
            "p",
            [
                PatchOperation("add", "/tags/-", "c"),
                PatchOperation("add", "/tags/0", "a"),
                PatchOperation("add", "/extra", {"k": 1}),
            ],
        )
        assert patched["tags"] == ["a", "b", "c"], "'-' appends; an index inserts before that element"
        assert patched["extra"] == {"k": 1}, "add on an object member creates it"

    def test_patch_remove_deletes_a_field(self) -> None:
        container = self.make_container()
        container.create(self._doc(item_id="a", gone=1, tags=["x", "y"]), "p")
        patched = container.patch("a", "p", [PatchOperation("remove", "/gone"), PatchOperation("remove", "/tags/0")])
        assert "gone" not in patched and patched["tags"] == ["y"]

    def test_patch_remove_of_an_absent_path_raises_400(self) -> None:
        container = self.make_container()
        container.create(self._doc(item_id="a"), "p")
        with pytest.raises(BadRequest):
            container.patch("a", "p", [PatchOperation("remove", "/absent")])

    def test_patch_incr_increments_and_creates_a_missing_counter(self) -> None:
        container = self.make_container()
        container.create(self._doc(item_id="a", attempts=2), "p")
        patched = container.patch(
            "a", "p", [PatchOperation("incr", "/attempts", 1), PatchOperation("incr", "/fresh", 5)]
        )
        assert patched["attempts"] == 3 and patched["fresh"] == 5

    def test_patch_applies_all_operations_or_none(self) -> None:
        container = self.make_container()
        container.create(self._doc(item_id="a", n=0), "p")
        with pytest.raises(BadRequest):
            container.patch("a", "p", [PatchOperation("set", "/n", 1), PatchOperation("replace", "/absent", 1)])
        assert container.read("a", "p")["n"] == 0, "a failed patch must not leave its first operation applied"

    def test_patch_with_more_than_ten_operations_raises_400(self) -> None:
        container = self.make_container()
        container.create(self._doc(item_id="a"), "p")
        operations = [PatchOperation("set", f"/f{i}", i) for i in range(MAX_PATCH_OPERATIONS + 1)]
        with pytest.raises(BadRequest):
            container.patch("a", "p", operations)
        container.patch("a", "p", operations[:MAX_PATCH_OPERATIONS])  # exactly ten is allowed

    def test_patch_with_a_stale_etag_raises_412_and_current_etag_works(self) -> None:
        container = self.make_container()
        stale = container.create(self._doc(item_id="a", n=0), "p")["_etag"]
        current = container.patch("a", "p", [PatchOperation("set", "/n", 1)])["_etag"]
        with pytest.raises(PreconditionFailed):
            container.patch("a", "p", [PatchOperation("set", "/n", 2)], if_match=stale)
        container.patch("a", "p", [PatchOperation("set", "/n", 3)], if_match=current)
        assert container.read("a", "p")["n"] == 3

    def test_patch_with_a_true_filter_predicate_applies(self) -> None:
        container = self.make_container()
        container.create(self._doc(item_id="a", status="pending"), "p")
        patched = container.patch(
            "a",
            "p",
            [PatchOperation("set", "/status", "delivered")],
            filter_predicate="FROM c WHERE c.status = 'pending'",
        )
        assert patched["status"] == "delivered"

    def test_patch_with_a_false_filter_predicate_raises_412_and_changes_nothing(self) -> None:
        container = self.make_container()
        etag = container.create(self._doc(item_id="a", status="delivered"), "p")["_etag"]
        with pytest.raises(PreconditionFailed) as caught:
            container.patch(
                "a",
                "p",
                [PatchOperation("set", "/status", "pending")],
                filter_predicate="from c where c.status = 'pending'",
            )
        assert caught.value.status_code == 412
        assert container.read("a", "p")["_etag"] == etag, "a refused conditional patch writes nothing"

    def test_patch_of_a_missing_document_raises_404(self) -> None:
        container = self.make_container()
        with pytest.raises(NotFound):
            container.patch("a", "p", [PatchOperation("set", "/n", 1)])

    # ----------------------------------------------------------------------------------------------------------
    # Properties.
    # ----------------------------------------------------------------------------------------------------------

    @pytest.mark.parametrize("default_ttl", [None, -1, 3600])
    def test_properties_report_partition_key_paths_and_default_ttl(self, default_ttl: int | None) -> None:
        container = self.make_container(partition_key_paths=("/pk",), default_ttl=default_ttl)
        properties = container.properties()
        assert properties.partition_key_paths == ("/pk",)
        assert properties.default_ttl == default_ttl
        assert properties.container_id and properties.database_id and properties.account_endpoint

    def test_properties_report_hierarchical_partition_key_paths(self) -> None:
        container = self.make_container(partition_key_paths=("/tenant", "/user"))
        assert container.properties().partition_key_paths == ("/tenant", "/user")

    # ----------------------------------------------------------------------------------------------------------
    # Time to live.
    # ----------------------------------------------------------------------------------------------------------

    def test_document_expires_after_the_container_default_ttl(self) -> None:
        container = self.make_container(default_ttl=1)
        container.create(self._doc("p", "a"), "p")
        self._wait_until_expired(container, "a", "p", 1)

    def test_item_ttl_overrides_the_container_default(self) -> None:
        container = self.make_container(default_ttl=3600)
        container.create(self._doc("p", "short", ttl=1), "p")
        container.create(self._doc("p", "control"), "p")
        self._wait_until_expired(container, "short", "p", 1)
        assert container.read("control", "p"), "the control follows the hour-long default"

    def test_item_ttl_minus_one_never_expires(self) -> None:
        container = self.make_container(default_ttl=1)
        container.create(self._doc("p", "forever", ttl=-1), "p")
        container.create(self._doc("p", "barrier"), "p")
        self._wait_until_expired(container, "barrier", "p", 1)
        assert container.read("forever", "p"), "ttl -1 outlives the default that expired the barrier"

    def test_patched_ttl_starts_expiry(self) -> None:
        container = self.make_container(default_ttl=-1)
        container.create(self._doc("p", "a"), "p")
        container.create(self._doc("p", "control"), "p")
        container.patch("a", "p", [PatchOperation("set", "/ttl", 1)])
        self._wait_until_expired(container, "a", "p", 1)
        assert container.read("control", "p"), "no ttl under default -1 never expires"

    def test_item_ttl_is_ignored_when_container_ttl_is_off(self) -> None:
        container = self.make_container(default_ttl=None)
        container.create(self._doc("p", "a", ttl=1), "p")
        self.let_time_pass(3)
        assert container.read("a", "p")["ttl"] == 1, "without a container defaultTtl, item ttl means nothing"

    def test_expired_documents_vanish_from_queries_and_the_change_feed(self) -> None:
        container = self.make_container(default_ttl=-1)
        container.create(self._doc("p", "expiring", ttl=1), "p")
        container.create(self._doc("p", "control"), "p")
        self._wait_until_expired(container, "expiring", "p", 1)
        assert feed_ids(list(container.query("SELECT * FROM c"))) == ["control"]
        assert self._drain(container).ids == ["control"], "expiries do not appear in latest-version mode"
        container.create(self._doc("p", "expiring"), "p")  # the id is free again
