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
