"""Parts the experiments share: how useful a (generalized) table is to a classifier, printing result tables, progress
on stderr, and reading a release file back."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import duckdb
import pandas as pd
from sqlglot import exp

from duckanon.engine import as_engine
from duckanon.sqlgen import build as sb
from duckanon.utility.classification import classifier_accuracy  # noqa: F401 (the experiments import it from here)


def markdown_table(frame: pd.DataFrame, *, digits: int = 4) -> str:
    """``frame`` as a GitHub-flavoured Markdown table (index left out), floats to ``digits`` decimals."""
    def cell(value: object) -> str:
        if value is None or value is pd.NA or (isinstance(value, float) and value != value):
            text = ""
        elif isinstance(value, float):
            text = f"{value:.{digits}f}"
        else:
            text = str(value)
        return text.replace("|", "\\|").replace("\n", " ")

    header = [cell(c) for c in frame.columns]
    numeric = [pd.api.types.is_numeric_dtype(frame[c]) for c in frame.columns]
    rule = ["---:" if is_number else "---" for is_number in numeric]
    rows = [[cell(v) for v in row] for row in frame.itertuples(index=False, name=None)]
    return "\n".join("| " + " | ".join(line) + " |" for line in [header, rule, *rows])


class Progress:
    """A ``progress=`` callback for :func:`duckanon.connect` that prints to stderr with the elapsed time.

    Stage messages are printed as they come; the search's frequent "N nodes checked" messages at most every
    ``every`` seconds.  :meth:`note` prints a message of the experiment's own; :attr:`last_nodes` keeps the most
    recent node count, so a search that is stopped can still say how far it got."""

    def __init__(self, every: float = 5.0, stream=None):
        self.every, self.stream = every, stream if stream is not None else sys.stderr
        self.started = time.perf_counter()
        self._last_print = float("-inf")
        self.context = ""
        self.last_nodes: str | None = None

    def __call__(self, message: str) -> None:
        now = time.perf_counter()
        if message.endswith("nodes checked"):
            self.last_nodes = message
            if now - self._last_print < self.every:
                return
        self._last_print = now
        self.note(message)

    def note(self, message: str) -> None:
        prefix = f"[{time.perf_counter() - self.started:8.1f} s]"
        context = f" {self.context}:" if self.context else ""
        print(f"{prefix}{context} {message}", file=self.stream, flush=True)


def read_release(path: str | os.PathLike, table: str = "release") -> pd.DataFrame:
    """The released table of a release file, read-only, as a DataFrame."""
    with duckdb.connect(str(path), read_only=True) as reader:
        return as_engine(reader).frame(exp.select(exp.Star()).from_(sb.table(table)))


def code_version(root: str | os.PathLike | None = None) -> str:
    """The checkout's commit, and which files under duckanon/ differ from it: what a result's timings belong to."""
    root = Path(root) if root is not None else Path(__file__).resolve().parents[1]

    def git(*args: str) -> str:
        return subprocess.run(["git", "-C", str(root), *args], capture_output=True, text=True, check=True).stdout.strip()

    try:
        commit = git("rev-parse", "--short", "HEAD")
        changed = git("status", "--porcelain", "--", "duckanon").splitlines()
    except (OSError, subprocess.CalledProcessError):
        return "unknown (not a git checkout)"
    files = [line.split(maxsplit=1)[1] for line in changed if line.strip()]
    return f"commit {commit}" + (f" with uncommitted changes to {', '.join(files)}" if files else "")
