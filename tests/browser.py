"""A minimal headless-Chromium driver over the DevTools protocol (pipe transport, no extra packages).

Chromium started with ``--remote-debugging-pipe`` reads JSON commands from fd 3 and writes replies
to fd 4, each message terminated by a NUL byte.
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

FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
         "--disable-component-update", "--disable-sync", "--no-first-run", "--disable-quic",
         "--remote-debugging-pipe", "--window-size=1200,1600"]


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

        self.proc = subprocess.Popen([executable, *FLAGS, f"--user-data-dir={self._profile}", "about:blank"],
                                     close_fds=False, preexec_fn=wire,
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        os.close(cmd_r)
        os.close(out_w)
        self._w = os.fdopen(cmd_w, "wb")
        self._r = os.fdopen(out_r, "rb")
        self._id = 0
        self._buf = b""

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

    def open(self, url: str) -> str:
        """A new tab showing ``url``: returns its session id once navigation has committed."""
        target = self.send("Target.createTarget", {"url": "about:blank"})["targetId"]
        session = self.send("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
        nav = self.send("Page.navigate", {"url": url}, session)
        if nav.get("errorText"):
            raise RuntimeError(f"could not open {url}: {nav['errorText']}")
        return session

    def evaluate(self, session: str, expression: str, timeout_ms: int = 30000):
        res = self.send("Runtime.evaluate", {"expression": expression, "awaitPromise": True,
                                             "returnByValue": True, "timeout": timeout_ms}, session)
        if "exceptionDetails" in res:
            raise RuntimeError(f"page script failed: {res['exceptionDetails']}")
        return res["result"].get("value")

    def screenshot(self, session: str, path: Path) -> None:
        data = self.send("Page.captureScreenshot", {"format": "png", "captureBeyondViewport": True}, session)
        path.write_bytes(base64.b64decode(data["data"]))

    def close(self) -> None:
        with contextlib.suppress(RuntimeError):
            self.send("Browser.close")
        self.proc.wait(timeout=20)
        shutil.rmtree(self._profile, ignore_errors=True)


#: waits for the page and MathJax, then reports what a reader would see
PAGE_REPORT = r"""
new Promise((resolve) => {
  const done = () => {
    const imgs = Array.from(document.querySelectorAll('article img, main img'));
    const text = (document.querySelector('article') || document.body).innerText;
    resolve({
      mathjax: document.querySelectorAll('mjx-container').length,
      raw_tex: /\\\[|\\\(|\$\$/.test(text),
      images: imgs.map((i) => ({src: i.getAttribute('src'), ok: i.complete && i.naturalWidth > 0})),
      // tables whose right edge passes the article's while their content cannot scroll into view
      clipped_tables: Array.from(document.querySelectorAll('article table')).filter((t) => {
        const box = (document.querySelector('article') || document.body).getBoundingClientRect();
        const scrolls = t.scrollWidth > t.clientWidth && getComputedStyle(t).overflowX === 'auto';
        return t.getBoundingClientRect().right > box.right + 1 && !scrolls;
      }).map((t) => t.innerText.slice(0, 60)),
      text: text,
    });
  };
  const wait = () => {
    if (document.readyState !== 'complete') { setTimeout(wait, 100); return; }
    if (window.MathJax && MathJax.startup && MathJax.startup.promise) {
      MathJax.startup.promise.then(() => setTimeout(done, 200));
    } else { setTimeout(done, 500); }
  };
  wait();
})
"""
