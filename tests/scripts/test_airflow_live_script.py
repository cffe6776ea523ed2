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


def _gone(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z"
    except OSError:
        return True


def test_stop_ends_the_component_with_its_children_and_a_child_in_a_process_group_of_its_own(tmp_path: Path) -> None:
    # A stand-in component in its own process group, recorded the way the script records one, with a child in its
    # group and one in a group of its own (as Airflow's task runners are).
    leader = subprocess.Popen(["bash", "-c", "sleep 60 & setsid sleep 61 & wait"], start_new_session=True)
    try:
        deadline = time.monotonic() + 10
        children: list[int] = []
        while len(children) < 2 and time.monotonic() < deadline:
            time.sleep(0.1)
            found = subprocess.run(["pgrep", "-P", str(leader.pid)], capture_output=True, text=True, timeout=10)
            children = [int(p) for p in found.stdout.split()]
        assert len(children) == 2, children
        (tmp_path / "pids").mkdir()
        (tmp_path / "pids" / "triggerer.pid").write_text(f"{leader.pid} {_start_time(leader.pid)}\n")

        result = _script("stop", tmp_path)

        assert result.returncode == 0, result.stderr
        assert "stopped triggerer" in result.stderr
        leader.wait(timeout=10)
        assert all(_gone(child) for child in children), "the component's children were stopped with it"
    finally:
        if leader.poll() is None:
            leader.kill()
            leader.wait(timeout=10)


def test_status_of_a_stack_that_is_not_running_exits_3(tmp_path: Path) -> None:
    (tmp_path / "pids").mkdir()

    result = _script("status", tmp_path)

    assert result.returncode == 3
    assert "api-server: not running" in result.stdout
