"""What the Airflow layer plugs into Airflow's own processes.

``chatter.py`` is the UI plugin (entry point ``airflow.plugins``): it registers the conf guard (``conf_guard.py``),
the JSON API (``api.py``), its Airflow backend (``backend.py``) and the page's ES module (``static/chatter-ui.js``);
the API and its backend are not imported until the api-server serves the first request under ``/chatter``.
"""
