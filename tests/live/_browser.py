"""A headless Chromium driven over the DevTools protocol (CDP) with a small websocket client: enough to log in through
Airflow's login form (typing into its fields and clicking its button as a person does), open a page, click a tab,
read what it shows, switch Airflow's theme and take screenshots. No Selenium or
Playwright: Debian's ``chromium`` (``scripts/chromium.sh``) and the ``websockets`` package the api-server brings.

Every wait has a deadline; ``close`` kills the one browser process this started (its own process group).
"""

from __future__ import annotations

import base64
import itertools
import json
import os
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

import httpx
from websockets.sync.client import ClientConnection, connect

REPO = Path(__file__).resolve().parents[2]
#: Longest wait for a started Chromium's DevTools endpoint to list its page.
DEVTOOLS_START_S = 60.0


def chromium_binary() -> str:
    """Install Debian's chromium if missing (cached: a no-op once installed) and return its path."""
    done = subprocess.run(
        ["bash", str(REPO / "scripts" / "chromium.sh")], capture_output=True, text=True, timeout=900, check=False
    )
    if done.returncode != 0:
        raise RuntimeError(f"scripts/chromium.sh failed: {done.stderr[-2000:]}")
    return done.stdout.strip().splitlines()[-1]


class Browser:
    def __init__(self, profile: Path, *, width: int = 1440, height: int = 2000) -> None:
        """Start Chromium and connect to its page, waiting at most ``DEVTOOLS_START_S`` for its DevTools endpoint.

        Whatever fails after the process started (no port file, the endpoint not listening in time, no page, the
        websocket refused), the process group is killed before the error is raised: a caller whose constructor
        raised has nothing to ``close``."""
        profile.mkdir(parents=True, exist_ok=True)
        port_file = profile / "DevToolsActivePort"
        port_file.unlink(missing_ok=True)  # a reused profile keeps the last browser's (dead) port
        self.process = subprocess.Popen(
            [
                chromium_binary(),
                "--headless=new",
                "--no-sandbox",
                "--disable-gpu",
                "--disable-dev-shm-usage",
                "--no-first-run",
                "--remote-debugging-address=127.0.0.1",
                "--remote-debugging-port=0",
                f"--user-data-dir={profile}",
                f"--window-size={width},{height}",
                "about:blank",
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
        try:
            self._attach(port_file, width, height, time.monotonic() + DEVTOOLS_START_S, DEVTOOLS_START_S)
        except BaseException:
            self.close()
            raise

    def _attach(self, port_file: Path, width: int, height: int, deadline: float, start_s: float) -> None:
        while not port_file.exists() or not port_file.read_text().strip():
            if time.monotonic() > deadline or self.process.poll() is not None:
                raise RuntimeError(f"chromium did not open its DevTools port within {start_s:g} s")
            time.sleep(0.2)
        port = int(port_file.read_text().split()[0])
        # The port file can appear before the endpoint listens: retry until the deadline.
        while True:
            try:
                targets = httpx.get(f"http://127.0.0.1:{port}/json/list", timeout=10).json()
                page = next(t for t in targets if t.get("type") == "page")
                break
            except (httpx.HTTPError, ValueError, StopIteration) as error:
                if time.monotonic() > deadline or self.process.poll() is not None:
                    raise RuntimeError(
                        f"chromium's DevTools endpoint on port {port} did not list a page within {start_s:g} s: {error}"
                    ) from None
                time.sleep(0.2)
        # No keepalive pings: a loopback DevTools socket needs none, and on a loaded machine a late pong closed it
        # (1011) while a test waited minutes on Airflow without talking to the page.
        self._connection = connect(page["webSocketDebuggerUrl"], max_size=64 * 1024 * 1024, ping_interval=None)
        self.ws: ClientConnection = self._connection.__enter__()
        self._ids = itertools.count(1)
        self.send("Page.enable")
        self.send("Runtime.enable")
        self.send("Network.enable")
        self.send("Emulation.setDeviceMetricsOverride", width=width, height=height, deviceScaleFactor=1, mobile=False)

    def send(self, method: str, timeout_s: float = 60, **params: Any) -> dict[str, Any]:
        """One CDP command; its result (events that arrive meanwhile are dropped)."""
        message_id = next(self._ids)
        self.ws.send(json.dumps({"id": message_id, "method": method, "params": params}))
        deadline = time.monotonic() + timeout_s
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError(f"CDP {method} did not answer within {timeout_s} s")
            reply = json.loads(self.ws.recv(timeout=left))
            if reply.get("id") == message_id:
                if "error" in reply:
                    raise RuntimeError(f"CDP {method}: {reply['error']}")
                return dict(reply.get("result", {}))

    def set_cookie(self, url: str, name: str, value: str) -> None:
        self.send("Network.setCookie", url=url, name=name, value=value, path="/")

    def cookies(self) -> dict[str, str]:
        """The browser's cookies, name to value (``_token`` is the one Airflow's login form stores)."""
        return {c["name"]: c["value"] for c in self.send("Network.getAllCookies")["cookies"]}

    def type_into(self, selector: str, text: str) -> None:
        """Focus the element ``selector`` and type ``text`` as keyboard input (React sees ordinary input events).

        Waits (up to 10 s) for the element to be there and take the focus, as a person waits for a form to finish
        rendering: a React page may still replace its form right after the first of its fields appeared."""
        focus = (
            f"(() => {{ const e = document.querySelector({json.dumps(selector)}); "
            "if (!e) return false; e.focus(); return document.activeElement === e; })()"
        )
        try:
            self.wait_for(focus, timeout_s=10, what=f"a focusable element {selector!r}")
        except AssertionError as error:
            raise AssertionError(f"no focusable element {selector!r} on the page ({error})") from None
        self.send("Input.insertText", text=text)

    def click(self, element: str, *, what: str) -> None:
        """A real mouse click (press and release) on the centre of the element the JS expression ``element`` finds."""
        box = self.evaluate(
            f"(() => {{ const e = {element}; if (!e) return null; e.scrollIntoView({{block: 'center'}}); "
            "const r = e.getBoundingClientRect(); return [r.x + r.width / 2, r.y + r.height / 2]; })()"
        )
        if not box:
            raise AssertionError(f"nothing to click: {what} is not on the page")
        x, y = box
        for kind in ("mousePressed", "mouseReleased"):
            self.send("Input.dispatchMouseEvent", type=kind, x=x, y=y, button="left", clickCount=1)

    def open(self, url: str) -> None:
        """Navigate and wait until the new document has loaded (a marker on the old one must be gone)."""
        self.evaluate("window.__chatterOld = true")
        self.send("Page.navigate", url=url)
        self.wait_for("!window.__chatterOld && document.readyState === 'complete'", what=f"{url} to load")

    def evaluate(self, expression: str) -> Any:
        result = self.send("Runtime.evaluate", expression=expression, returnByValue=True, awaitPromise=True)
        if "exceptionDetails" in result:
            raise RuntimeError(f"page script failed: {result['exceptionDetails']}")
        return result["result"].get("value")

    def wait_for(self, expression: str, *, timeout_s: float = 60, what: str) -> Any:
        """Evaluate ``expression`` until it is truthy; the last value seen is in the error.

        ``expression`` must evaluate to a value CDP can return (a boolean, a number, a string): wrap an element in
        ``!!(...)``. A failed evaluation (a script error, or the context gone while navigating) counts as "not yet",
        never as an answer."""
        deadline = time.monotonic() + timeout_s
        value: Any = None
        while time.monotonic() < deadline:
            try:
                value = self.evaluate(expression)
            except RuntimeError as error:
                value = f"(not evaluated: {error})"
            else:
                if value:
                    return value
            time.sleep(0.5)
        text = self.evaluate("document.body ? document.body.innerText.slice(0, 3000) : ''")
        raise AssertionError(f"timed out after {timeout_s} s waiting for {what}; last {value!r}; page text: {text}")

    def screenshot(self, path: Path) -> Path:
        data = self.send("Page.captureScreenshot", format="png", captureBeyondViewport=True)["data"]
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(base64.b64decode(data))
        return path

    def close(self) -> None:
        try:
            if hasattr(self, "ws"):
                self._connection.__exit__(None, None, None)
        finally:
            # The whole group, even if the launcher itself already exited: the browser's processes stay in it.
            for sig in (signal.SIGTERM, signal.SIGKILL):
                try:
                    os.killpg(self.process.pid, sig)
                except ProcessLookupError:
                    break
                try:
                    self.process.wait(timeout=20)
                except subprocess.TimeoutExpired:
                    continue
                time.sleep(1)  # let the group's other members exit before checking again
