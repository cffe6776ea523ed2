"""The Airflow UI plugin (entry point ``airflow.plugins``): the ``/chatter`` JSON API and the monitoring page.

This module is imported by every Airflow process (api-server, scheduler, workers, dag-processor, triggerer), so it
imports nothing heavy: the FastAPI app is built by ``LazyApp`` on the first request the api-server routes to it
(Airflow only ``app.mount("/chatter", ...)``s it), which is also when FastAPI, the Cosmos SDK and the backend are
imported. ``tests/airflow/plugins/test_ui_plugin.py`` checks that importing this module loads neither fastapi, azure
nor kafka.
"""

from __future__ import annotations

import threading
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

from airflow.sdk.plugins_manager import AirflowPlugin

from airflow_chatter.airflow.plugins.conf_guard import ChatterConfGuard

URL_PREFIX = "/chatter"
#: The page's name in the navigation, and the ``globalThis`` name its ES module registers its component under.
PAGE_NAME = "Outbox"
COMPONENT = "ChatterOutbox"
#: The dashboard tile's name: the ``globalThis`` name the same ES module registers the tile under.
TILE_NAME = "Outbox drains at a glance"
BUNDLE_URL = f"{URL_PREFIX}/static/chatter-ui.js"
#: The navigation icon (Airflow 3.1+ ``react_apps`` ``icon``): a neutral grey line drawing, legible in both themes.
ICON_URL = f"{URL_PREFIX}/static/chatter-icon.svg"

Scope = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[MutableMapping[str, Any]]]
Send = Callable[[MutableMapping[str, Any]], Awaitable[None]]


class LazyApp:
    """An ASGI app that builds the real one (``factory()``) on its first call, once, and then delegates to it."""

    def __init__(self, factory: Callable[[], Any]) -> None:
        self._factory = factory
        self._app: Any = None
        self._lock = threading.Lock()

    def __call__(self, scope: Scope, receive: Receive, send: Send) -> Awaitable[None]:
        if self._app is None:
            with self._lock:
                if self._app is None:
                    self._app = self._factory()
        result: Awaitable[None] = self._app(scope, receive, send)
        return result


def build_app() -> Any:
    """The API over Airflow (auth manager, metadata DB, sources file): imported and built here, on first use."""
    from airflow_chatter.airflow.plugins.api.app import create_app
    from airflow_chatter.airflow.plugins.backend import AirflowBackend

    return create_app(AirflowBackend())


class ChatterPlugin(AirflowPlugin):
    name = "chatter"
    # Runs in the api-server: refuses a chatter manual DAG run with conf keys the DAG has no param for (400).
    fastapi_root_middlewares = [  # noqa: RUF012 - AirflowPlugin declares these as class attributes
        {"middleware": ChatterConfGuard, "args": [], "kwargs": {}, "name": "chatter-conf-guard"},
    ]
    fastapi_apps = [{"app": LazyApp(build_app), "url_prefix": URL_PREFIX, "name": "airflow-chatter API"}]  # noqa: RUF012 - Airflow's plugin attribute
    react_apps = [  # noqa: RUF012 - Airflow's plugin attribute
        {"name": PAGE_NAME, "bundle_url": BUNDLE_URL, "destination": "nav", "url_route": "chatter", "icon": ICON_URL},
        {"name": "Outbox", "bundle_url": BUNDLE_URL, "destination": "dag_run", "url_route": "chatter-run"},
        # Airflow's home page: the sources by severity, the oldest pending age, the suspended leases (same API).
        {"name": TILE_NAME, "bundle_url": BUNDLE_URL, "destination": "dashboard", "url_route": "chatter-tile"},
    ]
