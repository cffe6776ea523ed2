"""The plugin module (``airflow_chatter.airflow.plugins.chatter``): imported by every Airflow process, so it stays
light, and Airflow discovers its API app and its two pages through the ``airflow.plugins`` entry point."""

from __future__ import annotations

import json
import subprocess
import sys

from airflow_chatter.airflow.plugins.chatter import BUNDLE_URL, URL_PREFIX, ChatterPlugin, LazyApp

HEAVY = ("fastapi", "starlette", "azure", "kafka", "airflow_chatter.airflow.plugins.api")


def test_importing_the_plugin_module_imports_neither_fastapi_nor_azure_nor_kafka() -> None:
    code = (
        "import sys, json; import airflow_chatter.airflow.plugins.chatter; "
        f"print(json.dumps(sorted(m for m in sys.modules if m.split('.')[0] in {HEAVY!r} or m in {HEAVY!r})))"
    )
    loaded = json.loads(subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True).stdout)
    assert loaded == []


def test_the_plugin_mounts_a_lazy_api_app_and_registers_the_page_in_the_nav_on_dag_runs_and_the_dashboard() -> None:
    (app,) = ChatterPlugin.fastapi_apps
    assert app["url_prefix"] == URL_PREFIX and isinstance(app["app"], LazyApp)
    destinations = {entry["destination"]: entry["bundle_url"] for entry in ChatterPlugin.react_apps}
    assert destinations == {"nav": BUNDLE_URL, "dag_run": BUNDLE_URL, "dashboard": BUNDLE_URL}


def test_the_bundle_registers_the_dashboard_tile_under_its_react_apps_name() -> None:
    """Airflow renders ``globalThis[name]`` of a react app: the tile's name must be the one the module sets."""
    from importlib import resources

    from airflow_chatter.airflow.plugins.chatter import TILE_NAME

    (tile,) = [entry for entry in ChatterPlugin.react_apps if entry["destination"] == "dashboard"]
    text = resources.files("airflow_chatter.airflow.plugins").joinpath("static", "chatter-ui.js").read_text()
    assert tile["name"] == TILE_NAME and f'const TILE_NAME = "{TILE_NAME}";' in text
    assert "globalThis[TILE_NAME] = ChatterTile;" in text


def test_the_lazy_app_builds_the_real_app_once_on_first_use() -> None:
    built: list[int] = []

    async def inner(scope, receive, send):  # type: ignore[no-untyped-def]
        return None

    def factory():  # type: ignore[no-untyped-def]
        built.append(1)
        return inner

    lazy = LazyApp(factory)
    assert built == []
    import asyncio

    for _ in range(2):
        asyncio.run(lazy({"type": "http"}, None, None))  # type: ignore[arg-type]
    assert built == [1]


def test_the_page_bundle_ships_as_package_data() -> None:
    from importlib import resources

    text = resources.files("airflow_chatter.airflow.plugins").joinpath("static", "chatter-ui.js").read_text()
    assert "globalThis.React" in text and "ChakraUI" in text
