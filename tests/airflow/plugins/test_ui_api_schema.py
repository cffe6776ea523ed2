"""The plugin API answers what its OpenAPI schema says (issue 28 finding 10; issue 29 fuzzes it further): for inputs
schemathesis generates from the schema, no 5xx, and every status, content type and body is one the schema declares.
In-process over the app and the fake backend of ``test_ui_api`` (an admin's token), no live Airflow."""

from __future__ import annotations

from typing import Any

import schemathesis
from hypothesis import HealthCheck, settings

from airflow_chatter.airflow.plugins.api import create_app
from tests.airflow.plugins.test_ui_api import auth, drained_backend

APP = create_app(drained_backend())
schema = schemathesis.openapi.from_asgi("/openapi.json", APP)


@schema.parametrize()
@settings(max_examples=15, deadline=None, suppress_health_check=list(HealthCheck))
def test_the_api_answers_what_its_schema_declares(case: Any) -> None:
    case.call_and_validate(headers=auth("admin"))
