"""``scripts/airflow-live.sh`` stops only what it started: a pid file is trusted only while its pid still names the
very process the script started (same start time), so a recycled pid is never signalled. No stack is started here;
``tests/live/`` starts and stops a real one."""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "airflow-live.sh"


def _script(action: str, home: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "AIRFLOW_LIVE_HOME": str(home)}
    return subprocess.run(["bash", str(SCRIPT), action], env=env, capture_output=True, text=True, timeout=60)


def _start_time(pid: int) -> str:
    stat = Path(f"/proc/{pid}/stat").read_text()
    return stat.rsplit(")", 1)[1].split()[19]


def test_stop_leaves_alone_a_process_whose_pid_is_in_a_pid_file_but_started_at_another_time(tmp_path: Path) -> None:
    bystander = subprocess.Popen(["sleep", "60"], start_new_session=True)
    try:
        (tmp_path / "pids").mkdir()
        real = _start_time(bystander.pid)
        (tmp_path / "pids" / "scheduler.pid").write_text(f"{bystander.pid} {int(real) + 1}\n")

        result = _script("stop", tmp_path)

        assert result.returncode == 0, result.stderr
        time.sleep(0.2)
        assert bystander.poll() is None, "a process the script did not start was signalled"
        assert not (tmp_path / "pids" / "scheduler.pid").exists(), "the stale pid file is removed"
    finally:
        bystander.kill()
        bystander.wait(timeout=10)


def test_stop_ends_the_whole_process_group_of_a_component_it_started(tmp_path: Path) -> None:
    # A stand-in component with a child, in its own process group, recorded the way the script records one.
    leader = subprocess.Popen(["bash", "-c", "sleep 60 & wait"], start_new_session=True)
    try:
        time.sleep(0.3)
        child = int(subprocess.run(["pgrep", "-P", str(leader.pid)], capture_output=True, text=True).stdout.split()[0])
        (tmp_path / "pids").mkdir()
        (tmp_path / "pids" / "triggerer.pid").write_text(f"{leader.pid} {_start_time(leader.pid)}\n")

        result = _script("stop", tmp_path)

        assert result.returncode == 0, result.stderr
        assert "stopped triggerer" in result.stderr
        leader.wait(timeout=10)
        assert not Path(f"/proc/{child}").exists() or "Z" in Path(f"/proc/{child}/stat").read_text().split()[2], (
            "the component's child was stopped with it"
        )
    finally:
        if leader.poll() is None:
            leader.kill()
            leader.wait(timeout=10)


def test_status_of_a_stack_that_is_not_running_exits_3(tmp_path: Path) -> None:
    (tmp_path / "pids").mkdir()

    result = _script("status", tmp_path)

    assert result.returncode == 3
    assert "api-server: not running" in result.stdout
