"""Column roles, the one rule every release follows: each column of the source is named in exactly one role, or
``others`` says what becomes of the columns nobody named -- a column nobody classified is the commonest way personal
data leaks.  Identifiers are always dropped; every other role releases its column (generalized, perturbed or as it is).
:class:`~duckanon.declare.policy.Policy` (generalization) and :func:`~duckanon.perturb.perturbation.perturb` both assign their roles
here.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from ..errors import PolicyError

IDENTIFIER = "identifier"
# What becomes of a column without a role: an error (the default), dropped, or released as it is.
OTHERS = ("error", "drop", "insensitive")


def assign_roles(roles: Iterable[tuple[str, Iterable[str]]], *, repeatable: Sequence[str] = ()) -> dict[str, str]:
    """Each column's role from (role, columns) pairs; PolicyError for a name that is not a string or a column given
    two roles (naming it again in one of the ``repeatable`` roles is not a second role)."""
    assigned: dict[str, str] = {}
    for role, columns in roles:
        if isinstance(columns, str):
            raise PolicyError(f"{role} takes a list of column names, not the single string {columns!r}")
        for column in columns:
            if not isinstance(column, str):
                raise PolicyError(f"column names must be strings, got {column!r} as {role}")
            if column in assigned and not (role in repeatable and assigned[column] == role):
                raise PolicyError(f"column {column!r} is named twice as {role}" if assigned[column] == role
                                  else f"column {column!r} is given two roles: {assigned[column]} and {role}")
            assigned[column] = role
    return assigned


def check_others(others: object) -> None:
    if others not in OTHERS:
        raise PolicyError(f"others must be one of {OTHERS}, got {others!r}")


def released_columns(assigned: dict[str, str], columns: Sequence[str], others: str, *, owner: str,
                     role_names: str) -> list[str]:
    """The source's columns that are released, in source order: every column with a role but identifier, and the
    columns without one when ``others`` is ``insensitive``.  PolicyError for a named column the source lacks, and for
    columns without a role when ``others`` is ``error`` (``role_names`` lists the parameters that classify them)."""
    unknown = [c for c in assigned if c not in columns]
    if unknown:
        raise PolicyError(f"{owner} names columns the source does not have: {unknown}; it has {list(columns)}")
    unassigned = [c for c in columns if c not in assigned]
    if unassigned and others == "error":
        raise PolicyError(f"columns without a role: {unassigned}; classify them ({role_names}) or set others='drop' "
                          f"or others='insensitive'")
    return [c for c in columns
            if (c in assigned and assigned[c] != IDENTIFIER) or (c not in assigned and others == "insensitive")]
