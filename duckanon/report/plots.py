"""The report's figures as inline SVG, drawn with matplotlib (the ``report`` extra): text stays text, so the figures
read in any browser offline and their labels can be searched."""

from __future__ import annotations

import io
import re
from collections.abc import Sequence

import numpy as np

from ..deferred import pandas as pd
from ..errors import MissingExtra

EXTRA = "from a checkout: pip install '.[report]'"
SOURCE_COLOUR, RELEASE_COLOUR, ACCENT = "#7a869a", "#1f6feb", "#d1242f"


def require():
    """matplotlib's pyplot, drawing to files; an ImportError naming the extra when it is not installed."""
    try:
        import matplotlib
    except ImportError as error:
        raise MissingExtra(f"the report's plots need matplotlib, part of duckanon's `report` extra: {EXTRA}") from error
    matplotlib.use("Agg")
    # Labels are data: a value such as '$$' must be drawn as written, never parsed as mathtext.
    matplotlib.rcParams.update({"svg.fonttype": "none", "font.size": 9, "axes.spines.top": False,
                                "axes.spines.right": False, "svg.hashsalt": "duckanon", "text.parse_math": False})
    import matplotlib.pyplot as plt
    return plt


def _svg(figure) -> str:
    buffer = io.StringIO()
    figure.savefig(buffer, format="svg", bbox_inches="tight", metadata={"Date": None})
    require().close(figure)
    text = buffer.getvalue()
    # Inline in HTML: no XML prolog, and no RDF metadata (its namespace URLs would be the page's only links out).
    return re.sub(r"<metadata>.*?</metadata>", "", text[text.index("<svg"):], flags=re.DOTALL)


def class_sizes(buckets: pd.DataFrame) -> str:
    """Share of records per class-size bucket, source beside release (``buckets``: bucket, source, release shares)."""
    plt = require()
    figure, axes = plt.subplots(figsize=(6.4, 2.8))
    x = np.arange(len(buckets))
    for offset, column, colour in ((-0.2, "source", SOURCE_COLOUR), (0.2, "release", RELEASE_COLOUR)):
        if column in buckets:
            axes.bar(x + offset, 100 * buckets[column], width=0.4, color=colour, label=column)
    axes.set_xticks(x, buckets["bucket"])
    axes.set_xlabel("records in the class")
    axes.set_ylabel("% of records")
    axes.legend(frameon=False)
    return _svg(figure)


def distribution(original: pd.DataFrame, released: pd.DataFrame, attribute: str, aligned: bool,
                 withheld_below: int | None = None) -> str:
    """Records per value of one attribute.  ``aligned``: both sides over the same categories, drawn as pairs of bars
    per category, a withheld source count (NaN) marked ``< k`` instead of a bar; otherwise side by side (the source's
    own values against the release's labels)."""
    plt = require()
    if aligned:
        count = len(original)
        figure, axes = plt.subplots(figsize=(6.4, 0.9 + 0.3 * count))
        y = np.arange(count)
        source = original["records"].to_numpy(dtype=float)
        axes.barh(y - 0.2, np.nan_to_num(source), height=0.4, color=SOURCE_COLOUR, label="source")
        axes.barh(y + 0.2, released["records"].to_numpy(dtype=float), height=0.4, color=RELEASE_COLOUR,
                  label="release")
        for position in np.where(np.isnan(source))[0]:
            axes.annotate(f"< {withheld_below}", (0, position - 0.2), xytext=(3, 0), textcoords="offset points",
                          va="center", fontsize=7, color="#59636e")
        axes.set_yticks(y, [_short(v) for v in original["value"]])
        axes.invert_yaxis()
        axes.set_xlabel("records")
        # Above the bars, beside the title: inside the axes it would cover the longest bar.
        axes.legend(frameon=False, fontsize=8, loc="lower right", bbox_to_anchor=(1, 1), ncols=2)
        axes.set_title(attribute, loc="left")
        return _svg(figure)
    height = 0.9 + 0.17 * max(len(original), len(released))
    figure, (left, right) = plt.subplots(1, 2, figsize=(7.2, height))
    for axes, frame, colour, title in ((left, original, SOURCE_COLOUR, "source"),
                                       (right, released, RELEASE_COLOUR, "release")):
        y = np.arange(len(frame))
        axes.barh(y, frame["records"], color=colour)
        axes.set_yticks(y, [_short(v) for v in frame["value"]])
        axes.invert_yaxis()
        axes.set_title(f"{attribute}: {title}", loc="left")
        axes.set_xlabel("records")
    figure.tight_layout()
    return _svg(figure)


def frontier(points: pd.DataFrame, parameter: str, metric: str, chosen: object | None) -> str:
    """The metric (information lost) and the highest and average prosecutor risk of each optimum, against the
    parameter; the release's own value marked."""
    plt = require()
    figure, loss = plt.subplots(figsize=(6.4, 3.0))
    found = points.dropna(subset=["metric"])
    loss.plot(found["value"], found["metric"], marker="o", color=RELEASE_COLOUR, label=f"{metric} (lower is better)")
    loss.set_xlabel(parameter)
    loss.set_ylabel(metric, color=RELEASE_COLOUR)
    risk = loss.twinx()
    risk.spines["right"].set_visible(True)
    risk.plot(found["value"], found["highest_risk"], marker="s", color=ACCENT, label="highest risk")
    risk.plot(found["value"], found["average_risk"], marker="^", linestyle="--", color=ACCENT, label="average risk")
    risk.set_ylabel("prosecutor risk", color=ACCENT)
    risk.set_ylim(bottom=0)
    if chosen is not None and (found["value"] == chosen).any():
        loss.axvline(chosen, color="#444", linewidth=0.8, linestyle=":")
        loss.annotate("this release", (chosen, loss.get_ylim()[1]), fontsize=8, ha="left", va="top")
    if len(found) and all(isinstance(v, (int, np.integer)) for v in found["value"]) and found["value"].max() > 20:
        loss.set_xscale("log")
    handles = loss.get_legend_handles_labels()[0] + risk.get_legend_handles_labels()[0]
    loss.legend(handles, [h.get_label() for h in handles], frameon=False, fontsize=8, loc="center right")
    return _svg(figure)


def levels(attributes: Sequence[str], chosen: Sequence[int], heights: Sequence[int]) -> str:
    """Each quasi-identifier's level against its hierarchy's highest: where the transformation sits."""
    plt = require()
    figure, axes = plt.subplots(figsize=(6.4, 0.6 + 0.28 * len(attributes)))
    y = np.arange(len(attributes))
    axes.barh(y, heights, color="#e6e9ef", label="highest level")
    axes.barh(y, chosen, color=RELEASE_COLOUR, label="chosen level")
    axes.set_yticks(y, attributes)
    axes.invert_yaxis()
    axes.set_xlabel("level")
    axes.xaxis.get_major_locator().set_params(integer=True)
    axes.legend(frameon=False, fontsize=8, loc="lower right")
    return _svg(figure)


def _short(value: object, width: int = 28) -> str:
    text = str(value)
    return text if len(text) <= width else text[:width - 1] + "…"
