"""Progress on stderr: one rewritten line on a terminal, a few lines elsewhere, nothing with --quiet (issue 12: an
exhaustive search printed 6,480 lines)."""

from __future__ import annotations

import io

from duckanon.cli.console import Console


class Clock:
    def __init__(self):
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def _search(console: Console, clock: Clock, seconds: float = 60.0, nodes: int = 6480) -> None:
    """What a long exhaustive search reports: two stages, then a count after every node, then two more stages."""
    console.progress("reading the source and checking the policy's parameters")
    console.progress("exhaustive search over 6480 transformations")
    for node in range(1, nodes + 1):
        clock.now = seconds * node / nodes
        console.progress(f"{node} nodes checked")
    console.progress("recoding the quasi-identifiers")
    console.progress("writing and verifying release.duckdb")


def test_a_log_gets_each_stage_and_a_count_every_ten_seconds():
    clock, err = Clock(), io.StringIO()
    _search(Console(io.StringIO(), err, clock=clock), clock)
    lines = err.getvalue().splitlines()
    counts = [line for line in lines if "nodes checked" in line]
    assert len(counts) == 6  # at 0.01 s, then once each ten seconds of the sixty
    assert len(lines) == 4 + len(counts)
    assert lines[0] == "[   0.00 s] reading the source and checking the policy's parameters"
    assert lines[-1] == "[  60.00 s] writing and verifying release.duckdb"


def test_a_terminal_gets_one_line_rewritten_and_cleared_before_results():
    clock, out, err = Clock(), io.StringIO(), Terminal()
    console = Console(out, err, clock=clock)
    _search(console, clock)
    written = err.getvalue()
    assert "\n" not in written  # every message rewrote the same line
    assert written.count("\r") <= 4 + 60 / 0.1 + 1  # redrawn at most ten times a second
    assert written.endswith("writing and verifying release.duckdb\x1b[K")
    console.say("released 30162 of 30162 records")
    assert err.getvalue().endswith("\r\x1b[K")  # the progress line is gone before the result shows
    assert out.getvalue() == "released 30162 of 30162 records\n"
    console.clear()
    assert err.getvalue().count("\r\x1b[K") == 1  # nothing left to clear


def test_quiet_writes_no_progress():
    clock, err = Clock(), Terminal()
    _search(Console(io.StringIO(), err, quiet=True, clock=clock), clock)
    assert err.getvalue() == ""
