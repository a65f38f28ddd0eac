"""Rendering an HTML file in a real browser for tests: Debian's chromium, headless, driven over the DevTools protocol.

    rendered = render(path, width=1280, height=900, screenshot=tmp_path / "desktop.png")
    assert rendered.problems == []
    assert "Summary" in rendered.text

``render`` starts a browser for one page; ``with Browser() as browser:`` renders several pages in one process (each in
a fresh browser context, so nothing is cached between them), which saves the start-up time.  The browser is spoken to
over ``--remote-debugging-pipe`` (NUL-ended JSON on file descriptors 3 and 4): no port to find or race for, and no
websocket package needed.  Requests for http(s) are blocked and recorded, since a report must work offline, and the
process group of the browser is killed on close, so no renderer outlives a test, also after a failure or a timeout.
Without a browser the test is skipped, except under CI (``CI`` set), where it fails: run ``.ci/install-browser``.
"""

from __future__ import annotations

import base64
import contextlib
import fcntl
import json
import math
import os
import select
import shutil
import signal
import struct
import subprocess
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

BROWSER_NAMES = ("chromium", "chromium-browser", "google-chrome")

BROWSER_FLAGS = (
    "--headless",
    "--no-sandbox",  # the sandbox cannot start as root in a container
    "--remote-debugging-pipe",
    "--disable-dev-shm-usage",  # a container's /dev/shm may be too small for large screenshots
    "--disable-gpu",  # CI has no GPU: draw in software from the start
    "--hide-scrollbars",  # screenshots show the page, and the layout width is the requested width
    "--mute-audio",
    "--no-first-run",
    "--no-default-browser-check",
    "--disable-extensions",
    "--disable-component-update",
    "--disable-background-networking",
    "--disable-sync",
    # Whatever the page-level blocking misses (websockets, the browser's own requests) goes to a closed local port.
    "--proxy-server=http://127.0.0.1:9",
    "--proxy-bypass-list=<-loopback>",
)

# The requests the page's own blocking intercepts: anything that would leave the machine.
NETWORK_PATTERNS = [{"urlPattern": "http://*"}, {"urlPattern": "https://*"}]

# Run in the page once it has loaded: wait for web fonts and two frames, so that what a screenshot shows is laid out.
SETTLE = "document.fonts.ready.then(() => new Promise(done => requestAnimationFrame(() => requestAnimationFrame(done))))"
READ_PAGE = ("({dom: document.documentElement.outerHTML, text: document.body ? document.body.innerText : '',"
             " title: document.title})")


class BrowserError(RuntimeError):
    """The browser refused a command or exited."""


@dataclass(frozen=True)
class ConsoleMessage:
    level: str  # as the DevTools protocol names it: "log", "info", "warning", "error", "assert", "debug", "verbose", ...
    text: str
    source: str  # "console-api" for console.* calls; the browser's own messages name theirs: "network", "javascript", ...


@dataclass(frozen=True)
class FailedLoad:
    url: str
    error: str  # the browser's reason, e.g. "net::ERR_FILE_NOT_FOUND"


@dataclass(frozen=True)
class Rendered:
    """A page as the browser showed it, after its scripts ran."""

    url: str
    width: int  # the viewport
    height: int
    dom: str  # document.documentElement.outerHTML
    text: str  # document.body.innerText: the text shown, without what CSS hides
    title: str
    page_width: int  # the laid-out content, in CSS pixels: wider than `width` means the page scrolls sideways
    page_height: int
    console: list[ConsoleMessage]
    page_errors: list[str]  # uncaught exceptions, each with its message and stack
    failed_loads: list[FailedLoad]
    network_requests: list[str]  # URLs the page tried to reach over the network (all blocked)
    screenshot: Path | None

    @property
    def console_errors(self) -> list[ConsoleMessage]:
        return [message for message in self.console if message.level in ("error", "assert")]

    @property
    def problems(self) -> list[str]:
        """Everything that makes a self-contained report broken, one readable line each; [] for a good page."""
        return ([f"console {message.level}: {message.text}" for message in self.console_errors]
                + [f"uncaught exception: {error}" for error in self.page_errors]
                + [f"failed to load {load.url}: {load.error}" for load in self.failed_loads]
                + [f"network request: {url}" for url in self.network_requests])


def chromium_path() -> str | None:
    for name in BROWSER_NAMES:
        found = shutil.which(name)
        if found:
            return found
    return None


def require_chromium() -> str:
    """The browser's path; without one, skip the test, or fail it under CI, where the browser must be installed."""
    path = chromium_path()
    if path is not None:
        return path
    missing = f"no browser ({', '.join(BROWSER_NAMES)}) on PATH; install one with .ci/install-browser"
    if os.environ.get("CI"):
        pytest.fail(missing + " (CI is set, so this is not skipped)")
    pytest.skip(missing)


def png_size(path: str | os.PathLike) -> tuple[int, int]:
    """(width, height) of a PNG file, read from its header."""
    header = Path(path).read_bytes()[:24]
    if header[:8] != b"\x89PNG\r\n\x1a\n":
        raise ValueError(f"{path} is not a PNG file")
    width, height = struct.unpack(">II", header[16:24])
    return width, height


def render(html_path: str | os.PathLike, *, width: int = 1280, height: int = 900,
           screenshot: str | os.PathLike | None = None, full_page: bool = True, timeout: float = 60.0) -> Rendered:
    """Render one file in a browser started for it; see Browser.render."""
    with Browser(timeout=timeout) as browser:
        return browser.render(html_path, width=width, height=height, screenshot=screenshot, full_page=full_page)


class Browser:
    """One headless chromium process, with a temporary profile; ``with Browser() as browser: browser.render(...)``."""

    def __init__(self, executable: str | None = None, *, timeout: float = 60.0):
        self.executable = executable or require_chromium()
        self.timeout = timeout  # seconds for one render, from opening the page to the screenshot
        self.workdir: Path | None = None  # the temporary profile and the browser's stderr log, while it runs
        self._process: subprocess.Popen | None = None

    @property
    def pid(self) -> int:
        """The browser's process id, which is also the id of the process group killed on close."""
        return self._process.pid

    def __enter__(self) -> Browser:
        self.workdir = Path(tempfile.mkdtemp(prefix="browser-"))
        try:
            self._start()
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(self, *exc_info) -> None:
        self.close()

    def _start(self) -> None:
        to_browser_read, self._to_browser = os.pipe()
        self._from_browser, from_browser_write = os.pipe()
        # The browser's ends must land on descriptors 3 and 4 in the child; moving them above 4 first keeps one
        # dup2 from overwriting the other.
        child_read = fcntl.fcntl(to_browser_read, fcntl.F_DUPFD_CLOEXEC, 5)
        child_write = fcntl.fcntl(from_browser_write, fcntl.F_DUPFD_CLOEXEC, 5)
        os.close(to_browser_read)
        os.close(from_browser_write)

        def onto_3_and_4():
            os.dup2(child_read, 3)  # dup2's copies are inheritable; the originals close on exec
            os.dup2(child_write, 4)

        log_path = self.workdir / "stderr.log"
        try:
            with open(log_path, "wb") as log:
                # A new session puts the browser and all its helpers in one process group, killed as one on close.
                self._process = subprocess.Popen(
                    [self.executable, *BROWSER_FLAGS, f"--user-data-dir={self.workdir / 'profile'}", "about:blank"],
                    stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=log, start_new_session=True,
                    close_fds=False, preexec_fn=onto_3_and_4)
        except BaseException:
            os.close(self._to_browser)
            os.close(self._from_browser)
            raise
        finally:
            os.close(child_read)
            os.close(child_write)
        self._pipe = _DevToolsPipe(self._to_browser, self._from_browser, log_path)

    def close(self) -> None:
        if self._process is not None:
            try:
                if self._process.poll() is None:
                    with contextlib.suppress(OSError, subprocess.TimeoutExpired):
                        self._pipe.send("Browser.close")
                        self._process.wait(timeout=5)
            finally:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(self._process.pid, signal.SIGKILL)
                self._process.wait()
                self._process = None
                os.close(self._to_browser)
                os.close(self._from_browser)
        if self.workdir is not None:
            shutil.rmtree(self.workdir, ignore_errors=True)
            self.workdir = None

    def render(self, html_path: str | os.PathLike, *, width: int = 1280, height: int = 900,
               screenshot: str | os.PathLike | None = None, full_page: bool = True) -> Rendered:
        """Open ``html_path`` at a ``width`` x ``height`` viewport, wait until it has loaded and settled, read what it
        shows, and save a PNG screenshot to ``screenshot`` if given: of the whole page (``full_page``), or of the
        viewport.  Raises TimeoutError when the page takes longer than the browser's timeout."""
        url = Path(html_path).resolve(strict=True).as_uri()
        deadline = time.monotonic() + self.timeout

        def call(method: str, params: dict | None = None, session: str | None = None) -> dict:
            return self._pipe.call(method, params, session, deadline=deadline)

        context = call("Target.createBrowserContext")["browserContextId"]
        target = call("Target.createTarget", {"url": "about:blank", "browserContextId": context})["targetId"]
        session = call("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
        events = _PageEvents(self._pipe, session)
        self._pipe.listeners[session] = events.record
        try:
            for method in ("Runtime.enable", "Log.enable", "Network.enable", "Page.enable"):
                call(method, session=session)
            call("Page.setLifecycleEventsEnabled", {"enabled": True}, session)
            call("Fetch.enable", {"patterns": NETWORK_PATTERNS}, session)
            call("Emulation.setDeviceMetricsOverride",
                 {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": False}, session)

            navigation = call("Page.navigate", {"url": url}, session)
            if "errorText" in navigation:
                raise BrowserError(f"could not open {url}: {navigation['errorText']}")
            self._pipe.wait_until(lambda: (navigation["loaderId"], "load") in events.lifecycle, deadline,
                                  f"the load event of {url}")
            _evaluate(call, session, SETTLE)
            page = _evaluate(call, session, READ_PAGE)
            content = call("Page.getLayoutMetrics", session=session)["cssContentSize"]
            page_width, page_height = math.ceil(content["width"]), math.ceil(content["height"])

            if screenshot is not None:
                screenshot = Path(screenshot)
                params: dict = {"format": "png"}
                if full_page:
                    params["captureBeyondViewport"] = True
                    params["clip"] = {"x": 0, "y": 0, "width": width, "height": max(height, page_height), "scale": 1}
                screenshot.write_bytes(base64.b64decode(call("Page.captureScreenshot", params, session)["data"]))
        finally:
            del self._pipe.listeners[session]
        # Only after a good render: after a failed one the page may hang, and closing the browser ends it.
        call("Target.disposeBrowserContext", {"browserContextId": context})

        return Rendered(url=url, width=width, height=height, dom=page["dom"], text=page["text"], title=page["title"],
                        page_width=page_width, page_height=page_height, console=events.console,
                        page_errors=events.page_errors, failed_loads=events.failed_loads,
                        network_requests=events.network_requests, screenshot=screenshot)


def _evaluate(call: Callable[..., dict], session: str, expression: str):
    """The value of a JavaScript expression in the page, after the promise it returns (if any) settled."""
    answer = call("Runtime.evaluate", {"expression": expression, "awaitPromise": True, "returnByValue": True}, session)
    if "exceptionDetails" in answer:
        raise BrowserError(f"{expression!r} failed in the page: {_describe_exception(answer['exceptionDetails'])}")
    return answer["result"].get("value")


def _describe_exception(details: dict) -> str:
    exception = details.get("exception", {})
    return exception.get("description") or str(exception.get("value", details.get("text", "")))


def _remote_text(value: dict) -> str:
    """A console.* argument as the DevTools console prints it."""
    if "value" in value:
        return value["value"] if isinstance(value["value"], str) else json.dumps(value["value"])
    return value.get("unserializableValue") or value.get("description") or value.get("type", "")


class _PageEvents:
    """What one page reports while it loads and runs: console messages, uncaught exceptions, failed and blocked
    requests, and its lifecycle (to know when it has loaded)."""

    def __init__(self, pipe: _DevToolsPipe, session: str):
        self._pipe = pipe
        self._session = session
        self._request_urls: dict[str, str] = {}
        self.console: list[ConsoleMessage] = []
        self.page_errors: list[str] = []
        self.failed_loads: list[FailedLoad] = []
        self.network_requests: list[str] = []
        self.lifecycle: set[tuple[str, str]] = set()  # (loader id, event name)

    def record(self, method: str, params: dict) -> None:
        if method == "Runtime.consoleAPICalled":
            text = " ".join(_remote_text(argument) for argument in params["args"])
            self.console.append(ConsoleMessage(params["type"], text, "console-api"))
        elif method == "Log.entryAdded":
            entry = params["entry"]
            text = f"{entry['text']} ({entry['url']})" if entry.get("url") else entry["text"]
            self.console.append(ConsoleMessage(entry["level"], text, entry["source"]))
        elif method == "Runtime.exceptionThrown":
            self.page_errors.append(_describe_exception(params["exceptionDetails"]))
        elif method == "Network.requestWillBeSent":
            self._request_urls[params["requestId"]] = params["request"]["url"]
        elif method == "Network.loadingFailed":
            url = self._request_urls.get(params["requestId"], "?")
            self.failed_loads.append(FailedLoad(url, params["errorText"]))
        elif method == "Network.webSocketCreated":
            self.network_requests.append(params["url"])
        elif method == "Fetch.requestPaused":
            # Answered at once, or the page would wait for it; its answer is not awaited.
            self.network_requests.append(params["request"]["url"])
            self._pipe.send("Fetch.failRequest", {"requestId": params["requestId"], "errorReason": "BlockedByClient"},
                            self._session)
        elif method == "Page.lifecycleEvent":
            self.lifecycle.add((params["loaderId"], params["name"]))


class _DevToolsPipe:
    """The DevTools protocol over --remote-debugging-pipe: JSON messages, each ended by a NUL byte.  Events are passed
    to the listener of their session as they are read, while a caller waits for an answer or a condition."""

    def __init__(self, to_browser: int, from_browser: int, log_path: Path):
        self._to_browser = to_browser
        self._from_browser = from_browser
        self._log_path = log_path
        self._last_id = 0
        self._answers: dict[int, dict] = {}
        self._pending: list[bytes] = []  # the start of a message not yet ended
        self.listeners: dict[str, Callable[[str, dict], None]] = {}

    def send(self, method: str, params: dict | None = None, session: str | None = None) -> int:
        self._last_id += 1
        message = {"id": self._last_id, "method": method, "params": params or {}}
        if session is not None:
            message["sessionId"] = session
        data = json.dumps(message).encode() + b"\0"
        while data:
            data = data[os.write(self._to_browser, data):]
        return self._last_id

    def call(self, method: str, params: dict | None = None, session: str | None = None, *, deadline: float) -> dict:
        sent = self.send(method, params, session)
        self.wait_until(lambda: sent in self._answers, deadline, method)
        answer = self._answers.pop(sent)
        if "error" in answer:
            raise BrowserError(f"{method}: {answer['error'].get('message')}")
        return answer.get("result", {})

    def wait_until(self, condition: Callable[[], bool], deadline: float, awaited: str) -> None:
        while not condition():
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise TimeoutError(f"the browser did not finish in time: {awaited}{self._log_tail()}")
            if select.select([self._from_browser], [], [], remaining)[0]:
                self._read()

    def _read(self) -> None:
        chunk = os.read(self._from_browser, 1 << 20)
        if not chunk:
            raise BrowserError(f"the browser exited{self._log_tail()}")
        *ends, rest = chunk.split(b"\0")
        for end in ends:
            message = json.loads(b"".join([*self._pending, end]))
            self._pending = []
            if "id" in message:
                self._answers[message["id"]] = message
            elif message.get("sessionId") in self.listeners:
                self.listeners[message["sessionId"]](message["method"], message.get("params", {}))
        if rest:
            self._pending.append(rest)

    def _log_tail(self) -> str:
        lines = self._log_path.read_text(errors="replace").splitlines()[-20:]
        return "\nbrowser's stderr, last lines:\n" + "\n".join(lines) if lines else ""
