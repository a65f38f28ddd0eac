"""A privacy policy: which columns play which role, and the privacy models the release must satisfy.

Roles: identifiers are dropped; quasi-identifiers are generalized along their hierarchy (or, given None instead of a
hierarchy, only by partitioning algorithms such as Mondrian, which cut numbers on their value and categories along an
order and need no hierarchy; full-domain generalization rejects them); sensitive attributes are
protected by the models that name them and released as they are; insensitive attributes are released as they are;
strata (a region, a survey wave) are released as they are and split the data: every model holds within each stratum
as if it were a table of its own (its classes, the table a class is compared with, the risk thresholds, the class of
its suppressed records, which keep their stratum), while the suppression limit counts the whole release;
``pseudonymize``, ``mask`` and ``date_shift`` columns are released transformed by their method
(:mod:`duckanon.recode.protect`), and form no class.
Every column of the source must have a role, unless ``others`` says what to do with the rest: a column nobody
classified is the commonest way personal data leaks.

Policies are data: :meth:`Policy.to_rows` and :meth:`Policy.from_rows` give the rows the anonymizer stores in
``anon.policy_columns``, ``anon.policy_models`` and ``anon.policy_methods``.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from ..errors import PolicyError
from ..hierarchy.hierarchy import TOP, Hierarchy
from ..privacy.models import PrivacyModel, sensitive_attributes
from ..privacy.people import counts_people, people_k, sets_signature_k
from ..privacy.registry import model_from_params
from ..recode.protect import (
    ColumnMethod,
    DateShift,
    Mask,
    Pseudonymize,
    method_from_params,
)
from .roles import IDENTIFIER, assign_roles, check_others, released_columns

# replace: violating records' quasi-identifiers become '*', and those records, one class, must satisfy the policy too;
# drop: violating records leave the release (and the table models such as t-closeness compare with);
# replace-unchecked: ARX's semantics -- replaced as in replace, but left out of every check, while models that compare
# with the table still compare with all records.
SUPPRESSION_MODES = ("replace", "drop", "replace-unchecked")
SUPPRESSED = TOP  # what a suppressed record shows: the top of every hierarchy
# The roles a person column may have: it is released, so that a recipient can check the guarantee per person.
PERSON_ROLES = ("pseudonymize", "insensitive")
PERSON_ROLE = "person"  # its row in anon.policy_columns and in a release's policy columns
RECORD_TABLE_ROLE = "record-table"  # the row of the column naming each record's table, in a release of several
STRATUM_ROLE = "stratum"


def exempt_class(suppression: str) -> str | None:
    """The value every quasi-identifier of a class shows when checks leave that class out under a suppression mode:
    '*' under ``replace-unchecked`` (ARX's semantics), none otherwise."""
    return SUPPRESSED if suppression == "replace-unchecked" else None


@dataclass
class Policy:
    quasi_identifiers: Mapping[str, Hierarchy | str | None]
    models: Sequence[PrivacyModel]
    identifiers: Sequence[str] = ()
    sensitive: Sequence[str] = ()
    insensitive: Sequence[str] = ()
    # Unset: "drop" under a differential-privacy model (SafePub releases only the kept sample), "replace" otherwise.
    suppression: str | None = None
    # Share of records that may be suppressed; unset it is 0, or no cap beyond max_suppressed when that is given
    # (or, under a differential-privacy model, whatever its derived k asks).
    suppression_limit: float | None = None
    others: str = "error"
    max_suppressed: int | None = None
    # Columns released transformed: pseudonyms (a list: each under the release's random key), masks, date shifts.
    pseudonymize: Sequence[str] | Mapping[str, Pseudonymize] = ()
    mask: Mapping[str, Mask] = field(default_factory=dict)
    date_shift: Mapping[str, DateShift] = field(default_factory=dict)
    # Columns released as they are within each of whose values (together) every model holds on its own.
    strata: Sequence[str] = ()
    # The column naming each record's person: models count people and their signatures, not records
    # (:mod:`duckanon.privacy.people`); suppression and its limit count people.
    person: str | None = None
    # In a release of several tables stacked into one (:mod:`duckanon.encode.tables`, which sets it), the column
    # naming each record's table: a person's signature is then the set of their (table, class) pairs.
    record_table: str | None = None
    _roles: dict[str, str] = field(init=False, repr=False)

    @property
    def drops(self) -> bool:
        """Whether suppressed records leave the release (``drop``)."""
        return self.suppression == "drop"

    @property
    def checks_replaced(self) -> bool:
        """Whether suppressed records, replaced by '*', must satisfy the policy as one class (``replace``; not under
        ARX's ``replace-unchecked``)."""
        return self.suppression == "replace"

    @property
    def exempt_class(self) -> str | None:
        """The value every quasi-identifier of a class shows when checks leave that class out: '*' under
        ``replace-unchecked``."""
        return exempt_class(self.suppression)

    def __post_init__(self):
        self.quasi_identifiers = dict(self.quasi_identifiers)
        self.models = list(self.models)
        self.identifiers, self.insensitive = list(self.identifiers), list(self.insensitive)
        if isinstance(self.strata, str):
            raise PolicyError(f"strata takes a list of column names, not the single string {self.strata!r}")
        self.strata = list(self.strata)
        self.sensitive = list(self.sensitive) + [s for s in sensitive_attributes(self.models) if s not in self.sensitive]
        if not self.quasi_identifiers:
            raise PolicyError("a policy needs at least one quasi-identifier")
        if not self.models:
            raise PolicyError("a policy needs at least one privacy model (e.g. KAnonymity(5))")
        bad = [m for m in self.models if not isinstance(m, PrivacyModel)]
        if bad:
            raise PolicyError(f"not privacy models: {bad!r}")
        private = any(m.differentially_private for m in self.models)
        if self.suppression is None:
            self.suppression = "drop" if private else "replace"
        if self.suppression not in SUPPRESSION_MODES:
            raise PolicyError(f"suppression must be one of {SUPPRESSION_MODES}, got {self.suppression!r}")
        check_others(self.others)
        if self.suppression_limit is None:
            self.suppression_limit = 1.0 if self.max_suppressed is not None or private else 0.0
        limit = self.suppression_limit
        if isinstance(limit, bool) or not isinstance(limit, (int, float)) or not 0 <= limit <= 1:
            raise PolicyError(f"suppression_limit must be a share of records in [0, 1], got {limit!r}")
        if self.max_suppressed is not None and (isinstance(self.max_suppressed, bool) or not isinstance(
                self.max_suppressed, int) or self.max_suppressed < 0):
            raise PolicyError(f"max_suppressed must be a whole number of records >= 0, got {self.max_suppressed!r}")
        if isinstance(self.pseudonymize, str):
            raise PolicyError(f"pseudonymize takes a list of column names or a mapping to Pseudonymize, not the single "
                              f"string {self.pseudonymize!r}")
        self.pseudonymize = (dict(self.pseudonymize) if isinstance(self.pseudonymize, Mapping)
                             else {c: Pseudonymize() for c in self.pseudonymize})
        self.mask, self.date_shift = dict(self.mask), dict(self.date_shift)
        for role, methods, kind in (("pseudonymize", self.pseudonymize, Pseudonymize), ("mask", self.mask, Mask),
                                    ("date_shift", self.date_shift, DateShift)):
            wrong = {c: m for c, m in methods.items() if not isinstance(m, kind)}
            if wrong:
                raise PolicyError(f"{role} maps columns to {kind.__name__}, got {wrong!r}")
        self._roles = assign_roles((
            (IDENTIFIER, self.identifiers), ("quasi-identifier", self.quasi_identifiers),
            ("sensitive", self.sensitive), ("insensitive", self.insensitive), (STRATUM_ROLE, self.strata),
            *((method.role, [column]) for column, method in self.methods.items())), repeatable=["sensitive"])
        for model in self.models:
            if model.sensitive is not None and self._roles.get(model.sensitive) != "sensitive":
                raise PolicyError(f"{model.name} protects {model.sensitive!r}, which is a {self._roles[model.sensitive]}")
        for column, shift in self.date_shift.items():
            if shift.by is None:
                if self.person is None:
                    raise PolicyError(f"date_shift of {column!r} names no person column: give DateShift(by=...) or "
                                      f"the policy a person=")
                shift = self.date_shift[column] = dataclasses.replace(shift, by=self.person)
            if shift.by in self.quasi_identifiers:
                raise PolicyError(f"date_shift of {column!r} is by {shift.by!r}, a quasi-identifier: a person is "
                                  f"named by an identifier or a pseudonymized column")

        if self.person is not None:
            self._check_person()
        if self.strata and self.person is not None:
            raise PolicyError(f"strata {self.strata} under a policy with person=: a person's records may fall in "
                              f"several strata, whose signatures are not defined yet; stratify a policy of records")
        if self.record_table is not None and (self.person is None or self.role(self.record_table) != "insensitive"):
            raise PolicyError(f"record_table {self.record_table!r} must be released as it is (insensitive), under a "
                              f"policy that counts people (person=)")

    def _check_person(self) -> None:
        person = self.person
        if not isinstance(person, str) or not person:
            raise PolicyError(f"person must name the column of each record's person, got {person!r}")
        role = self._roles.get(person)
        if role not in PERSON_ROLES:
            raise PolicyError(f"person column {person!r} must be released, pseudonymized (pseudonymize) or as it is "
                              f"(insensitive), so that a recipient can check the guarantee per person; it is "
                              f"{'a ' + role if role else 'given no role'}")
        counting = [m.describe() for m in self.models if not counts_people(m)]
        if counting:
            raise PolicyError(f"{', '.join(counting)} cannot count people yet: a policy with person= enforces "
                              f"k over people's signatures (KAnonymity, k-map, profitability without an attack), "
                              f"risk thresholds over their groups, the models counted in a population table over "
                              f"its people, and the models of a class's sensitive values (l-diversity, t-closeness, "
                              f"β-likeness, δ-disclosure, (α,k)-anonymity, p-sensitive k-anonymity) with each "
                              f"person's value counted once per class and once in the table, and the profitability "
                              f"models that price a signature group by its costliest class")
        if not any(sets_signature_k(m) for m in self.models):
            raise PolicyError("a policy with person= needs KAnonymity (KAnonymity(1) for none) or another model with "
                              "a k: the largest k is the number of people each signature must be shared by")

    @property
    def person_columns(self) -> list[str]:
        """The columns that say whose record each is and, in a release of several tables, from which table."""
        return [c for c in (self.person, self.record_table) if c is not None]

    @property
    def person_k(self) -> int:
        """The k every signature must be shared by (the largest of the policy's k-anonymity models)."""
        return people_k(self.models)

    def suppression_units(self, records: int, people: int | None) -> int:
        """How many units (people under a policy with person=, records otherwise) may be suppressed."""
        return self.allowed_suppressed(people if self.person is not None else records)

    @property
    def methods(self) -> dict[str, ColumnMethod]:
        """Each column released transformed, with its method."""
        return {**self.pseudonymize, **self.mask, **self.date_shift}

    def allowed_suppressed(self, records: int) -> int:
        """How many records may be suppressed: the share limit, capped by ``max_suppressed`` (seed 002's MaxSup)."""
        allowed = int(self.suppression_limit * records + 1e-9)
        return allowed if self.max_suppressed is None else min(allowed, self.max_suppressed)

    @property
    def class_keys(self) -> list[str]:
        """The columns whose equal values form a class: the strata first (they tell apart the tables every model
        holds in), then the quasi-identifiers."""
        return [*self.strata, *self.quasi_identifiers]

    @property
    def quasi_identifier_names(self) -> list[str]:
        return list(self.quasi_identifiers)

    def role(self, column: str) -> str | None:
        return self._roles.get(column)

    def bind(self, columns: Sequence[str]) -> list[str]:
        """Check the policy against the source's columns; return the columns the release keeps, in source order."""
        missing = [(c, m.by) for c, m in self.date_shift.items() if m.by not in columns]
        if missing:
            raise PolicyError(f"date_shift of {missing[0][0]!r} is by {missing[0][1]!r}, which the source does not "
                              f"have; it has {list(columns)}")
        return released_columns(self._roles, columns, self.others, owner="the policy",
                                role_names="identifiers, quasi_identifiers, sensitive, insensitive, strata, "
                                           "pseudonymize, mask, date_shift")

    # ------------------------------------------------------------ stored as data
    def method_rows(self) -> list[tuple[str, str]]:
        """(column, parameters as JSON) of each column released transformed, as ``anon.policy_methods`` holds them."""
        return [(c, json.dumps(m.params())) for c, m in self.methods.items()]

    def to_rows(self, hierarchy_tables: Mapping[str, str]) -> tuple[list[tuple], list[tuple], dict]:
        """(column rows, model rows, settings) with hierarchies referred to by their table names."""
        columns = [(c, self._roles[c], hierarchy_tables.get(c)) for c in self._roles]
        if self.person is not None:
            columns.append((self.person, PERSON_ROLE, None))
        if self.record_table is not None:
            columns.append((self.record_table, RECORD_TABLE_ROLE, None))
        models = [(i, m.name, m.sensitive, json.dumps(m.params(), default=str)) for i, m in enumerate(self.models)]
        settings = {"suppression": self.suppression, "suppression_limit": self.suppression_limit, "others": self.others,
                    "max_suppressed": self.max_suppressed}
        return columns, models, settings

    @classmethod
    def from_rows(cls, columns: Iterable[tuple], models: Iterable[tuple], settings: Mapping,
                  hierarchies: Mapping[str, Hierarchy], methods: Iterable[tuple[str, str]] = ()) -> Policy:
        """The policy of stored rows; ``methods`` are (column, parameters as JSON) of columns released transformed
        (a pseudonymized column without a row is hashed under the release's random key)."""
        by_role: dict[str, list[str]] = {}
        quasi: dict[str, Hierarchy | None] = {}
        person = record_table = None
        for column, role, _table in columns:
            if role == RECORD_TABLE_ROLE:
                record_table = column
            elif role == PERSON_ROLE:
                if person is not None:
                    raise PolicyError(f"two person columns: {person!r} and {column!r}")
                person = column
            elif role == "quasi-identifier":
                quasi[column] = hierarchies.get(column)  # None: a quasi-identifier stored without a hierarchy
            else:
                by_role.setdefault(role, []).append(column)
        parameters = dict(methods)
        stray = [c for c in parameters if c not in {c for role in ("pseudonymize", "mask", "date-shift")
                                                     for c in by_role.get(role, [])}]
        if stray:
            raise PolicyError(f"column {stray[0]!r} has method parameters but not the role pseudonymize, mask or "
                              f"date-shift")
        transformed: dict[str, dict[str, ColumnMethod]] = {}
        for role in ("pseudonymize", "mask", "date-shift"):
            for column in by_role.get(role, []):
                if column not in parameters and role != "pseudonymize":
                    raise PolicyError(f"{role} column {column!r} has no parameters in anon.policy_methods")
                transformed.setdefault(role, {})[column] = method_from_params(
                    role, json.loads(parameters.get(column, "{}")))
        rebuilt = [model_from_params(name, json.loads(params)) for _i, name, _s, params in sorted(models)]
        return cls(quasi_identifiers=quasi, models=rebuilt, identifiers=by_role.get("identifier", []),
                   sensitive=by_role.get("sensitive", []), insensitive=by_role.get("insensitive", []),
                   suppression=settings["suppression"], suppression_limit=float(settings["suppression_limit"]),
                   others=settings["others"], max_suppressed=settings.get("max_suppressed"),
                   pseudonymize=transformed.get("pseudonymize", {}), mask=transformed.get("mask", {}),
                   date_shift=transformed.get("date-shift", {}), strata=by_role.get(STRATUM_ROLE, []),
                   person=person, record_table=record_table)

    def describe(self) -> str:
        return "; ".join(m.describe() for m in self.models)

    def for_data(self, facts) -> Policy:
        """This policy with each model as it applies to data of these facts (:meth:`PrivacyModel.for_data`)."""
        return dataclasses.replace(self, models=[m.for_data(facts) for m in self.models])

    def with_parameter(self, parameter: str, value: object) -> Policy:
        """This policy with ``parameter`` (``k``, ``l``, ``t``, ...) set to ``value`` in every model that has it."""
        models, changed = [], False
        for model in self.models:
            params = model.params()
            if parameter in params:
                model, changed = model_from_params(model.name, {**params, parameter: value}), True
            models.append(model)
        if not changed:
            raise PolicyError(f"no model of the policy ({self.describe()}) has a parameter {parameter!r}")
        return dataclasses.replace(self, models=models)
