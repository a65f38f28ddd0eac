"""``duckanon``: the command line.

``duckanon [search] [SOURCE] [options]`` searches the full-domain generalizations and publishes the best (with no
source, on the bundled Adult data); ``check``, ``mondrian``, ``cluster``, ``perturb``, ``run`` (a policy stored in
the database) and ``hierarchy intervals|redaction|dates`` do the rest; ``report`` and ``verify`` read a release,
``keygen`` makes a key to sign releases with.  ``duckanon --help`` lists them and the exit
codes; every failure is one line ``duckanon: error: …`` on stderr.
"""

from __future__ import annotations

import difflib
import logging
import os
import re
import sys
import traceback
from collections.abc import Sequence

import duckdb

from ..errors import (
    DigestMismatch,
    GeneratedSqlError,
    GuaranteeFails,
    MissingExtra,
    NotARelease,
    PolicyNotSatisfied,
    ReleaseCheckFailed,
    SignatureMismatch,
    WrongKey,
)
from .commands import COMMANDS
from .console import Console
from .parser import (
    DEFAULT_COMMAND,
    EXIT_DIGEST,
    EXIT_GUARANTEE,
    EXIT_INPUT,
    EXIT_INTERNAL,
    EXIT_INTERRUPTED,
    EXIT_IO,
    EXIT_NOT_A_RELEASE,
    EXIT_NOT_MET,
    EXIT_SIGNATURE,
    EXIT_UNVERIFIED,
    EXIT_WRONG_KEY,
    UsageError,
    build_parser,
)

_TOP_LEVEL = ("-h", "--help", "--version")


def _with_command(argv: Sequence[str]) -> list[str]:
    """The arguments with ``search`` in front when they name no command (``duckanon -o x.duckdb``).  A first word
    that is neither a command nor a file (``duckanon serch``) is refused, with the closest command."""
    argv = list(argv)
    if argv and (argv[0] in COMMANDS or argv[0] in _TOP_LEVEL):
        return argv
    if argv and not argv[0].startswith("-") and not os.path.exists(argv[0]) and not re.search(r"[./\\]", argv[0]):
        close = difflib.get_close_matches(argv[0], COMMANDS, n=1)
        hint = f"did you mean {close[0]!r}?" if close else f"commands: {', '.join(COMMANDS)}"
        raise UsageError(f"{argv[0]!r} is neither a command nor a file: {hint} (see duckanon --help)")
    return [DEFAULT_COMMAND, *argv]


def run(argv: Sequence[str] | None = None, out=None, err=None) -> int:
    """Run a command line; the exit code for the outcomes the command reports, exceptions for failures."""
    args = build_parser().parse_args(_with_command(sys.argv[1:] if argv is None else argv))
    console = Console(out or sys.stdout, err or sys.stderr, quiet=getattr(args, "quiet", False))
    try:
        return COMMANDS[args.command](args, console)
    finally:
        console.clear()


_VERIFICATION_CODES = {GuaranteeFails: EXIT_GUARANTEE, DigestMismatch: EXIT_DIGEST, SignatureMismatch: EXIT_SIGNATURE,
                       WrongKey: EXIT_WRONG_KEY, NotARelease: EXIT_NOT_A_RELEASE}


def exit_code(error: BaseException) -> int:
    if isinstance(error, (KeyboardInterrupt, duckdb.InterruptException)):
        return EXIT_INTERRUPTED
    if isinstance(error, GeneratedSqlError):
        return EXIT_INTERNAL
    if isinstance(error, MissingExtra):
        return EXIT_INPUT
    if isinstance(error, PolicyNotSatisfied):
        return EXIT_NOT_MET
    if isinstance(error, ReleaseCheckFailed):
        return EXIT_UNVERIFIED
    for kind, code in _VERIFICATION_CODES.items():
        if isinstance(error, kind):
            return code
    if isinstance(error, (UsageError, ValueError)):  # AnonymizationError and its kinds are ValueErrors
        return EXIT_INPUT
    if isinstance(error, (duckdb.Error, OSError)):
        return EXIT_IO
    return EXIT_INTERNAL


def _message(error: BaseException) -> str:
    if isinstance(error, (KeyboardInterrupt, duckdb.InterruptException)):
        return "interrupted"
    text = " ".join(str(error).split()) or type(error).__name__  # one line, whatever the message holds
    if isinstance(error, OSError) and error.filename is not None and str(error.filename) not in text:
        text = f"{text}: {error.filename}"
    if isinstance(error, GeneratedSqlError):
        text = f"internal error: {text}; please report it (DUCKANON_DEBUG=1 logs the statement)"
    elif exit_code(error) == EXIT_INTERNAL:
        text = f"internal error ({type(error).__name__}: {text}); please report it (DUCKANON_TRACEBACK=1 shows where)"
    return text


def main(argv: Sequence[str] | None = None) -> int:
    """The console script: :func:`run`, with every failure reported as one line and a documented exit code."""
    if os.environ.get("DUCKANON_DEBUG"):
        logging.basicConfig(level=logging.WARNING, format="duckanon: debug: %(message)s")
        logging.getLogger("duckanon").setLevel(logging.DEBUG)
    try:
        return run(argv)
    except SystemExit as done:  # --help and --version
        return done.code if isinstance(done.code, int) else 0
    except BaseException as error:  # noqa: BLE001 - each kind maps to its exit code; none may show a traceback
        if os.environ.get("DUCKANON_TRACEBACK"):
            traceback.print_exc()
        print(f"duckanon: error: {_message(error)}", file=sys.stderr, flush=True)
        return exit_code(error)


__all__ = ["build_parser", "exit_code", "main", "run"]
