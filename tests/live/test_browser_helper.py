"""The live browser helper (``tests/live/_browser.py``) itself: a browser that never becomes reachable is not leaked.

No Chromium and no Airflow: a stand-in "browser" writes the DevTools port file as Chromium does, for a port nothing
listens on, and then sleeps, which is what a Chromium whose endpoint is not listening yet looks like from outside.
"""

from __future__ import annotations

import os
import socket
import sys
import textwrap
from pathlib import Path

import pytest

from tests.live import _browser
from tests.live._browser import Browser


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _stand_in(tmp_path: Path, port: int) -> Path:
    script = tmp_path / "fake-chromium"
    script.write_text(
        textwrap.dedent(
            f"""\
            #!{sys.executable}
            import os, sys, time
            profile = next(a.split("=", 1)[1] for a in sys.argv if a.startswith("--user-data-dir="))
            with open(os.path.join(profile, "pid"), "w") as f:
                f.write(str(os.getpid()))
            with open(os.path.join(profile, "DevToolsActivePort"), "w") as f:
                f.write("{port}\\n/devtools/browser/x\\n")
            time.sleep(300)
            """
        )
    )
    script.chmod(0o755)
    return script


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie is dead too: its parent (this process) has not reaped it yet.
    stat = Path(f"/proc/{pid}/stat")
    return stat.exists() and stat.read_text().split(")")[-1].split()[0] != "Z"


@pytest.fixture
def stand_in(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The stand-in replaces Chromium, and the start deadline is 2 s instead of 60."""
    binary = _stand_in(tmp_path, _closed_port())
    monkeypatch.setattr(_browser, "chromium_binary", lambda: str(binary))
    monkeypatch.setattr(_browser, "DEVTOOLS_START_S", 2.0, raising=False)
    return binary


@pytest.mark.usefixtures("stand_in")
def test_a_browser_whose_devtools_endpoint_never_listens_is_killed_when_the_start_fails(tmp_path: Path) -> None:
    profile = tmp_path / "profile"
    with pytest.raises(Exception, match="did not list a page|Connect"):
        Browser(profile)
    pid = int((profile / "pid").read_text())
    assert not _alive(pid), "the constructor raised, so nobody can close it: it must have killed the browser itself"


@pytest.mark.usefixtures("stand_in")
def test_a_stale_port_file_from_an_earlier_browser_is_not_trusted(tmp_path: Path) -> None:
    profile = tmp_path / "profile"
    profile.mkdir()
    (profile / "DevToolsActivePort").write_text("1\n/devtools/browser/old\n")
    with pytest.raises(RuntimeError):
        Browser(profile)
    assert (profile / "DevToolsActivePort").read_text().split()[0] != "1", "the browser's own port file was read"
    assert not _alive(int((profile / "pid").read_text()))
