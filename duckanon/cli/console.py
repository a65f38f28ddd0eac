"""Where the command line writes: results to stdout, progress to stderr.

Long work reports progress in many short messages (a search says how many nodes it has checked after every batch,
thousands of times).  On a terminal they share one line, rewritten in place; elsewhere (a log, a pipe) a message is
written when a new stage starts and a stage's repeated counts at most once per ``interval`` seconds (a six-minute
exhaustive search writes some forty lines, not thousands).
"""

from __future__ import annotations

import re
import shutil
import time
from typing import TextIO

_DIGITS = re.compile(r"\d+")
# Redrawing a terminal line more often than this costs time and shows nothing a reader can follow.
_REDRAW_SECONDS = 0.1


def _stage(message: str) -> str:
    """What stays the same across a stage's messages: the text without its numbers."""
    return _DIGITS.sub("#", message)


class Console:
    def __init__(self, out: TextIO, err: TextIO, *, quiet: bool = False, interval: float = 10.0, clock=time.monotonic):
        self.out, self.err, self.quiet, self.clock = out, err, quiet, clock
        self.terminal = _isatty(err)
        self.interval = _REDRAW_SECONDS if self.terminal else interval
        self.started = clock()
        self._last_stage: str | None = None
        self._last_shown = float("-inf")
        self._line_open = False  # a progress line is on the terminal, not yet ended

    def say(self, text: str) -> None:
        """A result line on stdout (the progress line is cleared first, so the two never share a line)."""
        self.clear()
        print(text, file=self.out, flush=True)

    def progress(self, message: str) -> None:
        if self.quiet:
            return
        now = self.clock()
        stage = _stage(message)
        if stage == self._last_stage and now - self._last_shown < self.interval:
            return
        self._last_stage, self._last_shown = stage, now
        line = f"[{now - self.started:7.2f} s] {message}"
        if self.terminal:
            width = shutil.get_terminal_size().columns - 1  # a wrapped line could not be rewritten by '\r'
            self.err.write("\r" + line[:width] + "\x1b[K")
            self._line_open = True
        else:
            self.err.write(line + "\n")
        self.err.flush()

    def clear(self) -> None:
        """Remove the progress line from the terminal (before results, errors, or exiting)."""
        if self._line_open:
            self.err.write("\r\x1b[K")
            self.err.flush()
            self._line_open = False

    def error(self, text: str) -> None:
        self.clear()
        print(text, file=self.err, flush=True)

    def seconds(self) -> float:
        return self.clock() - self.started


def _isatty(stream: TextIO) -> bool:
    isatty = getattr(stream, "isatty", None)
    return bool(isatty and isatty())
