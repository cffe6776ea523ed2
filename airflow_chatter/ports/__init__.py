"""The ports the core talks through: a document container, a publisher, a message source and an idempotency store.

The drain engine, the inbox and the unit of work only ever see these types. Adapters
(``airflow_chatter.adapters.memory.container``, ``.cosmos``, ``.kafka``) translate SDK objects and SDK
errors into them once, at their edge, so the core never imports ``azure.cosmos`` or ``kafka``.

Nothing here imports Airflow.
"""

# Every port's names, exported from here: ``from airflow_chatter.ports import DocumentContainer``.
from airflow_chatter.ports import container, idempotency, messaging, transactions
from airflow_chatter.ports.container import *  # noqa: F403
from airflow_chatter.ports.idempotency import *  # noqa: F403
from airflow_chatter.ports.messaging import *  # noqa: F403
from airflow_chatter.ports.transactions import *  # noqa: F403

__all__ = [*container.__all__, *messaging.__all__, *transactions.__all__, *idempotency.__all__]
