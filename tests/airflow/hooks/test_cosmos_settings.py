"""The Cosmos connection's extras: one model (``CosmosConnectionSettings``) validates them for the hook and generates
the connection form, so the form offers exactly what the hook accepts, with the same bounds and defaults, and a bad
value is refused naming the connection and the extra before any request."""

from __future__ import annotations

from typing import Any

import pytest

from airflow_chatter.airflow.get_provider_info import COSMOS_CONNECTION_TYPE
from airflow_chatter.airflow.hooks.cosmos import ChatterCosmosHook
from airflow_chatter.airflow.hooks.cosmos_settings import CosmosConnectionSettings
from airflow_chatter.errors import ConfigurationError
from tests.airflow.hooks.test_hooks import COSMOS_KEY, set_connection

FORM: dict[str, Any] = COSMOS_CONNECTION_TYPE["conn-fields"]


def test_the_form_offers_every_extra_of_the_model_and_nothing_else() -> None:
    assert list(FORM) == list(CosmosConnectionSettings.model_fields), "the form is generated from the model"
    for name, field in CosmosConnectionSettings.model_fields.items():
        assert FORM[name]["label"] == field.title, f"{name}: the form's label is the model's title"
        assert FORM[name].get("description") == field.description, f"{name}: one description, the model's"
        if field.default is not None:
            assert FORM[name]["schema"]["default"] == field.default, f"{name}: the form shows the model's default"


@pytest.mark.parametrize("name", [n for n, f in FORM.items() if "minimum" in f["schema"]])
def test_the_form_s_bounds_are_the_model_s(name: str) -> None:
    lowest = FORM[name]["schema"]["minimum"]
    assert getattr(CosmosConnectionSettings.from_extras({name: lowest}), name) == lowest, "the form's minimum is valid"
    with pytest.raises(ConfigurationError, match=rf"^extra {name}={lowest - 1!r} is refused"):
        CosmosConnectionSettings.from_extras({name: lowest - 1})


def test_a_cleared_form_field_means_the_default_and_the_legacy_form_is_read() -> None:
    settings = CosmosConnectionSettings.from_extras(
        {"connection_timeout": "", "connection_verify": None, "extra__chattercosmos__database_name": "orders"}
    )
    assert (settings.connection_timeout, settings.connection_verify, settings.database_name) == (10, True, "orders")
    text = CosmosConnectionSettings.from_extras({"connection_timeout": " 30 ", "connection_verify": "false"})
    assert (text.connection_timeout, text.connection_verify) == (30, False), "a form's text is converted"


@pytest.mark.parametrize(
    ("extra", "value"),
    [
        ("connection_timeout", -5),
        ("connection_timeout", "abc"),
        ("connection_timeout", 0),
        ("connection_timeout", 2.5),
        ("connection_verify", "maybe"),
        ("max_throttle_retries", -1),
        ("max_throttle_wait_seconds", "inf"),
        ("request_priority", "urgent"),
    ],
)
def test_a_bad_extra_is_refused_naming_the_connection_and_the_extra_before_any_request(
    monkeypatch: pytest.MonkeyPatch, patched_cosmos_client: Any, extra: str, value: Any
) -> None:
    set_connection(
        monkeypatch,
        "cosmos_bad",
        conn_type="chattercosmos",
        host="https://acct.documents.azure.com:443/",
        password=COSMOS_KEY,
        extra={"database_name": "orders", extra: value},
    )
    with pytest.raises(ConfigurationError, match=rf"^connection 'cosmos_bad' extra {extra}={value!r} is refused: "):
        ChatterCosmosHook("cosmos_bad").get_conn()
    assert not patched_cosmos_client.called, "refused before the client is built"
    ok, message = ChatterCosmosHook("cosmos_bad").test_connection()
    assert not ok and f"extra {extra}=" in message, "Test Connection names the extra too"


def test_the_client_gets_the_connection_timeout(monkeypatch: pytest.MonkeyPatch, patched_cosmos_client: Any) -> None:
    for conn_id, extra, expected in (("cosmos_30", {"connection_timeout": "30"}, 30), ("cosmos_default", {}, 10)):
        set_connection(
            monkeypatch,
            conn_id,
            conn_type="chattercosmos",
            host="https://acct.documents.azure.com:443/",
            password=COSMOS_KEY,
            extra=extra,
        )
        ChatterCosmosHook(conn_id).get_conn()
        assert patched_cosmos_client.call_args.kwargs["connection_timeout"] == expected
