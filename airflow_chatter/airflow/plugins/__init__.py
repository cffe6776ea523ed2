"""The Airflow UI plugin's parts: the JSON API (``api.py``), its Airflow backend (``backend.py``) and the page's ES
module (``static/chatter-ui.js``). ``airflow_chatter.airflow.plugin`` registers them; nothing here is imported until
the api-server serves the first request under ``/chatter``."""
