"""The ``airflow-chatter`` console script (``commands.py``): administration run where Airflow is configured."""
