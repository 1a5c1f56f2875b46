"""report.html: the systems side by side in one self-contained page (metrics table, who wins each row, plots).

The page is built from small pieces (`page`, `figure_section`) that a monitoring dashboard can reuse with its own
tables and the figures of `plots.py`.
"""

from __future__ import annotations

import html
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from selfcrag.evaluation import plots
from selfcrag.evaluation.metrics import (
    COSTS,
    FIXED_COVERAGES,
    FIXED_RISKS,
    by_system,
    effective_reliability,
    reliability,
    risk_coverage,
)

STYLE = """
body { font-family: system-ui, sans-serif; margin: 2em auto; max-width: 980px; color: #222; line-height: 1.4; }
table { border-collapse: collapse; margin: 1em 0; }
th, td { border-bottom: 1px solid #ddd; padding: 4px 10px; text-align: right; }
th:first-child, td:first-child { text-align: left; }
td.win { font-weight: bold; background: #e8f4e8; }
tr.wrong td.verdict { color: #b00020; } tr.right td.verdict { color: #1a7f37; }
table.questions td, table.questions th { text-align: left; vertical-align: top; font-size: 0.9em; }
.plots { display: flex; flex-wrap: wrap; gap: 1em; }
figure { margin: 0; } figcaption { font-size: 0.9em; color: #555; max-width: 600px; }
.note { color: #555; font-size: 0.9em; }
"""


def _share(value: float | None) -> str:
    return "—" if value is None else f"{100 * value:.1f}%"


def _number(digits: int) -> Callable[[float | None], str]:
    return lambda value: "—" if value is None else f"{value:,.{digits}f}"


# (label, how to read it from a system's metrics, format, better: "higher" | "lower" | "" for no winner)
Row = tuple[str, Callable[[dict[str, Any]], Any], Callable[[Any], str], str]
ROWS: list[Row] = [
    ("questions", lambda m: m["questions"], _number(0), ""),
    *[(f"effective reliability Φ{c} = (right − {c}·wrong) / n", (lambda m, c=c: m["effective_reliability"][str(c)]),
       _number(3), "higher") for c in COSTS],
    ("coverage (share answered)", lambda m: m["coverage"], _share, ""),
    ("right answers shown", lambda m: m["right"], _number(0), "higher"),
    ("wrong answers shown", lambda m: m["wrong"], _number(0), "lower"),
    ("selective accuracy (right among answered)", lambda m: m["precision_when_answered"], _share, "higher"),
    ("answerable accuracy", lambda m: m["answerable_accuracy"], _share, "higher"),
    ("unanswerable answered", lambda m: m["unanswerable_answered"], _share, "lower"),
    ("AUROC of confidence among answers shown", lambda m: m.get("auroc_shown"), _number(3), "higher"),
    ("AUROC of confidence among drafts (shown or withheld)", lambda m: m.get("auroc_drafts"), _number(3), "higher"),
    ("AUROC over all questions (an abstention counts as wrong)", lambda m: m["auroc"], _number(3), "higher"),
    ("right drafts (any candidate right)", lambda m: m.get("right_drafts"), _number(0), "higher"),
    ("AURC (area under risk-coverage)", lambda m: m["aurc"], _number(3), "lower"),
    *[(f"risk at coverage {c:g}", (lambda m, c=c: m["risk_at_coverage"][f"{c:g}"]), _share, "lower")
      for c in FIXED_COVERAGES],
    *[(f"coverage at risk {risk:g}", (lambda m, r=risk: m["coverage_at_risk"][f"{r:g}"]), _share, "higher")
      for risk in FIXED_RISKS],
    ("ECE (10 bins)", lambda m: m["ece"], _number(3), "lower"),
    ("retrieval hit@k (gold document in the first round)", lambda m: m.get("hit_at_k"), _share, "higher"),
    ("latency p50 (ms, wall)", lambda m: m["latency_ms"]["p50"], _number(0), "lower"),
    ("latency p95 (ms, wall)", lambda m: m["latency_ms"]["p95"], _number(0), "lower"),
    ("CPU p50 (ms)", lambda m: m["cpu_ms"]["p50"], _number(0), "lower"),
    ("CPU p95 (ms)", lambda m: m["cpu_ms"]["p95"], _number(0), "lower"),
    ("model server CPU p50 (ms)", lambda m: (m.get("server_cpu_ms") or {}).get("p50"), _number(0), "lower"),
    ("model calls per question", lambda m: m["llm_calls"]["per_question"], _number(2), "lower"),
    ("model calls replayed (no model time)", lambda m: m["llm_calls"].get("replayed"), _number(0), ""),
    ("tokens per question", lambda m: m["tokens"]["per_question"], _number(0), "lower"),
    ("errors", lambda m: m["errors"], _number(0), "lower"),
]


def winner(values: dict[str, Any], better: str) -> str | None:
    """The system with the best value of a row, or None for no direction, a missing value or a tie."""
    known = {name: v for name, v in values.items() if v is not None}
    if not better or len(known) < 2 or len(known) < len(values):
        return None
    best = max(known.values()) if better == "higher" else min(known.values())
    leaders = [name for name, v in known.items() if abs(v - best) < 1e-9]
    return leaders[0] if len(leaders) == 1 else None


def metrics_table(systems: dict[str, dict[str, Any]]) -> str:
    names = list(systems)
    head = "".join(f"<th>{html.escape(n)}</th>" for n in names) + ("<th>better</th>" if len(names) > 1 else "")
    lines = [f"<table><thead><tr><th>metric</th>{head}</tr></thead><tbody>"]
    for label, read, show, better in ROWS:
        values = {n: read(systems[n]) for n in names}
        best = winner(values, better)
        cells = "".join(f"<td{' class=win' if n == best else ''}>{show(v)}</td>" for n, v in values.items())
        verdict = (best or ("tie" if better else "")) if len(names) > 1 else None
        lines.append(f"<tr><td>{html.escape(label)}</td>{cells}"
                     + (f"<td>{html.escape(verdict)}</td>" if verdict is not None else "") + "</tr>")
    lines.append("</tbody></table>")
    return "\n".join(lines)


DIFFERENCES = (("phi_1", "Φ1", 3), ("phi_3", "Φ3", 3), ("right", "right answers shown", 0),
               ("coverage", "coverage", 3))  # fmt: skip


def differences_table(differences: dict[str, dict[str, dict[str, float]]]) -> str:
    """Each system's difference to plain RAG with its paired bootstrap 95% interval."""
    if not differences:
        return ""
    lines = ["<table><thead><tr><th>difference to plain</th>"
             + "".join(f"<th>{html.escape(name)}</th>" for name in differences) + "</tr></thead><tbody>"]
    for key, label, digits in DIFFERENCES:
        cells = []
        for rows in differences.values():
            row = rows.get(key)
            cells.append("<td>—</td>" if row is None else f"<td>{row['difference']:+.{digits}f} "
                         f"[{row['low']:+.{digits}f}, {row['high']:+.{digits}f}]</td>")
        lines.append(f"<tr><td>{html.escape(label)}</td>{''.join(cells)}</tr>")
    lines.append("</tbody></table>")
    return "\n".join(lines)


def figure_section(title: str, uri: str, caption: str) -> str:
    return (f'<figure><img src="{uri}" alt="{html.escape(title)}" width="600">'
            f"<figcaption><b>{html.escape(title)}.</b> {html.escape(caption)}</figcaption></figure>")


def page(title: str, sections: Sequence[str]) -> str:
    body = "\n".join(sections)
    return (f"<!doctype html><html lang=en><head><meta charset=utf-8><title>{html.escape(title)}</title>"
            f"<style>{STYLE}</style></head><body><h1>{html.escape(title)}</h1>\n{body}\n</body></html>\n")


def figures(records: list[dict[str, Any]]) -> list[str]:
    """The four plots of an evaluation, as figure sections."""
    grouped = by_system(records)

    def pairs(rows: list[dict[str, Any]]) -> tuple[list[float], list[bool]]:
        return [float(r["confidence"]) for r in rows], [bool(r["correct"]) for r in rows]

    def shown(rows: list[dict[str, Any]]) -> tuple[int, int, int]:
        right = sum(1 for r in rows if r["correct"])
        return right, sum(1 for r in rows if r["answered"]) - right, len(rows)

    counts = {n: shown(rows) for n, rows in grouped.items()}
    operating = {n: (answered / total, wrong / answered if answered else 0.0)
                 for n, (right, wrong, total) in counts.items() for answered in [right + wrong]}  # fmt: skip
    drawn = [
        ("Effective reliability", plots.effective_reliability(
            {n: [(c / 10, effective_reliability(r, w, t, c / 10) or 0.0) for c in range(0, 51)]
             for n, (r, w, t) in counts.items()}, COSTS),
         "Φc = (right − c·wrong) / n against the cost c of a wrong answer shown (in right answers); an abstention "
         "scores 0, so a line above another at your cost is the better system for you."),
        ("Decision mix", plots.decision_mix({n: _counts(rows) for n, rows in grouped.items()}),
         "What each system did with the questions."),
        ("Risk-coverage", plots.risk_coverage({n: risk_coverage(*pairs(rows)) for n, rows in grouped.items()},
                                              operating),
         "Answering the most confident questions first; lower is better at every coverage. The ring marks where "
         "each system's own decisions put it."),
        ("Reliability", plots.reliability({n: reliability(*pairs(rows)) for n, rows in grouped.items()}),
         "Share correct per confidence bin; a calibrated confidence lies on the diagonal."),
        ("Latency", plots.latency({n: [float(r["latency_ms"]) for r in rows] for n, rows in grouped.items()}),
         "Wall-clock time per question."),
    ]
    return [figure_section(title, plots.data_uri(figure), caption) for title, figure, caption in drawn]


def _verdict(row: dict[str, Any]) -> tuple[str, str]:
    if not row["answered"]:
        return "", "abstained"
    return ("right", "right") if row["correct"] else ("wrong", "wrong")


def question_table(records: list[dict[str, Any]]) -> str:
    """One row per question and system: the decision, its confidence and whether what was shown was right."""
    grouped = by_system(records)
    by_id: dict[str, dict[str, dict[str, Any]]] = {}
    for name, rows in grouped.items():
        for row in rows:
            by_id.setdefault(str(row["id"]), {})[name] = row
    lines = ["<table class=questions><thead><tr><th>question</th><th>gold</th><th>system</th><th>decision</th>"
             "<th>confidence</th><th>shown answer was</th><th>gold document retrieved</th></tr></thead><tbody>"]
    for systems in by_id.values():
        first = next(iter(systems.values()))
        gold = "(unanswerable)" if first["is_impossible"] else " | ".join(first["answers"][:3])
        for i, (name, row) in enumerate(systems.items()):
            kind, verdict = _verdict(row)
            hit = {True: "yes", False: "no"}.get(row.get("gold_hit"), "")  # type: ignore[arg-type]
            lead = (f"<td rowspan={len(systems)}>{html.escape(str(row['question']))}</td>"
                    f"<td rowspan={len(systems)}>{html.escape(gold)}</td>") if i == 0 else ""
            lines.append(f"<tr class='{kind}'>{lead}<td>{html.escape(name)}</td>"
                         f"<td>{html.escape(str(row['decision']))}</td><td>{float(row['confidence']):.2f}</td>"
                         f"<td class=verdict>{verdict}</td><td>{hit}</td></tr>")
    lines.append("</tbody></table>")
    return "\n".join(lines)


def faults_table(systems: dict[str, dict[str, Any]]) -> str:
    """Per system and graph node that ever faulted: steps, faults and parse failures (a reply that came back but
    could not be used), with their rates. On the model backend a node is one role's call."""
    rows = [(name, node, row) for name, m in systems.items() for node, row in (m.get("faults_by_node") or {}).items()]
    if not rows:
        return "<p class=note>No step of any system hit a model fault or a reply it could not parse.</p>"
    lines = ["<table><thead><tr><th>system</th><th>node</th><th>steps</th><th>faults</th><th>fault rate</th>"
             "<th>parse failures</th><th>parse-failure rate</th></tr></thead><tbody>"]
    for name, node, row in rows:
        lines.append(f"<tr><td>{html.escape(name)}</td><td>{html.escape(node)}</td><td>{row['steps']}</td>"
                     f"<td>{row['faults']}</td><td>{_share(row['fault_rate'])}</td><td>{row['parse_failures']}</td>"
                     f"<td>{_share(row['parse_failure_rate'])}</td></tr>")
    lines.append("</tbody></table>")
    return "\n".join(lines)


def _counts(rows: list[dict[str, Any]]) -> dict[str, int]:
    counts: dict[str, int] = {}
    for row in rows:
        counts[str(row["decision"])] = counts.get(str(row["decision"]), 0) + 1
    return counts


def render(result: dict[str, Any], records: list[dict[str, Any]]) -> str:
    run = result.get("run", {})
    facts = ", ".join(f"{k} {html.escape(str(v))}" for k, v in run.items() if v not in ("", None))
    ratios = result.get("ratios") or {}
    ratio_text = "; ".join(f"{k.replace('_', ' ')} {v:.2f}x" for k, v in ratios.items() if v is not None)
    sections = [
        f"<p class=note>{facts}</p>",
        metrics_table(result["systems"]),
        f"<p>selfcrag / plain: {html.escape(ratio_text)}</p>" if ratio_text else "",
        differences_table(result.get("differences_to_plain") or {}),
        "<p class=note>Each difference to plain RAG with its 95% interval: a paired bootstrap over the questions "
        "(2000 resamples, seeded). Selective plain is plain RAG that answers only when its best retrieval score "
        "reaches a floor fitted on tuning data at the run's cost; it makes plain's calls in plain's time.</p>"
        if result.get("differences_to_plain") else "",
        "<p class=note>Correct = the question is answerable and the shown answer contains a gold answer (SQuAD "
        "normalisation, whole words); an answer to an unanswerable question is wrong; an abstention shows "
        "nothing. Plain RAG's confidence is its best retrieval score.</p>",
        "<p class=note>Effective reliability Φc scores the decisions a user sees: +1 for a right answer shown, −c "
        "for a wrong one (an answer to an unanswerable question is wrong), 0 for an abstention; c = 1 when a wrong "
        "answer costs as much as a right one gains, c = 3 for a cautious deployment. Coverage and the right answers "
        "shown say what the abstentions cost. Risk at coverage x is the error rate among the x most confident "
        "questions, what a floor answering that many would show; AURC averages it over every coverage.</p>",
        f"<div class=plots>{''.join(figures(records))}</div>",
        "<h2>Model faults by node</h2>",
        faults_table(result["systems"]),
        "<h2>Per question</h2>",
        question_table(records),
    ]
    return page("selfcrag eval", sections)


def write_report(path: Path, result: dict[str, Any], records: list[dict[str, Any]]) -> None:
    path.write_text(render(result, records), encoding="utf-8")


def text_table(systems: dict[str, dict[str, Any]]) -> str:
    """The metrics table as plain text, for the terminal."""
    names = list(systems)
    width = max(len(label) for label, *_ in ROWS)
    columns = {n: max(12, len(n) + 2) for n in names}
    lines = [f"{'metric':<{width}}" + "".join(f"{n:>{columns[n]}}" for n in names)]
    for label, read, show, _ in ROWS:
        lines.append(f"{label:<{width}}" + "".join(f"{show(read(systems[n])):>{columns[n]}}" for n in names))
    return "\n".join(lines)
