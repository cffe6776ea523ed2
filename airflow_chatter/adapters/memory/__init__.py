"""The in-memory document container: a real, small implementation of the container port for tests."""

from airflow_chatter.adapters.memory.container import *  # noqa: F403
from airflow_chatter.adapters.memory.container import __all__ as __all__
