"""The package's import rules (docs/architecture.md, "The dependency rule") as import-linter contracts in
pyproject.toml: the core's layers, no SDK / web framework / Airflow in the core, adapters below the drain, the
testing kit without Airflow, the package without the checkout's devkit, the Airflow layer by floor (hooks and utils
never import operators, plugins or DAGs). ``lint-imports`` reads every import statement, deferred ones inside a
function included, and names the chain of a broken contract."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
LINT_IMPORTS = str(Path(sys.executable).parent / "lint-imports")
TIMEOUT_S = 120


def _lint_imports(cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [LINT_IMPORTS, "--no-cache"], cwd=cwd, capture_output=True, text=True, timeout=TIMEOUT_S, check=False
    )


def test_every_import_contract_of_the_package_is_kept() -> None:
    result = _lint_imports(REPO)
    assert result.returncode == 0, f"an import contract is broken:\n{result.stdout}\n{result.stderr}"
    assert "0 broken" in result.stdout and "6 kept" in result.stdout, result.stdout


def test_a_deferred_sdk_import_and_a_back_arrow_into_the_ports_break_their_contracts_naming_the_import(
    tmp_path: Path,
) -> None:
    """The contracts are not vacuous: in a copy of the checkout, a ``kafka`` import inside a function of the drain
    and an import of ``idempotency/`` from the ports each break their contract, and the report names the import."""
    for name in ("airflow_chatter", "devkit"):
        shutil.copytree(REPO / name, tmp_path / name, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(REPO / "pyproject.toml", tmp_path / "pyproject.toml")
    engine = tmp_path / "airflow_chatter" / "drain" / "engine.py"
    engine.write_text(engine.read_text() + "\n\ndef _planted() -> None:\n    import kafka  # noqa: F401\n")
    port = tmp_path / "airflow_chatter" / "ports" / "messaging.py"
    port.write_text(port.read_text() + "\n\nfrom airflow_chatter.idempotency import decision  # noqa: E402,F401\n")

    result = _lint_imports(tmp_path)

    assert result.returncode == 1, result.stdout + result.stderr
    assert "4 kept, 2 broken" in result.stdout, result.stdout
    assert "airflow_chatter.drain.engine -> kafka" in result.stdout, result.stdout
    assert "airflow_chatter.ports.messaging -> airflow_chatter.idempotency.decision" in result.stdout, result.stdout
