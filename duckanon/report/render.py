"""The report as one self-contained HTML file: inline CSS and SVG, no script, nothing fetched from a network.

Every figure in a table cell carries ``data-figure="<section>.<name>"`` so that a test (or a reader's tool) finds the
number the page shows; the numbers are written with enough digits to compare with an independent computation.
"""

from __future__ import annotations

import html
import json
import math

import pandas as pd

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
"""


def render(figures: ReportFigures) -> str:
    info = figures.info
    body = [f"<h1>Release report: {_text(figures.path.name)}</h1>",
            f'<p class="lead">{_text(info["kind"])} · table <code>{_text(info["released_table"])}</code> · written '
            f'{_text(info["created"])} UTC by duckanon {_text(info["tool_version"])}</p>',
            _cards(figures), _policy(figures), _transformation(figures), _suppression(figures), _risk(figures),
            _utility(figures), _frontier(figures)]
    if figures.notes:
        body.append("<h2>What this report leaves out</h2>" + "".join(f'<p class="note">{_text(n)}</p>'
                                                                    for n in figures.notes))
    return ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">"
            f"<title>Release report: {_text(figures.path.name)}</title><style>{_STYLE}</style></head>"
            f"<body><main>{''.join(body)}</main></body></html>\n")


def _cards(figures: ReportFigures) -> str:
    info = figures.info
    cards = [("records released", info["released_records"], "release.records"),
             ("records suppressed", info["suppressed_records"], "release.suppressed"),
             ("source records", info["source_records"], "source.records")]
    if figures.risk is not None:
        prosecutor = figures.risk.prosecutor("release")
        cards += [("highest prosecutor risk", prosecutor["highest"], "release.highest_risk"),
                  ("average prosecutor risk", prosecutor["average"], "release.average_risk")]
    return '<div class="cards">' + "".join(
        f'<div class="card"><div class="value" data-figure="{key}">{_number(value)}</div>'
        f'<div class="name">{_text(name)}</div></div>' for name, value, key in cards) + "</div>"


def _policy(figures: ReportFigures) -> str:
    policy = figures.info.get("policy")
    if not policy:
        return "<h2>Policy</h2><p>The release records no privacy policy (a perturbation publishes new values).</p>"
    columns = pd.DataFrame(policy["columns"]).rename(columns={"hierarchy": "hierarchy table"})
    models = pd.DataFrame([{"model": m["model"], "sensitive": m["sensitive"],
                            "parameters": json.dumps(m["params"], sort_keys=True)} for m in policy["models"]])
    settings = {k: policy.get(k) for k in ("suppression", "suppression_limit", "max_suppressed", "others")}
    return ("<h2>Policy</h2>" f"<p><strong>{_text(policy.get('description', ''))}</strong></p>"
            + _table(models, "policy.models") + _table(columns, "policy.columns")
            + "<p>" + ", ".join(f"{_text(k)}: <code>{_text(v)}</code>" for k, v in settings.items()) + "</p>")


def _transformation(figures: ReportFigures) -> str:
    transformation = figures.info.get("transformation") or {}
    parts = ["<h2>Transformation</h2>"]
    if figures.levels is not None:
        levels = figures.levels
        parts.append(_table(levels, "transformation.levels"))
        if levels["highest"].notna().all():
            height, top = int(levels["level"].sum()), int(levels["highest"].sum())
            parts.append(f'<p>The transformation sits at height <span data-figure="transformation.height">{height}'
                         f'</span> of <span data-figure="transformation.top">{top}</span> in the lattice of '
                         f"full-domain generalizations (0 releases every value as it is, {top} generalizes every "
                         f"attribute to its top).</p>")
            parts.append(_figure(plots.levels(list(levels["attribute"]), list(levels["level"]),
                                              [int(h) for h in levels["highest"]]),
                                 "Each quasi-identifier's level against its hierarchy's highest."))
    else:
        parts.append(_json_block(transformation))
    return "".join(parts)


def _suppression(figures: ReportFigures) -> str:
    info = figures.info
    source, suppressed = info["source_records"], info["suppressed_records"]
    share = suppressed / source if source else 0.0
    mode = info.get("suppression")
    how = {"replace": "their quasi-identifiers replaced by *", "drop": "left out of the release"}.get(mode, "")
    return (f"<h2>Suppression</h2><p><span data-figure=\"suppression.records\">{suppressed}</span> of {source} records "
            f"(<span data-figure=\"suppression.share\">{_number(share)}</span>) were suppressed{', ' + how if how else ''}"
            f".</p>")


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
                  f"{_number(figures.risk.threshold)}.</p>")
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
    return "".join(parts)


def _utility(figures: ReportFigures) -> str:
    parts = ["<h2>Utility</h2>"]
    if len(figures.metrics):
        parts.append(_table(figures.metrics, "metrics"))
    if figures.accuracy is not None:
        parts.append("<h3>Classification accuracy</h3>" + _table(figures.accuracy, "accuracy"))
    for comparison in figures.comparisons:
        parts.append(f"<h3>{_text(comparison.attribute)}</h3>")
        summary = (f"{comparison.original_distinct} distinct values in the source, {comparison.released_distinct} "
                   f"in the release")
        if comparison.total_variation is not None:
            summary += (f"; total variation distance over the same bins <span data-figure=\"distribution."
                        f"{_text(comparison.attribute)}.tv\">{_number(comparison.total_variation)}</span>")
        parts.append(f"<p>{summary}.</p>")
        parts.append(_figure(plots.distribution(comparison.original, comparison.released, comparison.attribute,
                                                comparison.binned),
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
    """``frame`` as an HTML table; each numeric cell tagged ``section.<row key>.<column>``, the row key being the
    first column's value."""
    key_column = frame.columns[0]
    numeric = [pd.api.types.is_numeric_dtype(frame[c]) and not pd.api.types.is_bool_dtype(frame[c])
               for c in frame.columns]
    head = "".join(f'<th class="{"n" if n else ""}">{_text(c)}</th>' for c, n in zip(frame.columns, numeric))
    rows = []
    for record in frame.to_dict(orient="records"):
        key = record[key_column]
        cells = []
        for column, is_number in zip(frame.columns, numeric):
            value = record[column]
            if is_number:
                cells.append(f'<td class="n" data-figure="{_text(f"{section}.{key}.{column}")}">{_number(value)}</td>')
            else:
                cells.append(f"<td>{_text('' if _missing(value) else value)}</td>")
        rows.append("<tr>" + "".join(cells) + "</tr>")
    return f'<div class="scroll"><table><thead><tr>{head}</tr></thead><tbody>{"".join(rows)}</tbody></table></div>'


def _json_block(value: object) -> str:
    return f"<pre>{_text(json.dumps(value, indent=1, sort_keys=True))}</pre>"


def _figure(svg: str, caption: str) -> str:
    return f"<figure>{svg}<figcaption>{_text(caption)}</figcaption></figure>"


def _missing(value: object) -> bool:
    return value is None or (isinstance(value, float) and math.isnan(value)) or value is pd.NA


def _number(value: object) -> str:
    """Whole numbers as they are; others with 6 significant digits (enough to compare at rel 1e-5)."""
    if _missing(value):
        return "–"
    if isinstance(value, bool):
        return str(value)
    if isinstance(value, (int,)) or (isinstance(value, float) and value.is_integer() and abs(value) < 1e15):
        return str(int(value))
    if hasattr(value, "item"):
        return _number(value.item())
    return f"{value:.6g}"


def _text(value: object) -> str:
    return html.escape(str(value))


