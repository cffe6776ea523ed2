"""The checkout's development kit: the local services, a live Airflow, the fault proxy, the out-of-process drain
runner and the in-process Airflow environment, shared by tests/, benchmarks/ and scripts/demo.py.

Not part of the distribution: every module here drives ``scripts/`` or the checkout's ``dags/``, so it needs a
checkout. What a user needs to prove a backend (the contract suites, the fakes, the fault handlers, the clock) stays
in ``airflow_chatter.testing``.
"""
