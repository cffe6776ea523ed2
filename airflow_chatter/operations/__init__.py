"""Operations around the drain: building a source's engine, lease plans and resets, the backfill exclusion, pending
peeks and the pending watch, requeueing, and the monitoring page's read model and actions.

The Airflow tasks, the trigger and the plugin's API call these; nothing here imports Airflow or a web framework, so
every operation runs over ``MemoryDocumentContainer`` and ``FakePublisher``. Lease documents are only ever written
through ``LeaseStore`` (its ETag conditions, its clock), never behind its back.
"""
