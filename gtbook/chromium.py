"""A minimal headless-Chromium driver over the DevTools protocol (pipe transport, no extra packages), used
to print the book to PDF (:mod:`gtbook.pdf`) and by the browser tests.

Chromium started with ``--remote-debugging-pipe`` reads JSON commands from fd 3 and writes replies
to fd 4, each message terminated by a NUL byte. Linux and macOS only (``fcntl``): imported only where a
browser is driven.
"""

from __future__ import annotations

import base64
import contextlib
import fcntl
import json
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

__all__ = ["FLAGS", "Browser", "chromium_path"]

FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--disable-quic",
    "--remote-debugging-pipe",
    "--window-size=1200,1600",
]


def chromium_path() -> str | None:
    for name in ("chromium", "chromium-browser", "google-chrome"):
        path = shutil.which(name)
        if path:
            return path
    return None


class Browser:
    def __init__(self, executable: str) -> None:
        self._profile = tempfile.mkdtemp(prefix="gtbook-chromium-")
        cmd_r, cmd_w = os.pipe()
        out_r, out_w = os.pipe()

        def wire():  # in the child: the pipe ends become fds 3 and 4, inheritable across exec
            high_r = fcntl.fcntl(cmd_r, fcntl.F_DUPFD, 10)
            high_w = fcntl.fcntl(out_w, fcntl.F_DUPFD, 10)
            os.dup2(high_r, 3)
            os.dup2(high_w, 4)

        self.proc = subprocess.Popen(
            [executable, *FLAGS, f"--user-data-dir={self._profile}", "about:blank"],
            close_fds=False,
            preexec_fn=wire,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        os.close(cmd_r)
        os.close(out_w)
        self._w = os.fdopen(cmd_w, "wb")
        self._r = os.fdopen(out_r, "rb")
        self._id = 0
        self._buf = b""
        self._targets: dict[str, str] = {}

    def send(self, method: str, params: dict | None = None, session: str | None = None) -> dict:
        self._id += 1
        msg = {"id": self._id, "method": method, "params": params or {}}
        if session:
            msg["sessionId"] = session
        self._w.write(json.dumps(msg).encode() + b"\0")
        self._w.flush()
        while True:
            while b"\0" not in self._buf:
                chunk = self._r.read1(1 << 16)
                if not chunk:
                    raise RuntimeError("chromium closed the DevTools pipe")
                self._buf += chunk
            raw, self._buf = self._buf.split(b"\0", 1)
            reply = json.loads(raw)
            if reply.get("id") == self._id:
                if "error" in reply:
                    raise RuntimeError(f"{method}: {reply['error']}")
                return reply.get("result", {})

    def open(self, url: str, width: int | None = None, height: int = 1000) -> str:
        """A new tab showing ``url`` (``width`` CSS pixels wide if given, as a phone below 600):
        returns its session id once navigation has committed."""
        target = self.send("Target.createTarget", {"url": "about:blank"})["targetId"]
        session = self.send("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
        if width is not None:
            self.send(
                "Emulation.setDeviceMetricsOverride",
                {"width": int(width), "height": int(height), "deviceScaleFactor": 1, "mobile": width < 600},
                session,
            )
        nav = self.send("Page.navigate", {"url": url}, session)
        if nav.get("errorText"):
            raise RuntimeError(f"could not open {url}: {nav['errorText']}")
        self._targets[session] = target
        return session

    def close_tab(self, session: str) -> None:
        target = self._targets.pop(session, None)
        if target is not None:
            self.send("Target.closeTarget", {"targetId": target})

    def evaluate(self, session: str, expression: str, timeout_ms: int = 30000):
        res = self.send(
            "Runtime.evaluate",
            {"expression": expression, "awaitPromise": True, "returnByValue": True, "timeout": timeout_ms},
            session,
        )
        if "exceptionDetails" in res:
            raise RuntimeError(f"page script failed: {res['exceptionDetails']}")
        return res["result"].get("value")

    def print_pdf(self, session: str, path: Path) -> None:
        """Print the page of ``session`` to ``path`` (A4, backgrounds, no header or footer)."""
        data = self.send(
            "Page.printToPDF",
            {
                "printBackground": True,
                "paperWidth": 8.27,
                "paperHeight": 11.69,
                "marginTop": 0.5,
                "marginBottom": 0.5,
                "marginLeft": 0.5,
                "marginRight": 0.5,
                "displayHeaderFooter": False,
                "preferCSSPageSize": False,
            },
            session,
        )
        path.write_bytes(base64.b64decode(data["data"]))

    def screenshot(self, session: str, path: Path) -> None:
        data = self.send("Page.captureScreenshot", {"format": "png", "captureBeyondViewport": True}, session)
        path.write_bytes(base64.b64decode(data["data"]))

    def close(self) -> None:
        with contextlib.suppress(RuntimeError):
            self.send("Browser.close")
        self.proc.wait(timeout=20)
        shutil.rmtree(self._profile, ignore_errors=True)
