"""The fault proxy's request classification and rule matching (devkit.faultproxy).

The proxy decides per request which rule fires; these check the decisions without a socket. One request end to end
through the proxy is in tests/integration/test_faultproxy_cosmos.py.
"""

from __future__ import annotations

import pytest

from devkit.faultproxy import FaultRule, FaultRules, classify

DOCS = "/dbs/db/colls/outbox/docs"


@pytest.mark.parametrize(
    ("method", "path", "headers", "operation"),
    [
        ("GET", "/", {}, "account"),
        ("GET", "/dbs/db/colls/outbox", {}, "metadata"),
        ("GET", "/dbs/db/colls/outbox/pkranges", {"a-im": "Incremental Feed"}, "pkranges"),
        ("GET", DOCS, {"a-im": "Incremental Feed"}, "feed"),
        ("GET", DOCS, {}, "list"),
        ("GET", DOCS + "/outbox:abc", {}, "read"),
        ("POST", DOCS, {"x-ms-cosmos-is-batch-request": "True"}, "batch"),
        ("POST", DOCS, {"x-ms-documentdb-isquery": "True"}, "query"),
        ("POST", DOCS, {"content-type": "application/query+json"}, "query"),
        ("POST", DOCS, {"x-ms-documentdb-is-upsert": "True"}, "upsert"),
        ("POST", DOCS, {}, "create"),
        ("PATCH", DOCS + "/outbox:abc", {}, "patch"),
        ("PUT", DOCS + "/outbox:abc", {}, "replace"),
        ("DELETE", DOCS + "/outbox:abc", {}, "delete"),
    ],
)
def test_a_request_is_classified_by_method_path_and_headers(
    method: str, path: str, headers: dict[str, str], operation: str
) -> None:
    assert classify(method, path, headers) == operation


def test_write_matches_every_document_write_of_the_named_container_only() -> None:
    rule = FaultRule(operations=("write",), container="leases")
    for operation in ("create", "upsert", "replace", "patch", "delete", "batch"):
        assert rule.matches(operation, "POST", "/dbs/db/colls/leases/docs")
    assert not rule.matches("read", "GET", "/dbs/db/colls/leases/docs/x")
    assert not rule.matches("patch", "PATCH", "/dbs/db/colls/outbox/docs/x"), "another container"


def test_methods_and_path_pattern_narrow_a_rule() -> None:
    rule = FaultRule(methods=("patch",), path_pattern=r"/docs/outbox:")
    assert rule.matches("patch", "PATCH", DOCS + "/outbox:abc")
    assert not rule.matches("patch", "PATCH", DOCS + "/order-1")
    assert not rule.matches("read", "GET", DOCS + "/outbox:abc")


def test_a_rule_with_a_count_fires_that_many_times_then_lets_requests_through() -> None:
    rules = FaultRules([FaultRule(status=429, operations=("feed",), count=2, retry_after_ms=10)])
    fired = [rules.pick("feed", "GET", DOCS) for _ in range(4)]
    assert [r is not None for r in fired] == [True, True, False, False]
    snapshot = rules.snapshot()
    assert snapshot["rules"][0]["hits"] == 2
    assert snapshot["seen"] == {"feed": 4}


def test_the_first_matching_rule_wins_and_a_non_matching_operation_is_untouched() -> None:
    lost = FaultRule(action="lost_ack", operations=("batch",))
    unavailable = FaultRule(status=503, operations=("batch", "patch"))
    rules = FaultRules([lost, unavailable])
    assert rules.pick("batch", "POST", DOCS) is lost
    assert rules.pick("patch", "PATCH", DOCS + "/x") is unavailable
    assert rules.pick("read", "GET", DOCS + "/x") is None


def test_probability_draws_from_a_seeded_generator() -> None:
    def fired(seed: int) -> list[bool]:
        rules = FaultRules([FaultRule(probability=0.5)], seed=seed)
        return [rules.pick("read", "GET", DOCS + "/x") is not None for _ in range(200)]

    draws = fired(3)
    assert draws == fired(3), "the same seed makes the same faults"
    assert 0 < sum(draws) < 200, "some requests fault and some pass"
    assert fired(1) != draws


@pytest.mark.parametrize(
    ("fields", "match"),
    [
        ({"action": "explode"}, "action must be one of"),
        ({"status": 42}, "status must be an HTTP status code"),
        ({"operations": ["feeds"]}, "operations must name some of"),
        ({"probability": 1.5}, "probability must be from 0 to 1"),
        ({"path_pattern": "("}, "path_pattern is not a regular expression"),
        ({"count": "3"}, "count must be an integer"),
        ({"statuz": 503}, r"unknown rule field\(s\) \['statuz'\]"),
    ],
)
def test_a_bad_rule_is_refused_naming_the_field(fields: dict[str, object], match: str) -> None:
    with pytest.raises(ValueError, match=match):
        FaultRule.from_dict(fields)
