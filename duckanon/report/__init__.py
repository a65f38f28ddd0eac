"""What a release risks and keeps, for a person to read: one self-contained HTML file.

:func:`write_report` gathers the figures (:mod:`.figures`: risk under the prosecutor, journalist and marketer models
with population uniqueness estimates, each attribute's distribution before and after, classification accuracy, the
privacy/utility frontier), draws them (:mod:`.plots`, matplotlib from the ``report`` extra) and writes the page
(:mod:`.render`).  The page (and, when asked, a DuckDB file of the figures' tables) is written under a temporary name
and renamed into place: a failed report leaves nothing.  The release is only read.
"""

from __future__ import annotations

import os
from pathlib import Path

from ..declare.budget import source_key
from ..declare.policy import Policy
from ..encode.binding import Workspace
from ..errors import AnonymizationError
from ..release.files import read_release_info, write_together
from ..release.verify import differentially_private_release
from . import plots
from .figures import FrontierRequest, Population, ReportFigures, collect
from .render import render
from .tables import checked_tables_path, write_tables

__all__ = ["FrontierRequest", "Population", "ReportFigures", "collect", "render", "report", "write_report"]
HTML_SUFFIXES = (".html", ".htm")


def write_report(workspace: Workspace, release_path: str | os.PathLike, output: str | os.PathLike, *,
                 source=None, policy: Policy | None = None, label: str | None = None,
                 population: Population | None = None, frontier: FrontierRequest | None = None,
                 threshold: float = 0.2, tables: str | os.PathLike | None = None,
                 custodian_view: bool = False, public_key: object | None = None,
                 noise: tuple[float, str, str | os.PathLike | None] | None = None) -> Path:
    """Write the report on the release at ``release_path`` to ``output`` (an ``.html`` file) and, given ``tables``
    (a ``.duckdb`` path), its figures as ``report_*`` tables into that file (:mod:`.tables`); see
    :func:`.figures.collect` for the rest (``custodian_view``: the source's own values, for the custodian only; ``public_key``: the verdict checks the
    release's signature too)."""
    output = Path(output)
    if output.suffix.lower() not in HTML_SUFFIXES:
        raise AnonymizationError(f"report path {str(output)!r} must end in .html")
    tables = None if tables is None else checked_tables_path(Path(tables), Path(release_path))
    given = [name for name, value in (("source", source), ("population", population), ("frontier", frontier))
             if value is not None]
    if given and differentially_private_release(read_release_info(release_path)):
        raise AnonymizationError(f"a differentially private release's report shows the release alone: its "
                                 f"{given[0]}'s figures are outside the guarantee; report without {given[0]}")
    plots.require()  # a missing extra fails before any work
    figures = collect(workspace, release_path, source=source, policy=policy, label=label, population=population,
                      frontier=frontier, threshold=threshold, custodian_view=custodian_view, public_key=public_key,
                      noise=noise)
    workspace.announce(f"writing {str(output)!r}" + ("" if tables is None else f" and {str(tables)!r}"))
    page = render(figures)
    writes = {output: lambda partial: partial.write_text(page, encoding="utf-8")}
    if tables is not None:
        writes[tables] = lambda partial: write_tables(figures, partial)
    write_together(writes)
    return output


def report(workspace: Workspace, release_path: str | os.PathLike, output: str | os.PathLike | None = None, *,
           source=None, policy: Policy | str | None = None, label: str | None = None,
           sampling_fraction: float | None = None, population=None, frontier=None, parameter: str = "k",
           metric: str = "loss", threshold: float = 0.2, tables: str | os.PathLike | None = None,
           custodian_view: bool = False, public_key: object | None = None,
           noise_epsilon: float | None = None, ledger: str | os.PathLike | None = None,
           source_name: str | None = None) -> Path:
    """:func:`write_report` with its options as plain values: ``source`` and ``population`` as any source (a table
    name, a data file, a relation), ``frontier`` the values of ``parameter`` to search the optimum under ``metric``
    for, ``noise_epsilon`` the ε of the source's class sizes with differential-privacy noise (spent from the
    source's privacy budget: the database's ledger or the file ``ledger``, where ``source_name`` names it, by default
    :func:`~duckanon.declare.budget.source_key`); ``output`` defaults to the release's path with ``.html``."""
    from ..encode.sources import source_relation
    engine = workspace.engine
    if output is None:
        output = Path(release_path).with_suffix(".html")
    if isinstance(policy, str):
        policy = workspace.catalog.policy(policy)
    chosen = None
    if sampling_fraction is not None or population is not None:
        chosen = Population(sampling_fraction, None if population is None else source_relation(engine, population))
    request = FrontierRequest(tuple(frontier), parameter, metric) if frontier is not None else None
    if request is not None and not request.values:
        raise AnonymizationError("frontier: give at least one value of the parameter")
    return write_report(workspace, release_path, output,
                        source=None if source is None else source_relation(engine, source), policy=policy,
                        label=label, population=chosen, frontier=request, threshold=threshold, tables=tables,
                        custodian_view=custodian_view, public_key=public_key,
                        noise=None if noise_epsilon is None else (
                            noise_epsilon, source_key(source) if source_name is None else source_name, ledger))
