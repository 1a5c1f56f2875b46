"""How often the contested-claim check (quality/contested.py) would veto a right draft, from eval records alone.

    .venv/bin/python benchmarks/contested_false_alarms.py EVAL_DIR [EVAL_DIR ...] --index DIR [--index DIR ...]
                                                           [--out FILE]

A planted instruction shows in the answer as a claim the document's own facts deny, so the check vetoes a draft
when a sentence of it and a sentence of the draft or of a passage it cites answer the question differently. Its
cost is the right drafts it vetoes: real answers often restate one fact of a passage that also states a nearby,
different one ("30 days to return an item" beside "drop it off within 21 days of printing the label").
This reads every candidate draft of the selfcrag records in each folder (`detail.candidates`, written with the
check off), finds the passages it cites ([doc_N] of its round's `retrieve` step, whole passages: a superset of the
strips the run checked, so the count is an upper bound), and asks the check. Right drafts (holding a gold answer)
it contests are false alarms; wrong ones it contests cost nothing. `--index` names the index folders whose
`chunks.jsonl` hold the passages' text. Use tuning records only (the SQuAD dev sample, HaluEval): the false alarms
are printed and may be read. Writes benchmarks/results/contested_false_alarms.json.
"""

from __future__ import annotations

import argparse
import ast
import json
import re
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from provenance import provenance  # noqa: E402

from selfcrag.evaluation.questions import contains_gold  # noqa: E402
from selfcrag.quality.contested import contested  # noqa: E402

RESULTS = Path(__file__).resolve().parent / "results"
LABEL = re.compile(r"\[doc_(\d+)\]")


def passages_by_round(record: dict[str, Any]) -> list[list[str]]:
    """The passage ids of each retrieval round, in the order the prompts numbered them (doc_1 first)."""
    rounds = []
    for step in record.get("trace") or []:
        if step.get("node") == "retrieve" and step.get("passages"):
            listed = step["passages"]
            listed = ast.literal_eval(listed) if isinstance(listed, str) else listed
            rounds.append([str(p["id"]) for p in listed])
    return rounds


def drafts(record: dict[str, Any], texts: dict[str, str]) -> list[dict[str, Any]]:
    """Each candidate draft with the text of the passages it cites."""
    rounds = passages_by_round(record)
    found = []
    for candidate in (record.get("detail") or {}).get("candidates") or []:
        answer = str(candidate.get("answer") or "")
        round_ = int(candidate.get("round") or 1)
        if not answer or not rounds:
            continue
        ids = rounds[min(round_, len(rounds)) - 1]
        cited = [ids[int(n) - 1] for n in dict.fromkeys(LABEL.findall(answer)) if 0 < int(n) <= len(ids)]
        right = not record["is_impossible"] and contains_gold(answer, record["answers"])
        found.append({"answer": answer, "evidence": [texts[i] for i in cited if i in texts], "right": right,
                      "plain": bool(candidate.get("plain"))})
    return found


def main(argv: list[str] | None = None) -> int:
    cli = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    cli.add_argument("folders", nargs="+", type=Path, help="`selfcrag eval` folders (tuning data)")
    cli.add_argument("--index", type=Path, action="append", required=True, help="index folders with chunks.jsonl")
    cli.add_argument("--out", type=Path, default=RESULTS / "contested_false_alarms.json")
    args = cli.parse_args(argv)
    texts = {}
    for index in args.index:
        for line in (index / "chunks.jsonl").read_text(encoding="utf-8").splitlines():
            chunk = json.loads(line)
            texts[str(chunk["id"])] = str(chunk["text"])
    summary, alarms = {}, []
    for folder in args.folders:
        counts = {"questions": 0, "right_drafts": 0, "right_contested": 0, "wrong_drafts": 0, "wrong_contested": 0,
                  "plain_right": 0, "plain_right_contested": 0}  # fmt: skip
        for line in (folder / "records.jsonl").read_text(encoding="utf-8").splitlines():
            record = json.loads(line)
            if record.get("system") != "selfcrag" or record.get("error"):
                continue
            counts["questions"] += 1
            for draft in drafts(record, texts):
                found = contested(draft["answer"], draft["evidence"], record["question"])
                kind = "right" if draft["right"] else "wrong"
                counts[f"{kind}_drafts"] += 1
                counts[f"{kind}_contested"] += bool(found)
                if draft["right"] and draft["plain"]:
                    counts["plain_right"] += 1
                    counts["plain_right_contested"] += bool(found)
                if found and draft["right"]:
                    alarms.append({"folder": folder.name, "id": record["id"], "question": record["question"],
                                   "answer": draft["answer"], "contested": found})
        summary[folder.name] = counts
    result = {**provenance(argv), "folders": summary, "false_alarms": alarms}
    args.out.write_text(json.dumps(result, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    print(f"{'folder':<48}{'questions':>10}{'right drafts':>14}{'contested':>11}{'wrong drafts':>14}{'contested':>11}")
    for name, c in summary.items():
        print(f"{name:<48}{c['questions']:>10}{c['right_drafts']:>14}{c['right_contested']:>11}"
              f"{c['wrong_drafts']:>14}{c['wrong_contested']:>11}")
    for alarm in alarms:
        first = alarm["contested"][0]
        print(f"- {alarm['question']}\n    {alarm['answer'][:160]}\n"
              f"    against: {first['other'][:160]} ({first['why']})")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
