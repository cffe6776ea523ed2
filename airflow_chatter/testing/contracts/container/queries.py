"""Parameterised queries, and hierarchical partition keys."""

from __future__ import annotations

from typing import Any

import pytest

from airflow_chatter.ports import (
    BadRequest,
    Conflict,
    Document,
    DocumentContainer,
    NotFound,
)
from airflow_chatter.testing.contracts.container.base import (
    ContainerContractBase,
    feed_ids,
)


class QueryContracts(ContainerContractBase):
    # ----------------------------------------------------------------------------------------------------------
    # Hierarchical partition keys.
    # ----------------------------------------------------------------------------------------------------------

    def _hierarchical_doc(self, tenant: str, user: str, item_id: str, **fields: Any) -> Document:
        document: Document = {"id": item_id, "tenant": tenant, "user": user}
        document.update(fields)
        return document

    def test_hierarchical_keys_allow_the_same_id_under_two_full_keys(self) -> None:
        container = self.make_container(partition_key_paths=("/tenant", "/user"))
        container.create(self._hierarchical_doc("t1", "u1", "a", n=1), ["t1", "u1"])
        container.create(self._hierarchical_doc("t1", "u2", "a", n=2), ["t1", "u2"])
        assert container.read("a", ["t1", "u1"])["n"] == 1, "identity is the full key, not its first level"
        assert container.read("a", ["t1", "u2"])["n"] == 2
        with pytest.raises(Conflict):
            container.create(self._hierarchical_doc("t1", "u1", "a"), ["t1", "u1"])

    def test_hierarchical_read_needs_the_full_key(self) -> None:
        container = self.make_container(partition_key_paths=("/tenant", "/user"))
        container.create(self._hierarchical_doc("t1", "u1", "a"), ["t1", "u1"])
        with pytest.raises(NotFound):
            container.read("a", ["t1", "u3"])

    def test_query_scoped_to_a_hierarchical_prefix_returns_every_full_key_under_it(self) -> None:
        self._require("supports_hierarchical_prefix_queries")
        container = self.make_container(partition_key_paths=("/tenant", "/user"))
        container.create(self._hierarchical_doc("t1", "u1", "a"), ["t1", "u1"])
        container.create(self._hierarchical_doc("t1", "u2", "b"), ["t1", "u2"])
        container.create(self._hierarchical_doc("t2", "u1", "c"), ["t2", "u1"])
        found = container.query("SELECT * FROM c", partition_key=["t1"])
        assert sorted(feed_ids(list(found))) == ["a", "b"]

    # ----------------------------------------------------------------------------------------------------------
    # Queries.
    # ----------------------------------------------------------------------------------------------------------

    def _seeded_container(self) -> DocumentContainer:
        """A new container holding the four documents every query contract reads (two partition keys)."""
        container = self.make_container()
        rows = [
            ("p1", "a", {"status": "pending", "n": 1, "meta": {"kind": "order"}}),
            ("p1", "b", {"status": "delivered", "n": 2, "meta": {"kind": "order"}}),
            ("p2", "c", {"status": "pending", "n": 3, "meta": {"kind": "invoice"}}),
            ("p2", "d", {"status": "pending", "n": 4}),
        ]
        for pk, item_id, fields in rows:
            container.create(self._doc(pk, item_id, **fields), pk)
        return container

    def _query_ids(self, container: DocumentContainer, sql: str, **kwargs: Any) -> list[str]:
        return feed_ids(list(container.query(sql, **kwargs)))

    def test_query_with_parameters_filters_documents(self) -> None:
        container = self._seeded_container()
        found = self._query_ids(
            container,
            "SELECT * FROM c WHERE c.status = @status AND c.n >= @n",
            parameters={"@status": "pending", "@n": 3},
        )
        assert sorted(found) == ["c", "d"]

    def test_query_scoped_to_a_partition_key_returns_only_that_partition(self) -> None:
        container = self._seeded_container()
        found = self._query_ids(
            container, "SELECT * FROM c WHERE c.status = @s", parameters={"@s": "pending"}, partition_key="p1"
        )
        assert found == ["a"], "c and d are pending too, but in p2"

    def test_query_order_by_sorts_ascending_and_descending(self) -> None:
        container = self._seeded_container()
        assert self._query_ids(container, "SELECT * FROM c ORDER BY c.n") == ["a", "b", "c", "d"]
        assert self._query_ids(container, "SELECT * FROM c ORDER BY c.n DESC") == ["d", "c", "b", "a"]
        by_ts = [document["_ts"] for document in container.query("SELECT * FROM c ORDER BY c._ts ASC")]
        assert by_ts == sorted(by_ts) and len(by_ts) == 4

    def test_query_count_returns_the_number_of_matching_documents(self) -> None:
        container = self._seeded_container()
        # The port types query rows as documents; a VALUE query yields bare values.
        count: list[Any] = list(
            container.query("SELECT VALUE COUNT(1) FROM c WHERE c.status = @s", parameters={"@s": "pending"})
        )
        assert count == [3]
        none: list[Any] = list(container.query("SELECT VALUE COUNT(1) FROM c WHERE c.n > 100"))
        assert none == [0], "COUNT answers 0, not an empty result"

    def test_query_is_defined_and_startswith(self) -> None:
        container = self._seeded_container()
        assert sorted(self._query_ids(container, "SELECT * FROM c WHERE IS_DEFINED(c.meta)")) == ["a", "b", "c"]
        assert self._query_ids(container, "SELECT * FROM c WHERE NOT IS_DEFINED(c.meta)") == ["d"]
        found = self._query_ids(
            container, "SELECT * FROM c WHERE STARTSWITH(c.meta.kind, @prefix)", parameters={"@prefix": "inv"}
        )
        assert found == ["c"]

    def test_query_boolean_logic_with_not_or_and_parentheses(self) -> None:
        container = self._seeded_container()
        found = self._query_ids(
            container,
            "SELECT * FROM c WHERE (c.n = 1 OR c.n = 4) AND NOT (c.status != 'pending') ORDER BY c.n",
        )
        assert found == ["a", "d"]
        assert self._query_ids(container, "SELECT * FROM c WHERE c.n <> 2 AND c.n < 3") == ["a"]

    def test_query_bracket_and_nested_paths(self) -> None:
        container = self._seeded_container()
        assert sorted(self._query_ids(container, "SELECT * FROM c WHERE c[\"meta\"].kind = 'order'")) == ["a", "b"]
        assert self._query_ids(container, "SELECT * FROM c WHERE c.meta[\"kind\"] = 'invoice'") == ["c"]

    def test_query_comparison_between_types_matches_nothing(self) -> None:
        container = self._seeded_container()
        assert self._query_ids(container, "SELECT * FROM c WHERE c.n = '1'") == [], "1 and '1' differ"
        assert self._query_ids(container, "SELECT * FROM c WHERE c.missing = null") == [], "undefined is not null"

    def test_query_does_not_return_deleted_documents(self) -> None:
        container = self._seeded_container()
        container.delete("a", "p1")
        assert "a" not in self._query_ids(container, "SELECT * FROM c")

    def test_query_with_a_syntax_error_raises_400(self) -> None:
        container = self.make_container()
        with pytest.raises(BadRequest):
            list(container.query("SELECT * FROM c WHERE"))
