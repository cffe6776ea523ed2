"""The package's public API (docs/api.md): every listed name resolves, and importing the package stays cheap."""

from __future__ import annotations

import subprocess
import sys

import airflow_chatter


def test_every_public_name_resolves_to_the_object_its_module_defines() -> None:
    assert airflow_chatter.__all__ == sorted(airflow_chatter._EXPORTS), "__all__ lists exactly the exported names"
    for name, module in airflow_chatter._EXPORTS.items():
        value = getattr(airflow_chatter, name)
        assert getattr(sys.modules[module], name) is value, f"{name} is {module}.{name}"


def test_an_unknown_name_is_an_attribute_error_naming_it() -> None:
    try:
        airflow_chatter.NoSuchThing  # type: ignore[attr-defined]  # noqa: B018
    except AttributeError as error:
        assert "'NoSuchThing'" in str(error)
    else:  # pragma: no cover - the assertion is the point
        raise AssertionError("an unknown name must raise AttributeError")


def test_importing_the_package_imports_no_sdk_and_no_airflow() -> None:
    """Airflow imports the package in every process (the plugin lives under it): it must not pull SDKs in."""
    code = (
        "import sys, airflow_chatter\n"
        "heavy = sorted({m.split('.')[0] for m in sys.modules} & "
        "{'azure', 'kafka', 'airflow', 'opentelemetry', 'pydantic', 'fastapi'})\n"
        "print(','.join(heavy))\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60)
    assert result.stdout.strip() == "", f"import airflow_chatter pulled in: {result.stdout.strip()}"


def test_the_core_areas_import_no_sdk_no_web_framework_and_no_airflow_not_even_inside_a_function() -> None:
    """The core talks to the world only through the ports: no module of it imports an SDK or a web framework
    (adapters do) or Airflow, nor the package's adapters or Airflow layer (which do), at the top or lazily inside a
    function (an AST scan, so a deferred import cannot hide)."""
    import ast
    from pathlib import Path

    package = Path(airflow_chatter.__file__).parent
    core = [package / name for name in ("errors.py", "clock.py")]
    for area in ("ports", "outbox", "drain", "operations", "inbox", "idempotency"):
        core += sorted((package / area).rglob("*.py"))
    offenders = []
    for path in core:
        for node in ast.walk(ast.parse(path.read_text())):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else []
            if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                names = [node.module]
            offenders += [
                f"{path.relative_to(package)}:{node.lineno} imports {name}"
                for name in names
                if name.split(".")[0] in {"azure", "kafka", "airflow", "fastapi", "starlette"}
                or name.startswith(("airflow_chatter.adapters", "airflow_chatter.airflow"))
            ]
    assert len(core) > 20, "the scan found the core's modules"
    assert offenders == [], "\n".join(offenders)
