"""The report as one self-contained HTML file: inline CSS and SVG, no script, nothing fetched from a network.

Every figure carries ``data-figure="<section>.<name>"`` and its exact value in ``data-value`` so that a test (or a
reader's tool) finds it; the page itself shows numbers for people (thousands separators, percentages).
"""

from __future__ import annotations

import html
import json
import re

import numpy as np

from ..deferred import is_missing
from ..deferred import pandas as pd
from ..recode.protect import method_text
from ..release.verify import MISSING_MATCHES_ANY, person_of, plain_model, strata_of
from . import plots
from .figures import ReportFigures

_STYLE = """
:root { color-scheme: light; --ink: #1f2328; --muted: #59636e; --rule: #d1d9e0; --accent: #1f6feb; }
* { box-sizing: border-box; }
body { margin: 0; font: 15px/1.5 system-ui, -apple-system, "Segoe UI", sans-serif; color: var(--ink); background: #fff; }
main { max-width: 980px; margin: 0 auto; padding: 24px 20px 64px; }
h1 { font-size: 1.6em; margin: 0 0 4px; } h2 { font-size: 1.25em; margin: 36px 0 8px; border-bottom: 1px solid var(--rule); }
h3 { font-size: 1.05em; margin: 20px 0 6px; }
p.lead { color: var(--muted); margin-top: 0; }
.cards { display: grid; grid-template-columns: repeat(auto-fit, minmax(170px, 1fr)); gap: 10px; margin: 16px 0; }
.card { border: 1px solid var(--rule); border-radius: 8px; padding: 10px 12px; }
.card .value { font-size: 1.35em; font-weight: 600; } .card .name { color: var(--muted); font-size: .85em; }
.scroll { overflow-x: auto; margin: 8px 0; }
table { border-collapse: collapse; font-size: .92em; min-width: 320px; }
th, td { border-bottom: 1px solid var(--rule); padding: 4px 10px; text-align: left; vertical-align: top; }
td.n, th.n { text-align: right; font-variant-numeric: tabular-nums; }
figure { margin: 12px 0; } figure svg { max-width: 100%; height: auto; }
figcaption { color: var(--muted); font-size: .88em; }
.note { background: #f6f8fa; border-left: 3px solid var(--rule); padding: 6px 12px; margin: 6px 0; }
code { font-size: .9em; overflow-wrap: anywhere; }
pre { overflow-x: auto; max-width: 100%; background: #f6f8fa; padding: 8px; font-size: .85em; }
.verdict { border: 2px solid var(--rule); border-radius: 8px; padding: 10px 14px; margin: 14px 0; }
.verdict.holds { border-color: #1a7f37; } .verdict.fails { border-color: #d1242f; background: #fff5f5; }
.verdict p { margin: 4px 0; font-weight: 600; } .verdict td { overflow-wrap: anywhere; }
.custodian { background: #9a6700; color: #fff; font-weight: 600; padding: 8px 14px; margin: 0 -20px 16px; }
@media print { .custodian { position: fixed; top: 0; left: 0; right: 0; margin: 0; } main { padding-top: 56px; } }
"""


CUSTODIAN = ("Custodian's view: this page shows the source's own values, which the release hides. Keep it with the "
             "source; do not pass it on with the release.")


def render(figures: ReportFigures) -> str:
    info = figures.info
    title = ("Custodian's report" if figures.custodian_view else "Release report") + f": {figures.path.name}"
    body = ([f'<div class="custodian" role="alert">{_text(CUSTODIAN)}</div>'] if figures.custodian_view else []) + [
            f"<h1>{_text(title)}</h1>",
            f'<p class="lead">{_text(info["kind"])} · table <code>{_text(info["released_table"])}</code> · written '
            f'{_text(info["created"])} UTC by duckanon {_text(info["tool_version"])}</p>',
            _verdict(figures), _cards(figures), _policy(figures), _transformation(figures), _suppression(figures),
            _risk(figures), _utility(figures), _frontier(figures)]
    if figures.notes:
        body.append("<h2>What this report leaves out</h2>" + "".join(f'<p class="note">{_text(n)}</p>'
                                                                    for n in figures.notes))
    return ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">"
            f"<title>{_text(title)}</title><style>{_STYLE}</style></head>"
            f"<body><main>{''.join(body)}</main></body></html>\n")


def _verdict(figures: ReportFigures) -> str:
    verdict = figures.verdict
    checked = verdict[verdict["holds"].notna()]
    failed = checked[~checked["holds"].astype(bool)]
    if len(failed):
        lead = (f"This release fails its verification: {', '.join(failed['guarantee'])} "
                f"{'does' if len(failed) == 1 else 'do'} not hold what it claims, recomputed from the file.")
    elif len(checked):
        lead = ("This release passes its verification: every guarantee it claims holds, recomputed from the released "
                "rows in the file, and its content digest matches.")
    else:
        lead = "This release claims no guarantee that can be recomputed from its rows."
    # The verdict next to each guarantee, where a narrow screen still shows it; a digest shortened to what a reader
    # compares by eye (duckanon verify prints it whole).
    table = verdict.assign(holds=[{True: "holds", False: "FAILS"}.get(v, "not checked") for v in verdict["holds"]],
                           claimed=verdict["claimed"].map(_short_digest),
                           recomputed=verdict["recomputed"].map(_short_digest))[
        ["guarantee", "holds", "claimed", "recomputed"]]
    return (f'<section class="verdict {"fails" if len(failed) else "holds"}"><p>{_text(lead)}</p>'
            + _table(table, "verdict") + "</section>")


def _short_digest(text: str) -> str:
    return re.sub(r"\b(sha256:[0-9a-f]{12})[0-9a-f]{48}([0-9a-f]{4})\b", r"\1…\2", text)


def _cards(figures: ReportFigures) -> str:
    info = figures.info
    cards = [("records released", info["released_records"], "release.records", _count),
             ("records suppressed", info["suppressed_records"], "release.suppressed", _count),
             ("source records", info["source_records"], "source.records", _count)]
    people = (info.get("policy") or {}).get("people")
    if people:  # a policy that counts people: its limit is on people
        cards += [("people suppressed", people["suppressed"], "release.suppressed_people", _count),
                  ("source people", people["source"], "source.people", _count)]
    if figures.risk is not None:
        prosecutor, of = figures.risk.prosecutor("release"), " of a person" if figures.risk.counts_people else ""
        cards += [(f"highest prosecutor risk{of}", prosecutor["highest"], "release.highest_risk", _percent),
                  (f"average prosecutor risk{of}", prosecutor["average"], "release.average_risk", _percent)]
    return '<div class="cards">' + "".join(
        f'<div class="card"><div class="value" {_tag(key, value)}>{shown(value)}</div>'
        f'<div class="name">{_text(name)}</div></div>' for name, value, key, shown in cards) + "</div>"


def _policy(figures: ReportFigures) -> str:
    policy = figures.info.get("policy")
    if not policy:
        return "<h2>Policy</h2><p>The release records no privacy policy (a perturbation publishes new values).</p>"
    columns = pd.DataFrame([{"column": c["column"], "role": c["role"], "hierarchy table": c.get("hierarchy") or "",
                             "method": method_text(c["role"], c["method"]) if "method" in c else ""}
                            for c in policy["columns"]])
    models = pd.DataFrame({"model": [plain_model(m["model"], m["params"]) for m in policy["models"]]})
    share = float(policy.get("suppression_limit") or 0)
    person = person_of(policy)
    unit = "people" if person else "records"
    limit = (f"at most {_count(policy['max_suppressed'])} {unit}" if policy.get("max_suppressed") is not None else
             f"at most {_percent(share)} of the {unit}" if share else "none may be")
    how = _SUPPRESSED_HOW.get(policy.get("suppression"), "")
    others = {"drop": "dropped", "insensitive": "released as they are", "error": "refused"}.get(policy.get("others"), "")
    tables = policy.get("tables")
    valued = person and any(m.get("sensitive") for m in policy["models"])
    what = (f"The policy counts people (column {person}): people whose signature, the set of classes of all their "
            f"records, fewer than k people share are suppressed, every record of theirs"
            + (" and, counting each person's sensitive value once per class, the people of each class that violates "
               "a model over sensitive values, round after round until none more" if valued else "") if person
            else "Records in classes that violate the policy are suppressed")
    if policy.get(MISSING_MATCHES_ANY):
        what = ("The records of classes that violate the policy at the chosen levels lose single quasi-identifier "
                "values instead, each replaced by a missing value that matches any value when records are counted "
                "(cell suppression, as sdcMicro's localSuppression), until every record has k compatible records; no "
                "record is suppressed")
    strata = strata_of(policy)
    if strata:
        what = (f"Every model holds within each stratum of {', '.join(strata)} (released as it is) as if it were a "
                f"table of its own: a class is a stratum's combination of values, a model compares a class with its "
                f"stratum's records, and a stratum's suppressed records keep their stratum. " + what)
    if tables:
        each = "a file of the release's folder" if figures.path.is_dir() else "a view of the released table"
        what = (f"The release holds {len(tables)} tables joined by {person}, each {each}: "
                + ", ".join(f"{name} ({', '.join(columns)})" for name, columns in tables.items())
                + ". A class is one table's combination of values, and a person's signature the set of (table, "
                  "class) pairs of all their records; a model of a sensitive column judges the classes of the tables "
                  "that hold it. " + what)
    return ("<h2>Policy</h2>" + _table(models, "policy.models") + _table(columns, "policy.columns")
            + (f"<p>{_text(what)}. The records that may lose values: {_text(limit)}. "
               if policy.get(MISSING_MATCHES_ANY) else f"<p>{_text(what)} ({_text(how)}): {_text(limit)}. ")
            + (f"Columns the policy does not name are {_text(others)}." if others else "") + "</p>")


def _transformation(figures: ReportFigures) -> str:
    transformation = figures.info.get("transformation") or {}
    parts = ["<h2>Transformation</h2>"]
    if figures.levels is not None:
        levels = figures.levels
        parts.append("<p>Each quasi-identifier is generalized to one level of its hierarchy (0: the value itself, "
                     "higher levels: ever coarser labels, up to * at the top); a few labels of each chosen level "
                     "show what the release holds.</p>")
        parts.append(_table(levels, "transformation.levels"))
        if levels["highest"].notna().all():
            height, top = int(levels["level"].sum()), int(levels["highest"].sum())
            parts.append(f'<p>The transformation sits at height <span {_tag("transformation.height", height)}>{height}'
                         f'</span> of <span {_tag("transformation.top", top)}>{top}</span> in the lattice of '
                         f"full-domain generalizations (0 releases every value as it is, {top} generalizes every "
                         f"attribute to its top).</p>")
            parts.append(_figure(plots.levels(list(levels["attribute"]), list(levels["level"]),
                                              [int(h) for h in levels["highest"]]),
                                 "Each quasi-identifier's level against its hierarchy's highest."))
    else:
        parts.append(_json_block(transformation))
    return "".join(parts)


# What happened to suppressed records, per suppression mode.
_SUPPRESSED_HOW = {"replace": "their quasi-identifiers replaced by *", "drop": "left out of the release",
                   "replace-unchecked": "their quasi-identifiers replaced by *, not checked as a class of their own, "
                                        "as ARX does"}


def _suppression(figures: ReportFigures) -> str:
    info = figures.info
    cells = (info.get("transformation") or {}).get("cell suppression")
    if cells is not None:
        values = cells.get("suppressed cells") or {}
        total = sum(values.values())
        each = ", ".join(f"{_text(a)} {_count(n)}" for a, n in values.items() if n)
        return (f"<h2>Suppression</h2><p>No record was suppressed: <span {_tag('suppression.values', total)}>"
                f"{_count(total)}</span> values were, in <span {_tag('suppression.records', cells.get('records'))}>"
                f"{_count(cells.get('records'))}</span> of {_count(info['source_records'])} records"
                f"{' (' + each + ')' if each else ''}, each replaced by a missing value that matches any.</p>")
    source, suppressed = info["source_records"], info["suppressed_records"]
    if source is None:  # a differentially private release states neither
        return ("<h2>Suppression</h2><p>Withheld: under differential privacy the release states neither the "
                "source's size nor how many records were left out (those not drawn into the sample, and the classes "
                "of fewer than k drawn records).</p>")
    share = suppressed / source if source else 0.0
    mode = info.get("suppression")
    how = _SUPPRESSED_HOW.get(mode, "")
    people = (info.get("policy") or {}).get("people")
    whose = (f", every record of <span {_tag('suppression.people', people['suppressed'])}>"
             f"{_count(people['suppressed'])}</span> of the {_count(people['source'])} people" if people else "")
    return (f"<h2>Suppression</h2><p><span {_tag('suppression.records', suppressed)}>{_count(suppressed)}</span> of "
            f"{_count(source)} records (<span {_tag('suppression.share', share)}>{_percent(share)}</span>) were "
            f"suppressed{whose}{', ' + how if how else ''}.</p>")


def _risk(figures: ReportFigures) -> str:
    parts = ["<h2>Re-identification risk</h2>"]
    if figures.risk is None:
        metrics = figures.info.get("metrics") or {}
        parts.append("<p>Class-based risk does not apply to this release.</p>")
        if metrics.get("disclosure"):
            parts.append(_json_block(metrics["disclosure"]))
        return "".join(parts)
    parts.append("<p>Prosecutor: the attacker knows the target is in the data. Journalist: the attacker knows only "
                  "that the target is in the population. Marketer: the share of records an attacker who re-identifies "
                  "as many as possible gets right. A record is <em>at risk</em> when its risk exceeds the threshold "
                  f"{_percent(figures.risk.threshold)}. Risks and shares are in percent."
                  + (" The policy counts people: a person's prosecutor risk is 1 / the people who share their "
                     "signature (the set of classes of all their records), whatever the size of those classes; the "
                     "records' figures count each record as if it were a person." if figures.risk.counts_people
                     else "") + "</p>")
    parts.append(_table(figures.risk.table(), "risk"))
    estimates = figures.risk.population_table()
    if estimates is not None:
        parts.append("<h3>Population uniqueness</h3><p>Records estimated to be unique in the population, by "
                     "Pitman's, Zayatz's and the SNB model, and the one Dankar et al.'s rule picks.</p>")
        parts.append(_table(estimates, "population"))
    if figures.class_buckets is not None:
        parts.append(_figure(plots.class_sizes(figures.class_buckets),
                             "Share of records by the size of their class: the smaller the class, the higher the "
                             "risk."))
        parts.append(_table(figures.class_buckets, "class_sizes"))
    if figures.noisy_class_sizes is not None:
        noisy = figures.noisy_class_sizes
        parts.append(f"<h3>The source's classes by size, with differential privacy</h3><p>How many classes of the "
                     f"source have each size, each count with Laplace noise (ε = {figures.noise_epsilon:g}, scale "
                     f"{noisy['scale'].iloc[0]:g}, spent from the source's privacy budget): it is within "
                     f"{noisy['accuracy'].iloc[0]:.3g} of the true count with probability 95 %, and may be negative. "
                     f"Unlike the shares above, these may be passed on with the release.</p>")
        parts.append(_table(noisy[["bucket", "classes"]], "noisy_class_sizes"))
    if figures.special_uniques is not None:
        parts.append(_special_uniques(figures.special_uniques, figures.special_records))
    return "".join(parts)


def _special_uniques(table, records: dict[str, int]) -> str:
    """SUDA2's minimal sample uniques, by set of quasi-identifiers: why records are at risk."""
    text = ("<h3>Why records are at risk</h3><p>A record is a special unique when no other record shares its values "
            "on some set of quasi-identifiers, while on every smaller set another does (a minimal sample unique, "
            "SUDA2, as sdcMicro finds them; sets of at most "
            f"{_count(max(table['size'], default=0))} attributes here, a suppressed value never counting). "
            "Each row is a set of attributes and the records unique on it; the attacker who knows those attributes "
            "of such a record singles it out.</p><p>"
            + "; ".join(f'<span {_tag(f"special_uniques.{side}", count)}>{_count(count)}</span> records of the {side} '
                        f"are special uniques" for side, count in records.items()) + ".</p>")
    if not len(table):
        return text + "<p>No record is unique on any such set.</p>"
    return text + _table(table.head(15), "special_uniques")


def _utility(figures: ReportFigures) -> str:
    parts = ["<h2>Utility</h2>"]
    if len(figures.metrics):
        parts.append("<p>How much the release generalized (lower is better; shares in percent).</p>")
        parts.append(_table(figures.metrics, "metrics"))
    if figures.accuracy is not None:
        parts.append("<h3>Classification accuracy</h3><p>How well a classifier predicts the label from the "
                     "released attributes, against the same on the source.</p>" + _table(figures.accuracy, "accuracy"))
    if figures.comparisons:
        parts.append("<h3>Each attribute, source beside release</h3>")
        first = figures.comparisons[0]
        if figures.custodian_view:
            parts.append(f'<p class="note">{_text(CUSTODIAN)}</p>')
        elif first.withheld_below is not None:
            parts.append(f"<p>The source side is counted only over the release's own categories, and counts below "
                         f"{first.withheld_below} are withheld (shown as “&lt; {first.withheld_below}”), as statistical "
                         f"offices suppress small cells: the page shows nothing the release hides.</p>")
    for comparison in figures.comparisons:
        parts.append(f"<h3>{_text(comparison.attribute)}</h3>")
        summary = (f"{_count(comparison.original_distinct)} distinct values in the source, "
                   f"{_count(comparison.released_distinct)} in the release; the source side is counted "
                   f"{_text(comparison.how)}")
        if comparison.total_variation is not None:
            key = f"distribution.{comparison.attribute}.tv"
            summary += (f". Total variation distance between the two: <span {_tag(key, comparison.total_variation)}>"
                        f"{_percent(comparison.total_variation)}</span> of the records would have to move to turn one "
                        f"into the other")
        parts.append(f"<p>{summary}.</p>")
        parts.append(_figure(plots.distribution(comparison.original, comparison.released, comparison.attribute,
                                                comparison.aligned, comparison.withheld_below),
                             f"Records per value of {comparison.attribute}: source and release."))
    return "".join(parts)


def _frontier(figures: ReportFigures) -> str:
    if figures.frontier is None:
        return ""
    request, frame = figures.frontier_request, figures.frontier
    chosen = _chosen_value(figures)
    parts = [f"<h2>Privacy and utility for each {_text(request.parameter)}</h2>",
             f"<p>For each value of {_text(request.parameter)}, the optimal full-domain generalization under "
             f"{_text(request.metric)} and the risk of the release it gives. Pick the value where the curve of lost "
             "information still runs flat.</p>"]
    if "highest_risk" in frame:
        parts.append(_figure(plots.frontier(frame, request.parameter, request.metric, chosen),
                             f"{request.metric} and prosecutor risk of the optimum for each {request.parameter}."))
    parts.append(_table(frame.rename(columns={"value": request.parameter}), "frontier"))
    return "".join(parts)


def _chosen_value(figures: ReportFigures) -> object | None:
    policy = figures.info.get("policy") or {}
    for model in policy.get("models", []):
        if figures.frontier_request.parameter in model["params"]:
            return model["params"][figures.frontier_request.parameter]
    return None


# ------------------------------------------------------------------------------------------------ pieces
def _table(frame: pd.DataFrame, section: str) -> str:
    """``frame`` as an HTML table for people: headers without underscores, whole numbers with thousands
    separators, shares in percent.  Each numeric cell is tagged ``section.<row key>.<column>`` (the row key being the
    first column's value) with its exact value in ``data-value``."""
    key_column = frame.columns[0]
    numeric = [pd.api.types.is_numeric_dtype(frame[c]) and not pd.api.types.is_bool_dtype(frame[c])
               for c in frame.columns]
    head = "".join(f'<th class="{"n" if n else ""}">{_text(_words(c))}</th>' for c, n in zip(frame.columns, numeric))
    rows = []
    for record in frame.to_dict(orient="records"):
        key = record[key_column]
        cells = []
        for column, is_number in zip(frame.columns, numeric):
            value = record[column]
            if is_number:
                cells.append(f'<td class="n" {_tag(f"{section}.{key}.{column}", value)}>{_number(value)}</td>')
            else:
                shown = "" if is_missing(value) else {True: "yes", False: "no"}.get(value, value) if isinstance(
                    value, (bool, np.bool_)) else value
                cells.append(f"<td>{_text(shown)}</td>")
        rows.append("<tr>" + "".join(cells) + "</tr>")
    return f'<div class="scroll"><table><thead><tr>{head}</tr></thead><tbody>{"".join(rows)}</tbody></table></div>'


def _json_block(value: object) -> str:
    return f"<pre>{_text(json.dumps(value, indent=1, sort_keys=True))}</pre>"


def _figure(svg: str, caption: str) -> str:
    return f"<figure>{svg}<figcaption>{_text(caption)}</figcaption></figure>"


def _tag(key: str, value: object) -> str:
    """The attributes that let a test or a reader's tool find a figure and its exact value."""
    value = value.item() if hasattr(value, "item") else value
    if isinstance(value, float) and value.is_integer() and abs(value) < 1e15:
        value = int(value)  # a count held in a float column
    exact = "" if is_missing(value) else repr(value)
    return f'data-figure="{_text(key)}" data-value="{_text(exact)}"'


def _count(value: object) -> str:
    return "–" if is_missing(value) else f"{int(value):,}"


def _percent(value: object) -> str:
    """A share as a percentage with three significant digits (0 and 100 as they are)."""
    if is_missing(value):
        return "–"
    percent = 100 * float(value)
    return f"{percent:.0f} %" if percent in (0, 100) or percent >= 99.95 else f"{percent:.3g} %"


def _number(value: object) -> str:
    """Whole numbers with thousands separators, shares (0 to 1) in percent, others with four significant digits."""
    if is_missing(value):
        return "–"
    if hasattr(value, "item"):
        value = value.item()
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, int) or (isinstance(value, float) and value.is_integer() and abs(value) < 1e15):
        return _count(value)
    if 0 <= value <= 1:
        return _percent(value)
    return f"{value:,.4g}" if abs(value) < 1e4 else f"{value:,.0f}"


def _words(value: object) -> str:
    """Names as words: ``records_at_risk`` → ``records at risk``."""
    return str(value).replace("_", " ")


def _text(value: object) -> str:
    return html.escape(str(value))
