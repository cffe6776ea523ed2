"""The idempotency core imports neither Airflow, FastAPI nor azure-cosmos (the FastAPI adapter and the hook are
apart)."""

from __future__ import annotations

import subprocess
import sys


def _imported_after(statement: str) -> set[str]:
    code = f"import sys; {statement}; print(' '.join(sorted(sys.modules)))"
    output = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120)
    return set(output.stdout.split())


def test_the_core_and_the_suite_import_no_airflow_fastapi_or_azure() -> None:
    modules = _imported_after(
        "import airflow_chatter.idempotency, airflow_chatter.idempotency.container_store, "
        "airflow_chatter.testing.contracts.idempotency"
    )
    leaked = {m for m in modules if m.split(".")[0] in {"airflow", "fastapi", "starlette", "azure", "httpx"}}
    assert leaked == set()


def test_fastapi_is_imported_by_the_fastapi_adapter() -> None:
    assert "fastapi" in _imported_after("import airflow_chatter.adapters.fastapi.idempotency")
