"""Errors duckanon raises.  Errors of input are ValueErrors so callers that validate input can catch one type; a
missing optional part is an ImportError, and SQL of ours that DuckDB rejects a ``duckdb.Error``."""

import duckdb


class AnonymizationError(ValueError):
    """Base class: the message names the column, value or parameter at fault."""


class HierarchyError(AnonymizationError):
    """A hierarchy is malformed or does not cover the data."""


class PolicyError(AnonymizationError):
    """A policy names unknown columns, gives a column two roles, or has out-of-range parameters."""


class PolicyNotSatisfied(AnonymizationError):
    """The requested transformation cannot meet the policy within the suppression limit."""

    def __init__(self, message: str, report=None):
        super().__init__(message)
        self.report = report


class ReleaseCheckFailed(AnonymizationError):
    """A written release failed its verification (read back in a fresh connection); nothing was published."""


class MissingExtra(ImportError):
    """An optional part of duckanon is not installed; the message names the extra that brings it."""


class GeneratedSqlError(duckdb.Error):
    """DuckDB rejected a statement duckanon built as malformed (a bug of ours, not of the input); ``statement`` is its
    text.  A ``duckdb.Error`` still, for code that treats any database error alike."""

    def __init__(self, message: str, statement: str):
        super().__init__(message)
        self.statement = statement


class NotARelease(AnonymizationError):
    """A file that is not a release duckanon wrote, or whose ``release_info`` is gone or unreadable."""


class SigningKeyError(AnonymizationError):
    """A signing or public key that cannot be used: unreadable, encrypted, not Ed25519.  Never shows the key."""


class VerificationFailed(AnonymizationError):
    """A release does not prove what it claims (:func:`duckanon.verify`); ``verification`` holds every check."""

    def __init__(self, message: str, verification=None):
        super().__init__(message)
        self.verification = verification


class GuaranteeFails(VerificationFailed):
    """A guarantee recomputed from the released rows fails, or differs from what ``release_info`` claims."""


class DigestMismatch(VerificationFailed):
    """The released rows' content digest differs from the one ``release_info`` records: they changed."""


class SignatureMismatch(VerificationFailed):
    """The signature does not match the release's info and digest under the key that made it: it was altered."""


class WrongKey(VerificationFailed):
    """The key given is not the one that signed the release, or the release is not signed."""
