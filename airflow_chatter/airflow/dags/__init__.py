"""The sources file (``config.py``) and the DAG factories that build every chatter DAG from it (``factory.py``):
the repository's ``dags/`` files are one call each."""
