"""What the model backend's refiner keeps for generation, per setting, on the tuning questions: no model calls.

    .venv/bin/python benchmarks/refiner_replay.py [--arm NAME=SETTING=VALUE[,SETTING=VALUE] ...] [--out FILE]

Each tuning question of `calibration_fit.py --sample 50 --per-class 0 --halueval 20` (SQuAD dev sample, HaluEval)
is retrieved once with the default settings; the model refiner's local scores (`refine_with="scores"`, no model
call) then pick strips from those passages under each arm's settings. In a graph run the refiner sees only the
passages the grader kept, so this is what each arm would keep if the grader kept every passage: it says how much
evidence an arm adds, not whether answers get better (calibration_fit.py trials measure that). Per source and arm:
strips and words kept per question (means), passages they come from, and questions whose strips differ from the
first arm's. Prints a table, writes benchmarks/results/refiner_replay.json (or --out).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from calibration_fit import halueval_questions, squad_questions  # noqa: E402
from eval_datasets import DEFAULT_DATASETS, RESULTS, index_dir  # noqa: E402

DEFAULT_ARMS = ("default=", "strip_window=strip_window=1", "every_passage=strip_every_passage=true")


def arm_of(text: str) -> tuple[str, dict[str, str]]:
    name, _, rest = text.partition("=")
    pairs = [item.split("=", 1) for item in rest.split(",") if item]
    if not name or any(len(pair) != 2 for pair in pairs):
        raise argparse.ArgumentTypeError(f"--arm takes NAME=SETTING=VALUE[,SETTING=VALUE]: {text!r}")
    return name, dict(pairs)


def replay(questions: list[dict[str, Any]], corpus: Path, arms: list[tuple[str, dict[str, str]]]) -> dict[str, Any]:
    from selfcrag.cli import _questions_index
    from selfcrag.context import Context
    from selfcrag.knowledge.langchain_objects import load_index
    from selfcrag.llm.refiner import LLMRefiner

    _questions_index(argparse.Namespace(index=str(index_dir(corpus)), corpus=str(corpus), model="", verifier="",
                                        verifier_url=""))  # builds the index once, as calibration_fit.py does
    index = load_index(index_dir(corpus))
    refiner = LLMRefiner(None)  # type: ignore[arg-type]  # the scores path makes no model call
    kept: dict[str, list[list[tuple[str, int]]]] = {name: [] for name, _ in arms}
    words: dict[str, list[int]] = {name: [] for name, _ in arms}
    for question in questions:
        passages = index.retrieve(question["question"], Context())
        for name, settings in arms:
            strips = refiner.refine(question["question"], passages, Context(**settings)).strips
            kept[name].append([(s["id"], s.get("start", 0)) for s in strips])
            words[name].append(sum(len(s["text"].split()) for s in strips))
    first = arms[0][0]
    return {name: {"strips": round(statistics.mean(len(k) for k in kept[name]), 2),
                   "words": round(statistics.mean(words[name]), 1),
                   "passages": round(statistics.mean(len({i for i, _ in k}) for k in kept[name]), 2),
                   "changed": sum(a != b for a, b in zip(kept[name], kept[first], strict=True))}
            for name, _ in arms}  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    cli = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    cli.add_argument("--datasets", type=Path, default=DEFAULT_DATASETS)
    cli.add_argument("--arm", action="append", type=arm_of, help="an arm's settings (repeatable; the first is the "
                     "one the others are compared with); default: " + ", ".join(DEFAULT_ARMS))
    cli.add_argument("--out", type=Path, default=RESULTS / "refiner_replay.json")
    args = cli.parse_args(argv)
    arms = args.arm or [arm_of(a) for a in DEFAULT_ARMS]

    from provenance import provenance

    origin = provenance(argv, __file__)
    work = Path(tempfile.mkdtemp(prefix="selfcrag-refiner-replay-"))
    squad, squad_corpus = squad_questions(args.datasets / "squad2", 0, 1, work, 50)
    halueval, halueval_corpus = halueval_questions(args.datasets / "halueval", work, 20)
    sources = {"squad": replay(squad, squad_corpus, arms), "halueval": replay(halueval, halueval_corpus, arms)}
    print(f"{'source':9} {'arm':16} {'strips':>6} {'words':>6} {'passages':>8} {'changed':>7}")
    for source, results in sources.items():
        for name, row in results.items():
            print(f"{source:9} {name:16} {row['strips']:6} {row['words']:6} {row['passages']:8} {row['changed']:7}")
    summary = {**origin, "arms": {name: settings for name, settings in arms},
               "questions": {"squad": len(squad), "halueval": len(halueval)}, "sources": sources}
    args.out.write_text(json.dumps(summary, indent=2) + "\n", encoding="utf-8")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
