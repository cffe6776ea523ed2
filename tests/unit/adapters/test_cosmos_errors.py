"""Error translation: an SDK exception becomes the port's error for its status, and no message reads blank."""

from __future__ import annotations

import pytest
from azure.cosmos import exceptions

from airflow_chatter.adapters.cosmos.errors import translate_error
from airflow_chatter.ports import Conflict, NotFound


@pytest.mark.parametrize("body", ['{"message":""}', "", '{ "message" : "" }'])
def test_a_404_with_an_empty_body_says_its_status_instead_of_a_blank_message(body: str) -> None:
    translated = translate_error(exceptions.CosmosHttpResponseError(status_code=404, message=body))
    assert isinstance(translated, NotFound)
    assert str(translated) == "Cosmos DB answered 404 Not Found with no message"


def test_a_message_the_service_gave_is_kept() -> None:
    error = exceptions.CosmosHttpResponseError(status_code=409, message="Entity with the specified id already exists")
    translated = translate_error(error)
    assert isinstance(translated, Conflict)
    assert str(translated).endswith("Entity with the specified id already exists")
