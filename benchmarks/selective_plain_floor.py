"""Fit selective plain's floors: plain RAG that answers only when its best retrieval score reaches a floor, the
baseline `selfcrag eval` reports beside plain (evaluation/paired.py). One floor per backend and cost, each the one
that maximises Phi_c = (right - c * wrong) / n on tuning evaluations' plain records, and nothing else.

    .venv/bin/python benchmarks/selective_plain_floor.py [--out src/selfcrag/data/selective_plain.json]

Tuning data only (data discipline): the SQuAD dev sample and HaluEval over its split corpus for the offline backend
(eval_squad/, eval_halueval_split/), the 0.5B model's tuning runs for the model backend (calibration_fit_model_
records.jsonl: 70 SQuAD and 30 HaluEval questions). Plain's answers are judged again with the current judge
(evaluation/questions.py contains_gold), so a change of judge changes the floors only when this is rerun. The costs are
the presets' (data/presets.json) and 0; a run at another cost takes the nearest one's floor.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from eval_datasets import RESULTS, ROOT, load_jsonl  # noqa: E402
from provenance import provenance  # noqa: E402

from selfcrag.evaluation.paired import best_floor  # noqa: E402
from selfcrag.evaluation.provenance import sha256  # noqa: E402
from selfcrag.evaluation.questions import contains_gold  # noqa: E402

TUNING = {"offline": ("eval_squad/records.jsonl", "eval_halueval_split/records.jsonl"),
          "model": ("calibration_fit_model_records.jsonl",)}  # fmt: skip
COSTS = (0, 0.75, 1, 1.5, 2, 3)
OUT = ROOT / "src" / "selfcrag" / "data" / "selective_plain.json"


def plain_rows(files: tuple[str, ...]) -> list[dict]:
    rows = []
    for name in files:
        for record in load_jsonl(RESULTS / name):
            if record["system"] != "plain" or record.get("error"):
                continue
            answered = bool(record["answered"])
            right = answered and not record["is_impossible"] and contains_gold(record["answer"], record["answers"])
            rows.append({"confidence": float(record["confidence"]), "answered": answered, "correct": right})
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args()
    floors, data = {}, {}
    for backend, files in TUNING.items():
        rows = plain_rows(files)
        confidence = [r["confidence"] for r in rows]
        correct, answered = [r["correct"] for r in rows], [r["answered"] for r in rows]
        floors[backend] = {f"{c:g}": round(best_floor(confidence, correct, answered, c), 4) for c in COSTS}
        data[backend] = {"questions": len(rows), "right": sum(correct),
                         "files": [{"file": f, "sha256": sha256(RESULTS / f)} for f in files]}  # fmt: skip
        print(backend, len(rows), "plain records:", floors[backend])
    body = {"about": "selective plain RAG's floors on its own confidence (best retrieval score), per backend and "
                     "cost c: the floor that maximised Phi_c on the tuning runs' plain records "
                     "(benchmarks/selective_plain_floor.py; evaluation/paired.py reads it)",
            "floors": floors, "tuning_data": data, **provenance()}  # fmt: skip
    args.out.write_text(json.dumps(body, indent=2) + "\n", encoding="utf-8")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
