"""The documented install (docs/getting-started.md, "Install into your Airflow"), from a clean venv: build the wheel
with ``scripts/build-wheel.sh``, install it with the project's constraints, and find the provider, the plugin and the
console script in the new venv (``pip install airflow-chatter`` must name a distribution that exists).

uv works from its cache (``--offline``): ``scripts/bootstrap.sh`` filled it with every pinned package and setuptools.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
BUILD_TIMEOUT_S = 180
INSTALL_TIMEOUT_S = 300
#: ``airflow providers list`` imports Airflow and every provider: about 15 s on a busy machine.
AIRFLOW_CLI_TIMEOUT_S = 180


def _uv() -> str:
    found = shutil.which("uv") or shutil.which("uv", path=str(Path.home() / ".local" / "bin"))
    if found is None:
        pytest.fail("uv is required (scripts/bootstrap.sh installs it)")
    return found


def _run(command: list[str], *, timeout: float, **kwargs: object) -> subprocess.CompletedProcess[str]:
    result = subprocess.run(command, capture_output=True, text=True, timeout=timeout, **kwargs)  # type: ignore[call-overload]
    assert result.returncode == 0, f"{' '.join(command)} exited {result.returncode}:\n{result.stdout}\n{result.stderr}"
    return result  # type: ignore[no-any-return]


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("dist")
    egg_info = REPO / "airflow_chatter.egg-info"
    had_egg_info = egg_info.exists()
    env = {**os.environ, "UV_OFFLINE": "1"}
    result = _run([str(REPO / "scripts" / "build-wheel.sh"), str(out)], timeout=BUILD_TIMEOUT_S, env=env, cwd=REPO)
    path = Path(result.stdout.strip().splitlines()[-1])
    assert path.is_file() and path.parent == out, result.stdout
    assert egg_info.exists() == had_egg_info, "the build leaves no egg-info beside the package"
    return path


def _version() -> str:
    return str(tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["version"])


def test_the_wheel_ships_the_package_with_py_typed_and_its_entry_points_and_no_dags(wheel: Path) -> None:
    names = set(zipfile.ZipFile(wheel).namelist())

    tracked = subprocess.run(
        ["git", "ls-files", "airflow_chatter"], cwd=REPO, capture_output=True, text=True, timeout=30, check=True
    ).stdout.split()
    missing = [name for name in tracked if name not in names]
    assert not missing, f"files of the package missing from the wheel: {missing}"
    assert "airflow_chatter/py.typed" in names
    assert not [n for n in names if n.startswith(("dags/", "tests/", "scripts/", "benchmarks/"))], sorted(names)
    [entry_points] = [n for n in names if n.endswith(".dist-info/entry_points.txt")]
    text = zipfile.ZipFile(wheel).read(entry_points).decode()
    assert "[apache_airflow_provider]" in text and "[airflow.plugins]" in text
    assert "airflow-chatter = airflow_chatter.airflow.cli.commands:main" in text


def test_the_wheel_holds_no_devkit_module_and_testing_holds_only_what_proves_a_backend(wheel: Path) -> None:
    """The checkout's development kit (services, live Airflow, fault proxy, drain runner, local Airflow env) is not
    the product: no ``devkit`` module is in the wheel, under its own name or under ``airflow_chatter.testing``, and
    ``airflow_chatter.testing`` ships the contract suites, the fakes, the fault handlers and the clock only."""
    archive = zipfile.ZipFile(wheel)
    names = set(archive.namelist())
    devkit_modules = sorted(p.name for p in (REPO / "devkit").glob("*.py") if p.name != "__init__.py")
    assert devkit_modules, "devkit/ holds the development kit"

    assert not [n for n in names if n.startswith("devkit/")], sorted(names)
    shipped = [n for n in names if n.startswith("airflow_chatter/") and n.rsplit("/", 1)[-1] in devkit_modules]
    assert not shipped, f"development-kit modules in the wheel: {shipped}"
    [top_level] = [n for n in names if n.endswith(".dist-info/top_level.txt")]
    assert archive.read(top_level).decode().split() == ["airflow_chatter"]
    testing = {n.removeprefix("airflow_chatter/testing/").split("/")[0] for n in names if "/testing/" in n}
    assert testing == {"__init__.py", "contracts", "fakes.py", "handlers.py", "clock.py"}, sorted(testing)


def test_the_wheel_installs_into_a_clean_venv_with_the_constraints_and_airflow_finds_the_provider(
    wheel: Path, tmp_path: Path
) -> None:
    uv = _uv()
    venv = tmp_path / "venv"
    python = venv / "bin" / "python"
    _run([uv, "venv", "--quiet", "-p", sys.executable, str(venv)], timeout=INSTALL_TIMEOUT_S)
    _run(
        [
            uv,
            "pip",
            "install",
            "--quiet",
            "--offline",
            "-p",
            str(python),
            "-c",
            str(REPO / "constraints.txt"),
            str(wheel),
        ],
        timeout=INSTALL_TIMEOUT_S,
    )
    # Run from an empty directory with a clean environment, so nothing of the checkout can be imported instead.
    env = {"PATH": f"{venv / 'bin'}:/usr/bin:/bin", "HOME": str(tmp_path), "AIRFLOW_HOME": str(tmp_path / "home")}
    probe = _run(
        [
            str(python),
            "-c",
            "import json, importlib.metadata as m, airflow_chatter\n"
            "ours = lambda g: [e for e in m.entry_points(group=g) if e.dist.name == 'airflow-chatter']\n"
            "eps = {g: {e.name: e.value for e in ours(g)} for g in "
            "('apache_airflow_provider', 'airflow.plugins', 'console_scripts')}\n"
            "info = ours('apache_airflow_provider')[0].load()()\n"
            "print(json.dumps({'file': airflow_chatter.__file__, 'eps': eps, 'package': info['package-name']}))",
        ],
        timeout=AIRFLOW_CLI_TIMEOUT_S,
        env=env,
        cwd=tmp_path,
    )
    found = json.loads(probe.stdout.strip().splitlines()[-1])
    assert Path(found["file"]).is_relative_to(venv), f"imported from the venv, not the checkout: {found['file']}"
    assert found["package"] == "airflow-chatter"
    assert found["eps"]["airflow.plugins"] == {"chatter": "airflow_chatter.airflow.plugins.chatter:ChatterPlugin"}
    assert found["eps"]["console_scripts"]["airflow-chatter"] == "airflow_chatter.airflow.cli.commands:main"

    providers = _run(
        [str(venv / "bin" / "airflow"), "providers", "list", "-o", "json"],
        timeout=AIRFLOW_CLI_TIMEOUT_S,
        env=env,
        cwd=tmp_path,
    )
    listed = {p["package_name"]: p for p in json.loads(providers.stdout[providers.stdout.index("[") :])}
    assert listed["airflow-chatter"]["version"] == _version()
    usage = _run([str(venv / "bin" / "airflow-chatter"), "provision", "--help"], timeout=60, env=env, cwd=tmp_path)
    assert "--source" in usage.stdout
