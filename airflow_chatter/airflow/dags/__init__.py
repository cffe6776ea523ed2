"""The DAG factories that build every chatter DAG from the sources file (``factory.py``): the repository's ``dags/``
files are one call each. The sources file's model is ``airflow_chatter.airflow.sources``."""
