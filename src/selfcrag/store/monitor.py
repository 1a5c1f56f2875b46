"""Statistics over the recorded runs of a time window: pass rate (every triad score and the confidence at or
above its minimum), average triad scores, the decision mix, latency percentiles and the lowest-quality runs."""

from __future__ import annotations

import math
import re
import time
from datetime import UTC, datetime
from typing import Any

SCORES = ("context_relevance", "groundedness", "answer_relevance", "confidence")
UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}
LOWEST = 5


def parse_duration(text: str) -> float:
    """Seconds in "90s", "30m", "1h", "7d", "2w"."""
    found = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([smhdw])\s*", text or "")
    if not found:
        raise ValueError(f"not a duration: {text!r} (use a number and s, m, h, d or w, e.g. 1h or 7d)")
    return float(found.group(1)) * UNITS[found.group(2)]


def parse_moment(text: str, now: float | None = None) -> float:
    """Epoch seconds of an ISO date or time ("2025-01-31", "2025-01-31T12:00", UTC unless it says), or of a
    duration ago ("30d")."""
    now = time.time() if now is None else now
    try:
        return now - parse_duration(text)
    except ValueError:
        pass
    try:
        moment = datetime.fromisoformat(text.strip())
    except ValueError:
        raise ValueError(f"not a date: {text!r} (use YYYY-MM-DD, an ISO time, or a duration ago such as 30d)") from None
    return (moment if moment.tzinfo else moment.replace(tzinfo=UTC)).timestamp()


def percentile(values: list[float], share: float) -> float | None:
    """Nearest-rank percentile (None for no values)."""
    if not values:
        return None
    ordered = sorted(values)
    return ordered[max(0, min(len(ordered), math.ceil(share * len(ordered))) - 1)]  # rank ceil(p·n)


def quality_of(run: dict[str, Any]) -> float:
    """A run's weakest score: how the lowest-quality runs are ranked."""
    return min((run[name] for name in SCORES if run.get(name) is not None), default=0.0)


def summarize(runs: list[dict[str, Any]], since: float, until: float) -> dict[str, Any]:
    """The monitor's numbers for `runs` (records from `runs.recent`)."""
    def average(name: str) -> float | None:
        values = [r[name] for r in runs if r.get(name) is not None]
        return round(sum(values) / len(values), 4) if values else None

    decisions: dict[str, int] = {}
    for run in runs:
        decisions[run["decision"]] = decisions.get(run["decision"], 0) + 1
    latencies = [r["latency_ms"] for r in runs if r.get("latency_ms") is not None]
    lowest = sorted(runs, key=quality_of)[:LOWEST]
    return {
        "since": iso(since),
        "until": iso(until),
        "runs": len(runs),
        "pass_rate": round(sum(r["passed"] for r in runs) / len(runs), 4) if runs else None,
        "avg_scores": {name: average(name) for name in SCORES},
        "decisions": dict(sorted(decisions.items(), key=lambda item: -item[1])),
        "latency_ms": {"p50": percentile(latencies, 0.5), "p95": percentile(latencies, 0.95),
                       "mean": round(sum(latencies) / len(latencies), 1) if latencies else None},
        "llm_calls": sum(r["llm_calls"] for r in runs),
        "tokens": sum(r["tokens"] for r in runs),
        "domains": sorted({r["domain"] for r in runs if r.get("domain")}),
        "lowest": [{"when": iso(r["created_at"]), "thread_id": r["thread_id"], "question": r["question"],
                    "decision": r["decision"], "below": r["below"], "weakest": round(quality_of(r), 4),
                    **{name: r.get(name) for name in SCORES}} for r in lowest],
    }


def render(summary: dict[str, Any]) -> str:
    """The summary as text for a terminal."""
    def number(value: float | None, digits: int = 2) -> str:
        return "-" if value is None else f"{value:.{digits}f}"

    lines = [f"{summary['runs']} runs from {summary['since']} to {summary['until']}"]
    if not summary["runs"]:
        return lines[0]
    latency = summary["latency_ms"]
    lines += [
        f"pass rate      {summary['pass_rate']:.0%} (every score at or above its minimum)",
        "average        " + " · ".join(f"{name.replace('_', ' ')} {number(value)}"
                                       for name, value in summary["avg_scores"].items()),
        "decisions      " + ", ".join(f"{name} {count}" for name, count in summary["decisions"].items()),
        f"latency        p50 {number(latency['p50'], 0)} ms · p95 {number(latency['p95'], 0)} ms",
        f"model calls    {summary['llm_calls']} ({summary['tokens']} tokens)",
        "",
        "lowest-quality runs:",
    ]
    for run in summary["lowest"]:
        lines.append(f"  {run['when']}  {run['decision']:<18} weakest {number(run['weakest'])}  "
                     f"below: {run['below'] or '-':<30} {run['question'][:70]!r}  thread {run['thread_id'] or '-'}")
    return "\n".join(lines)


def iso(epoch: float) -> str:
    return datetime.fromtimestamp(epoch, tz=UTC).strftime("%Y-%m-%d %H:%M:%SZ")
