"""`selfcrag report`: an HTML dashboard of the recorded runs with plots over time — pass rate, groundedness,
the decision mix and latency — written as `index.html` plus one PNG per plot.

The plotting is two generic helpers (`line_plot`, `stacked_bars`: named series over evenly spaced times on a date
axis, saved as PNG) so other reports (`selfcrag eval`) can draw with the same look. matplotlib comes with the `eval`
extra.
"""

from __future__ import annotations

import html
import math
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from selfcrag.store.monitor import percentile, render, summarize

BUCKETS = 24  # points on each plot: the window cut into this many equal spans


def _pyplot() -> Any:
    try:
        import matplotlib

        matplotlib.use("Agg")  # files only: no display needed
        import matplotlib.pyplot as plt
    except ImportError:
        raise ValueError("the dashboard needs matplotlib: pip install 'selfcrag[eval]'") from None
    return plt


def line_plot(path: Path, title: str, x: list[datetime], series: dict[str, list[float | None]], ylabel: str = "",
              ylim: tuple[float, float] | None = None) -> Path:  # fmt: skip
    """One line per series over time (None = no data at that point, drawn as a gap)."""
    plt = _pyplot()
    figure, axes = plt.subplots(figsize=(8, 3.2))
    for name, values in series.items():
        axes.plot(x, [math.nan if v is None else v for v in values], marker="o", markersize=3, label=name)
    _finish(axes, title, ylabel, ylim, x)
    figure.savefig(path, dpi=100, bbox_inches="tight")
    plt.close(figure)
    return path


def stacked_bars(path: Path, title: str, x: list[datetime], series: dict[str, list[float]], ylabel: str = "") -> Path:
    """Bars stacked at each time of `x` (evenly spaced), one colour per series."""
    plt = _pyplot()
    figure, axes = plt.subplots(figsize=(8, 3.2))
    bottom = [0.0] * len(x)
    for name, values in series.items():
        axes.bar(x, values, width=_step(x) * 0.9, bottom=bottom, label=name)
        bottom = [b + v for b, v in zip(bottom, values, strict=True)]
    _finish(axes, title, ylabel, None, x)
    figure.savefig(path, dpi=100, bbox_inches="tight")
    plt.close(figure)
    return path


def _step(x: list[datetime]) -> timedelta:
    """The time between two points of `x` (evenly spaced): a bar's width, and the margin at each end of the axis."""
    return x[1] - x[0] if len(x) > 1 else timedelta(hours=1)


def _finish(axes: Any, title: str, ylabel: str, ylim: tuple[float, float] | None, x: list[datetime]) -> None:
    from matplotlib import dates

    axes.set_title(title)
    axes.set_ylabel(ylabel)
    if ylim:
        axes.set_ylim(*ylim)
    # A date axis: each point sits at its own time (labels as strings would merge equal ones into one point), and
    # the locator picks readable ticks (hours for a day, days for a week) in UTC, as the x values are.
    locator = dates.AutoDateLocator(minticks=4, maxticks=9, tz=UTC)  # type: ignore[no-untyped-call]
    axes.xaxis.set_major_locator(locator)
    axes.xaxis.set_major_formatter(dates.ConciseDateFormatter(locator, tz=UTC))  # type: ignore[no-untyped-call]
    axes.set_xlim(x[0] - _step(x) / 2, x[-1] + _step(x) / 2)  # the whole window, up to now
    axes.set_xlabel("UTC", fontsize=8)
    axes.grid(alpha=0.3)
    axes.legend(fontsize=8, loc="best")


def buckets(runs: list[dict[str, Any]], since: float, until: float, count: int = BUCKETS) -> list[list[dict[str, Any]]]:
    """The runs cut into `count` equal spans of [since, until]."""
    width = max(until - since, 1e-9) / count
    cut: list[list[dict[str, Any]]] = [[] for _ in range(count)]
    for run in runs:
        cut[min(count - 1, max(0, int((run["created_at"] - since) / width)))].append(run)
    return cut


def write_report(runs: list[dict[str, Any]], since: float, until: float, out: Path) -> Path:
    """Write the dashboard into `out` (created); returns the path of its index.html."""
    out.mkdir(parents=True, exist_ok=True)
    spans = buckets(runs, since, until)
    width = (until - since) / len(spans)
    x = [datetime.fromtimestamp(since + (i + 0.5) * width, tz=UTC) for i in range(len(spans))]  # each span's middle

    def mean(span: list[dict[str, Any]], name: str) -> float | None:
        values = [r[name] for r in span if r.get(name) is not None]
        return sum(values) / len(values) if values else None

    decisions = sorted({r["decision"] for r in runs})
    latencies = [[r["latency_ms"] for r in span if r.get("latency_ms") is not None] for span in spans]
    plots = [
        line_plot(out / "pass_rate.png", "Pass rate", x,
                  {"pass rate": [mean(span, "passed") for span in spans]}, "share of runs", (0, 1.05)),
        line_plot(out / "groundedness.png", "Groundedness and the other triad scores", x,
                  {name.replace("_", " "): [mean(span, name) for span in spans]
                   for name in ("groundedness", "context_relevance", "answer_relevance")}, "average", (0, 1.05)),
        stacked_bars(out / "decisions.png", "Decision mix", x,
                     {d: [float(sum(r["decision"] == d for r in span)) for span in spans] for d in decisions}, "runs"),
        line_plot(out / "latency.png", "Latency", x,
                  {"p50": [percentile(v, 0.5) for v in latencies], "p95": [percentile(v, 0.95) for v in latencies]},
                  "ms"),
    ]
    summary = summarize(runs, since, until)
    images = "\n".join(f'<img src="{p.name}" alt="{p.stem}">' for p in plots)
    page = f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>selfcrag quality report</title>
<style>body{{font-family:sans-serif;max-width:60em;margin:2em auto}} img{{display:block;margin:1em 0;max-width:100%}}
pre{{background:#f4f4f4;padding:1em;overflow-x:auto}}</style></head>
<body><h1>selfcrag quality report</h1>
<pre>{html.escape(render(summary))}</pre>
{images}
</body></html>
"""
    index = out / "index.html"
    index.write_text(page, encoding="utf-8")
    return index
