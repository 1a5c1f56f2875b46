"""Figures from plain numbers, keyed by system name, so anything that has the numbers can draw them: the eval
report today, a run-monitoring dashboard later (decision mix and latency need no gold answers).

Figures are built on matplotlib's object API with the Agg canvas, never pyplot: no display, no global figure
state, safe to call from a server thread. `data_uri` turns a figure into an inline PNG for a one-file page.
"""

from __future__ import annotations

import base64
import io
from collections.abc import Sequence
from typing import Any

from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

COLOURS = {"selfcrag": "#1f77b4", "plain": "#ff7f0e"}
DECISION_COLOURS = {"answer": "#2ca02c", "answer_with_caveat": "#bcbd22", "abstain": "#7f7f7f",
                    "human_review": "#9467bd", "error": "#d62728"}  # fmt: skip
SIZE = (6.0, 3.6)


def _colour(name: str, index: int) -> str:
    return COLOURS.get(name, f"C{index + 2}")


def _figure(size: tuple[float, float] = SIZE) -> tuple[Figure, Any]:
    figure = Figure(figsize=size, dpi=100, layout="constrained")
    FigureCanvasAgg(figure)
    return figure, figure.add_subplot()


def decision_mix(counts: dict[str, dict[str, int]]) -> Figure:
    """One horizontal bar per system, split by the share of questions each decision took."""
    figure, axes = _figure((6.0, 1.2 + 0.5 * len(counts)))
    decisions = [d for d in DECISION_COLOURS if any(d in c for c in counts.values())]
    decisions += sorted({d for c in counts.values() for d in c} - set(decisions))
    names = list(counts)
    left = [0.0] * len(names)
    for decision in decisions:
        shares = [counts[n].get(decision, 0) / max(sum(counts[n].values()), 1) for n in names]
        axes.barh(names, shares, left=left, color=DECISION_COLOURS.get(decision, "#17becf"), label=decision)
        left = [a + b for a, b in zip(left, shares, strict=True)]
    axes.set_xlim(0, 1)
    axes.set_xlabel("share of questions")
    axes.invert_yaxis()
    axes.legend(ncols=min(len(decisions), 4), loc="lower center", bbox_to_anchor=(0.5, 1.0), frameon=False)
    return figure


def risk_coverage(curves: dict[str, Sequence[tuple[float, float]]],
                  operating: dict[str, tuple[float, float]] | None = None) -> Figure:
    """Risk (error rate among the answered) against coverage, answering the most confident questions first;
    `operating` rings the (coverage, risk) each system's own decisions reached."""
    figure, axes = _figure()
    for i, (name, points) in enumerate(curves.items()):
        if points:
            xs, ys = zip(*points, strict=True)
            axes.plot(xs, ys, drawstyle="steps-post", marker=".", color=_colour(name, i), label=name)
        if operating and name in operating:
            axes.plot(*operating[name], marker="o", markersize=11, fillstyle="none", markeredgewidth=2,
                      color=_colour(name, i), label=f"{name}: its decisions")
    axes.set_xlim(0, 1)
    axes.set_ylim(0, 1)
    axes.set_xlabel("coverage (share of questions answered, most confident first)")
    axes.set_ylabel("risk (share wrong)")
    axes.grid(alpha=0.3)
    axes.legend()
    return figure


def effective_reliability(curves: dict[str, Sequence[tuple[float, float]]], marked: Sequence[float]) -> Figure:
    """Effective reliability Phi_c against the cost c of a wrong answer, one line per system; the costs in `marked`
    get a point each."""
    figure, axes = _figure()
    axes.axhline(0.0, color="#999999", linestyle="--", label="abstain on everything")
    for i, (name, points) in enumerate(curves.items()):
        xs, ys = zip(*points, strict=True) if points else ((), ())
        axes.plot(xs, ys, color=_colour(name, i), label=name)
        at = dict(points)
        for cost in marked:
            if float(cost) in at:
                axes.plot(cost, at[float(cost)], marker="o", color=_colour(name, i))
                axes.annotate(f"{at[float(cost)]:+.2f}", (cost, at[float(cost)]), fontsize=7,
                              textcoords="offset points", xytext=(4, 4), color=_colour(name, i))
    axes.set_xlabel("cost c of a wrong answer shown (in right answers)")
    axes.set_ylabel("Φc = (right − c·wrong) / n")
    axes.grid(alpha=0.3)
    axes.legend()
    return figure


def reliability(tables: dict[str, Sequence[dict[str, Any]]]) -> Figure:
    """Accuracy against mean confidence per confidence bin; a calibrated system lies on the diagonal."""
    figure, axes = _figure()
    axes.plot([0, 1], [0, 1], linestyle="--", color="#999999", label="calibrated")
    for i, (name, table) in enumerate(tables.items()):
        filled = [row for row in table if row["count"]]
        axes.plot([r["mean_confidence"] for r in filled], [r["accuracy"] for r in filled], marker="o",
                  color=_colour(name, i), label=name)
        for row in filled:  # bin sizes: a point from 2 questions says little
            axes.annotate(str(row["count"]), (row["mean_confidence"], row["accuracy"]), fontsize=7,
                          textcoords="offset points", xytext=(3, 3), color=_colour(name, i))
    axes.set_xlim(0, 1)
    axes.set_ylim(0, 1)
    axes.set_xlabel("confidence (bin mean; labels: questions in the bin)")
    axes.set_ylabel("share correct")
    axes.grid(alpha=0.3)
    axes.legend()
    return figure


def latency(samples: dict[str, Sequence[float]]) -> Figure:
    """Wall-clock latency per question, as a histogram on a log scale (fast and slow paths differ by 10x)."""
    import numpy as np

    figure, axes = _figure()
    values = [v for vs in samples.values() for v in vs if v > 0]
    if values:
        edges = np.geomspace(min(values) * 0.9, max(values) * 1.1, 30)
        for i, (name, vs) in enumerate(samples.items()):
            axes.hist([v for v in vs if v > 0], bins=edges, histtype="step", linewidth=1.8, color=_colour(name, i),
                      label=name)
        axes.set_xscale("log")
        axes.legend()
    axes.set_xlabel("latency per question (ms, log scale)")
    axes.set_ylabel("questions")
    axes.grid(alpha=0.3)
    return figure


def data_uri(figure: Figure) -> str:
    """The figure as an inline PNG (`data:image/png;base64,...`) for an <img> in a one-file page."""
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png")
    return "data:image/png;base64," + base64.b64encode(buffer.getvalue()).decode("ascii")
