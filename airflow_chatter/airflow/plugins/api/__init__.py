"""The plugin's JSON API (FastAPI, mounted by Airflow's api-server under ``/chatter``): ``app.py`` builds the app."""
