"""Errors duckanon raises.  All are ValueErrors so callers that validate input can catch one type."""


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
