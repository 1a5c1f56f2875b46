"""Collect once, fit many: `selfcrag calibrate --records` refits the calibration from `selfcrag eval` records and
re-decides their questions with it, without the model or the index.

Each selfcrag record keeps the features of its drafts (`detail["candidates"]` where the graph lists them, else the
draft it would show and `detail["confidence_explanation"]["features"]`): enough for `calibrate.fit`. Re-deciding
takes each question's drafts with their cross-validated probabilities (never the fit's own in-sample ones), shows
the most probable when it reaches the cost's floor p >= c / (1 + c), and scores the result beside plain RAG's
records of the same questions.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from selfcrag.errors import CalibrationDataError
from selfcrag.evaluation.calibrate import chosen
from selfcrag.evaluation.metrics import effective_reliability
from selfcrag.quality.thresholds import show_floor


def read_records(paths: Sequence[Path]) -> list[dict[str, Any]]:
    """The records of `selfcrag eval` folders (their records.jsonl) or records files; one-line CalibrationDataError
    on a file that cannot be read or a line that is not a record."""
    records = []
    for given in paths:
        path = given / "records.jsonl" if given.is_dir() else given
        try:
            lines = path.read_text(encoding="utf-8").splitlines()
        except (OSError, UnicodeDecodeError) as exc:
            raise CalibrationDataError(f"cannot read records from {path}: {getattr(exc, 'strerror', None) or exc}") \
                from None
        for number, line in enumerate(lines, 1):
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except ValueError:
                record = None
            if not isinstance(record, dict) or not {"id", "system", "answers", "is_impossible"} <= record.keys():
                raise CalibrationDataError(f"{path} line {number} is not a selfcrag eval record")
            records.append(record)
    return records


def redecide(rows: Sequence[dict[str, Any]], probabilities: Sequence[float], records: Sequence[dict[str, Any]],
             cost: float) -> dict[str, dict[str, Any]]:  # fmt: skip
    """What the graph would show with these probabilities at `cost` (its best draft per question, when that reaches
    the floor), and plain RAG's records of the same questions, as right, wrong, coverage and Phi_1 / Phi_3."""
    questions = {r["id"] for r in rows}
    floor = show_floor(cost)
    picked, p = chosen(rows, probabilities)  # each question's most probable candidate, as finalize picks it
    shown = [bool(row["label"]) for row, value in zip(picked, p, strict=True) if row["drafted"] and value >= floor]
    plain = [r for r in records if r.get("system") == "plain" and str(r["id"]) in questions]
    systems = {"selfcrag": (sum(shown), len(shown) - sum(shown), len(questions))}
    if plain:
        right = sum(1 for r in plain if r["correct"])
        systems["plain"] = (right, sum(1 for r in plain if r["answered"]) - right, len(plain))
    return {name: {"right": r, "wrong": w, "questions": n, "coverage": round((r + w) / n, 4) if n else None,
                   **{f"phi_{c}": round(effective_reliability(r, w, n, c) or 0.0, 4) for c in (1, 3)}}
            for name, (r, w, n) in systems.items()}  # fmt: skip


def redecided_table(decided: dict[str, dict[str, Any]], cost: float) -> str:
    lines = [f"re-decided at cost {cost:g} (floor {show_floor(cost):.3f}), cross-validated probabilities:",
             f"{'system':<10}{'right':>7}{'wrong':>7}{'coverage':>10}{'Phi_1':>8}{'Phi_3':>8}"]
    for name, row in decided.items():
        lines.append(f"{name:<10}{row['right']:>7}{row['wrong']:>7}{row['coverage'] or 0:>10.3f}{row['phi_1']:>8.3f}"
                     f"{row['phi_3']:>8.3f}")
    return "\n".join(lines)
