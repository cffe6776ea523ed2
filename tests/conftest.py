"""Shared pytest configuration. Service fixtures live in tests/fixtures/, one module per service."""

pytest_plugins = [
    "tests.fixtures.kafka",
    "tests.fixtures.cosmos",
    "tests.fixtures.airflow",
    "tests.fixtures.live_airflow",
]
