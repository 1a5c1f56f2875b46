"""Re-fit the shipped calibration from the tuning data and say what each preset cost's floor does there: one command.

    .venv/bin/python benchmarks/calibration_fit.py [--per-class 300] [--seed 1] [--datasets ../shared/datasets]
                                                   [--out src/selfcrag/data/calibration/offline.json]
                                                   [--presets src/selfcrag/data/presets.json] [--records FILE]
                                                   [--model provider:model | --verifier provider:model
                                                    --verifier-url URL] [--ungrounded-drafts scored]
                                                   [--set NAME=VALUE ...] [--trial NAME]

Two source domains, so the fit is not one dataset's habits:
- SQuAD 2.0: the dev sample (200 questions) and N answerable + N unanswerable other questions of its 8 articles,
  on those articles' paragraphs. The 200 questions `eval_datasets.py squad-allowed` measures on (its default draw,
  100 + 100 with seed 0) are left out, so that set stays out of sample. Grouped by article.
- HaluEval: its 500 multi-hop questions over the `halueval-split` corpus of eval_datasets.py (each knowledge text
  cut back into its source paragraphs, so the second hop has to be retrieved, as in multi-hop use; the glued
  corpus also reads "century.First" as one token, which leaves ~40% of its questions without any draft). Each
  question is its own group.

Every question runs through the offline graph (`selfcrag calibrate`'s runner), and plain RAG beside it. Features
are chosen greedily by grouped cross-validation over both sources together, among all candidates but those that
count the question's own words (`QUESTION_WORDING`: these questions were written from their passages, users
paraphrase; `--with-question-wording` lets the fit take them); a feature is taken only if the general cost's show
floor then keeps at least as many right drafts. The table gives AUROC / ECE / AURC per source, of the confidence the
runs had (before) and of the cross-validated fit (after). No floor is fitted: each domain's cost (data/presets.json)
sets its floor, p >= cost / (1 + cost); the last table says what each cost's floor does on the tuning runs'
cross-validated probabilities, per source, beside plain RAG (effective reliability Phi_1 and Phi_3, right answers and
unanswerable questions answered against plain's), and names the general preset's cost by its rule: the most cautious
cost that keeps at least 0.8x plain RAG's right answers in every source (presets.json is edited by hand).
HotpotQA, PopQA and the reserved SQuAD articles are never used here. Re-run after a new feature lands in
quality/calibration.py FEATURES; writes benchmarks/results/calibration_fit.json. `--records FILE` keeps the runs'
records there, and a later run with the same FILE refits from them without running the graph again.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import tempfile
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from eval_datasets import (  # noqa: E402
    DEFAULT_DATASETS,
    RESULTS,
    ROOT,
    halueval_split,
    index_dir,
    load_jsonl,
    model_slug,
    settings_given,
    squad_split,
    with_text,
)

SHIPPED = ROOT / "src" / "selfcrag" / "data" / "calibration" / "offline.json"
SHIPPED_MODEL = SHIPPED.with_name("model.json")  # quality/calibration.shipped("model") reads it
SHIPPED_VERIFIER = SHIPPED.with_name("offline_verifier.json")  # shipped("offline", verifier=True) reads it
COSTS = (0.25, 0.5, 0.75, 1.0, 1.5, 2.0, 3.0)  # the costs whose floors the last table shows
KEEP_RIGHT = 0.8  # the general cost is the most cautious that keeps this share of plain RAG's right answers
EVAL_DRAW = (100, 0)  # eval_datasets.py's default squad-allowed draw (per class, seed): never fitted on


def squad_questions(folder: Path, per_class: int, seed: int, work: Path,
                    sample_size: int | None = None) -> tuple[list[dict[str, Any]], Path]:  # fmt: skip
    """The dev sample (its first `sample_size` questions, or all) plus `per_class` answerable and unanswerable
    other questions of its articles, none of them in the squad-allowed evaluation draw; and the corpus of those
    articles."""
    held_out, corpus = squad_split(folder, "allowed", *EVAL_DRAW, work)
    sample = load_jsonl(folder / "dev_sample_200.jsonl")[:sample_size]
    taken = {q["id"] for q in sample} | {q["id"] for q in load_jsonl(held_out)}
    titles = {row["title"] for row in load_jsonl(corpus)}
    pool = [{"id": qa["id"], "question": qa["question"], "answers": [x["text"] for x in qa["answers"]],
             "is_impossible": qa["is_impossible"], "context_title": article["title"]}
            for article in json.loads((folder / "dev-v2.0.json").read_text(encoding="utf-8"))["data"]
            if article["title"] in titles
            for paragraph in article["paragraphs"] for qa in paragraph["qas"] if qa["id"] not in taken]  # fmt: skip
    draw = random.Random(seed)
    drawn = [q for impossible in (False, True)
             for q in draw.sample([q for q in pool if q["is_impossible"] == impossible], per_class)]  # fmt: skip
    return sample + drawn, corpus


def halueval_questions(folder: Path, work: Path, size: int | None = None) -> tuple[list[dict[str, Any]], Path]:
    questions = [{**q, "context_title": f"halueval:{q['id']}"} for q in load_jsonl(folder / "qa_500.jsonl")][:size]
    return questions, halueval_split(with_text(folder / "qa_500_corpus.jsonl", work), work)


def run_source(name: str, questions: list[dict[str, Any]], corpus: Path, work: Path, model: str = "",
               keep: Path | None = None, origin: dict[str, Any] | None = None,
               verifier: tuple[str, str] = ("", ""), calibration: str = "",
               settings: dict[str, str] | None = None) -> list[dict[str, Any]]:  # fmt: skip
    """Every question through the graph (offline, or the model backend with `model`; with the `calibration` file
    when one is named, and `settings` over the defaults) and plain RAG, on its corpus's (cached) index: one record
    per system. With `keep`, each
    record is appended there as it is made, and the records it already holds are not made again: a model run takes
    hours and may span sessions, and a rerun of the graph alone (a change plain RAG does not see) reuses plain's."""
    from selfcrag.cli import _questions_index
    from selfcrag.evaluation.questions import load_questions
    from selfcrag.evaluation.run import Systems, measure

    file = work / f"{name}.jsonl"
    file.write_text("".join(json.dumps(q, sort_keys=True) + "\n" for q in questions), encoding="utf-8")
    operator, _ = _questions_index(argparse.Namespace(index=str(index_dir(corpus)), corpus=str(corpus), model=model,
                                                      verifier=verifier[0], verifier_url=verifier[1]))
    # The backend this fit is for, whatever the environment holds: OPENAI_API_KEY alone would make `auto` the model
    # backend, and an offline (or verifier) fit would be made of model-backend runs.
    operator["backend"] = "model" if model else "offline"
    if calibration:
        operator["calibration"] = calibration
    operator.update(settings or {})
    systems = Systems.build({k: v for k, v in operator.items() if v is not None}, {})
    loaded = load_questions(file)
    asked = {q["id"] for q in loaded}  # a smaller rerun fits exactly its own questions
    kept = {(r["id"], r["system"]): r for r in (load_jsonl(keep) if keep and keep.is_file() else [])
            if r.get("source") == name and r["id"] in asked}  # fmt: skip
    records = list(kept.values())
    runs = (("selfcrag", systems.selfcrag), ("plain", systems.plain))
    todo = [q for q in loaded if any((q["id"], system) not in kept for system, _ in runs)]
    if todo:
        systems.warm_up(todo[0]["question"])
    for done, question in enumerate(todo, 1):
        # plain RAG too: the floor rule compares the wrong answers the graph shows with plain's
        # Each record names the code and command that measured it: a kept file may span sessions and commits.
        pair = [{**measure(system, run, question), "source": name, **(origin or {})}
                for system, run in runs if (question["id"], system) not in kept]
        records += pair
        if keep:
            with keep.open("a", encoding="utf-8") as sink:
                sink.write("".join(json.dumps(r, default=str) + "\n" for r in pair))
        if done % (100 if not (model or verifier[0]) else 5) == 0 or done == len(todo):
            print(f"{name}: {done}/{len(todo)} questions run", file=sys.stderr)
    return records


def plain_counts(records: list[dict[str, Any]], sources: Iterable[str],
                 system: str = "plain") -> dict[str, dict[str, int]]:  # fmt: skip
    """Plain RAG's (or `system`'s) questions, right and wrong answers shown, and unanswerable questions answered,
    per source."""
    counts = {}
    for source in sources:
        shown = [r for r in records if r["system"] == system and r["source"] == source]
        counts[source] = {"questions": len(shown), "right": sum(1 for r in shown if r["correct"]),
                          "wrong": sum(1 for r in shown if r["answered"] and not r["correct"]),
                          "unanswerable": sum(1 for r in shown if r["answered"] and r["is_impossible"])}
    return counts


def own_decisions(records: list[dict[str, Any]], sources: Iterable[str]) -> dict[str, dict[str, dict[str, Any]]]:
    """What each system showed on the tuning questions as the runs decided, with the calibration they ran with
    (not the new fit's): per source and system, the counts of `plain_counts` and Phi_1."""
    names = list(sources)
    table: dict[str, dict[str, dict[str, Any]]] = {source: {} for source in names}
    for system in ("selfcrag", "plain"):
        for source, counts in plain_counts(records, names, system).items():
            n = max(1, counts["questions"])
            table[source][system] = {**counts, "phi_1": round((counts["right"] - counts["wrong"]) / n, 3)}
    return table


def withheld_right(records: list[dict[str, Any]]) -> dict[str, dict[str, int]]:
    """Per source, the questions plain RAG got right and the graph's run did not answer, by why: it wrote no draft,
    kept none it may show (every draft ungrounded, or vetoed), or kept one its confidence then withheld."""
    graph = {(r["source"], r["id"]): r for r in records if r["system"] == "selfcrag"}
    found: dict[str, dict[str, int]] = {}
    for plain in (r for r in records if r["system"] == "plain" and r["correct"]):
        run = graph.get((plain["source"], plain["id"]))
        if run is None or run["answered"]:
            continue
        signals = run.get("signals") or {}
        why = ("below the floor" if signals.get("drafts_kept") else "no draft kept" if signals.get("drafts")
               else "no draft")  # fmt: skip
        counts = found.setdefault(plain["source"], {"no draft": 0, "no draft kept": 0, "below the floor": 0})
        counts[why] += 1
    return found


def drop_torn_line(path: Path) -> None:
    """Cut a last line a kill left half written; the question it belonged to runs again."""
    if not path.is_file():
        return
    data = path.read_bytes()
    complete = data[: data.rfind(b"\n") + 1]
    if len(complete) < len(data):
        path.write_bytes(complete)


def main(argv: list[str] | None = None) -> int:
    from selfcrag.quality.calibration import UNGROUNDED_DRAFTS

    cli = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    cli.add_argument("--datasets", type=Path, default=DEFAULT_DATASETS)
    cli.add_argument("--per-class", type=int, default=300, help="SQuAD questions per class beyond the dev sample")
    cli.add_argument("--seed", type=int, default=1, help="which of those questions are drawn")
    cli.add_argument("--sample", type=int, help="only the first N questions of the SQuAD dev sample (default all)")
    cli.add_argument("--halueval", type=int, help="only the first N HaluEval questions (default all 500)")
    cli.add_argument("--model", default="", help="fit the model backend with this chat model (provider:model; "
                     "OPENAI_BASE_URL etc. as for any run) and write its shipped file, data/calibration/model.json")
    cli.add_argument("--verifier", default="", help="fit the offline backend with the local verifier on, with this "
                     "chat model (provider:model, served at --verifier-url), and write its shipped file, "
                     f"{SHIPPED_VERIFIER.relative_to(ROOT)}")
    cli.add_argument("--verifier-url", default="", help="the verifier's OpenAI-compatible server")
    cli.add_argument("--out", type=Path, help=f"the file to write (default {SHIPPED.relative_to(ROOT)}, or "
                     f"{SHIPPED_MODEL.relative_to(ROOT)} with --model, {SHIPPED_VERIFIER.name} with --verifier)")
    cli.add_argument("--records", type=Path, help="keep the runs' records here, and reuse those it holds: a rerun "
                     "refits without running the graph again, an interrupted one runs only what is missing")
    cli.add_argument("--ungrounded-drafts", choices=UNGROUNDED_DRAFTS, default="withheld",
                     help="which drafts the runs may show and the fit is for (quality/calibration.py): `scored` keeps "
                     "drafts the groundedness check did not pass as candidates, so the fit weighs groundedness "
                     "instead of the check gating alone (for a weak checker, e.g. a small model's)")
    cli.add_argument("--set", action="append", default=[], metavar="NAME=VALUE",
                     help="a setting for both systems' runs (repeatable), e.g. --set strip_sentences=20: a trial "
                     "of a setting on the tuning questions, named in every record's command")
    cli.add_argument("--trial", default="", metavar="NAME",
                     help="a trial of a code change on the tuning questions: its summary is written beside the "
                     "fit's as ..._NAME.json, never over it (--set names its file by its settings)")
    cli.add_argument("--with-question-wording", action="store_true",
                     help="let the fit take the features that count the question's words (QUESTION_WORDING)")
    args = cli.parse_args(argv)

    from provenance import provenance as provenance_of_run

    run_origin = provenance_of_run(argv, __file__)  # the code as the run began

    from selfcrag.evaluation.calibrate import (
        chosen,
        cost_table,
        fit,
        keeps_at,
        most_cautious_cost,
        provenance,
        rows_of,
        source_table,
        table,
        with_mode,
        write,
    )
    from selfcrag.quality.calibration import BACKEND_NEUTRAL, FEATURES, QUESTION_WORDING, shipped
    from selfcrag.quality.thresholds import PRESETS, show_floor

    started = time.process_time()
    work = Path(tempfile.mkdtemp(prefix="selfcrag-calibration-"))
    if args.model and args.verifier:
        cli.error("--verifier fits the offline backend's file: leave out --model")
    out = args.out or (SHIPPED_MODEL if args.model else SHIPPED_VERIFIER if args.verifier else SHIPPED)
    squad, squad_corpus = squad_questions(args.datasets / "squad2", args.per_class, args.seed, work, args.sample)
    halueval, halueval_corpus = halueval_questions(args.datasets / "halueval", work, args.halueval)
    sources = {"squad": (squad, squad_corpus), "halueval": (halueval, halueval_corpus)}
    reused = bool(args.records and args.records.is_file())
    if args.records:
        drop_torn_line(args.records)
    # The runs keep the drafts the fit is to be for, and pick among them as the backend's shipped file does now.
    backend_file = shipped("model" if args.model else "offline", verifier=bool(args.verifier))
    calibration = str(with_mode(backend_file, args.ungrounded_drafts, work)) if args.ungrounded_drafts != "withheld" \
        else ""
    settings = settings_given(cli, args.set)
    records = [r for name, (questions, corpus) in sources.items()
               for r in run_source(name, questions, corpus, work, args.model, args.records, run_origin,
                                   (args.verifier, args.verifier_url), calibration, settings)]  # fmt: skip
    rows = rows_of(records)
    plain = plain_counts(records, sources)
    # A feature is taken only if the general cost's floor then withholds no more right answers (`select`).
    keeps = keeps_at(show_floor(PRESETS["general"].cost))
    # Not the question-wording features unless asked: the tuning questions were written from their passages.
    left_out = () if args.with_question_wording else QUESTION_WORDING
    fitted = fit(rows, [name for name in FEATURES if name not in left_out], keeps=keeps)
    # What a fit can do from the backend-neutral features alone: the best the shipped file can hope for on the
    # model backend, whose graders score differently, before a user fits their own.
    neutral = fit(rows, [name for name in BACKEND_NEUTRAL if name not in left_out], keeps=keeps)
    files = [work / f"{name}.jsonl" for name in sources] + [squad_corpus, halueval_corpus]
    wording = " --with-question-wording" if args.with_question_wording else ""
    if args.records:  # the graph's runs may come from an earlier commit than this fit: say so
        wording += f" --records {args.records.name} ({'reused' if reused else 'written'})"
    for flag, value in (("--sample", args.sample), ("--halueval", args.halueval), ("--model", args.model),
                        ("--verifier", args.verifier), ("--ungrounded-drafts", calibration and args.ungrounded_drafts),
                        *(("--set", item) for item in args.set), ("--trial", args.trial)):
        wording += f" {flag} {value}" if value else ""
    command = (f"benchmarks/calibration_fit.py --per-class {args.per_class} --seed {args.seed}{wording} (SQuAD: dev "
               f"sample{f' (first {args.sample})' if args.sample else ''} + {args.per_class}+{args.per_class} of its "
               f"articles, squad-allowed eval draw excluded; HaluEval {len(halueval)} over its split corpus)")
    backend = "model" if args.model else f"offline + verifier {args.verifier}" if args.verifier else "offline"
    origin = provenance([f for f in files if f.is_file()], rows, backend, command)
    write(out, fitted, origin, args.ungrounded_drafts)
    costs = sorted({*COSTS, *(preset.cost for preset in PRESETS.values())})
    # Every candidate is a row of the fit; each question is decided again as finalize decides, from its candidates'
    # cross-validated probabilities (the most probable one), before its floor is applied.
    question_rows, question_p = chosen(rows, fitted["out_of_fold"])
    floors = cost_table(question_p, question_rows, plain, costs)
    general = most_cautious_cost(floors, KEEP_RIGHT)
    cpu = round(time.process_time() - started, 1)
    print(table(fitted))
    print(source_table(fitted))
    print("backend-neutral features only (what the model backend's default file could reach at best):")
    print(table(neutral))
    print(source_table(neutral))
    print(f"{'cost':>5}{'floor':>7} {'source':<10}{'coverage':>9}{'right':>7}{'wrong':>7}{'Phi1':>8}{'plain':>8}"
          f"{'Phi3':>8}{'plain':>8}{'right/plain':>12}{'unans./plain':>13}   (tuning, cross-validated)")
    for row in floors:
        ratios = [("—" if row[k] is None else f"{row[k]:.2f}") for k in ("right_vs_plain", "unanswerable_vs_plain")]
        print(f"{row['cost']:>5g}{row['floor']:>7.2f} {row['source']:<10}{row['coverage']:>9.3f}{row['right']:>7}"
              f"{row['wrong']:>7}{row['phi_1']:>+8.3f}{row['plain_phi_1']:>+8.3f}{row['phi_3']:>+8.3f}"
              f"{row['plain_phi_3']:>+8.3f}{ratios[0]:>12}{ratios[1]:>13}")
    print(f"general preset: the most cautious cost that keeps >= {KEEP_RIGHT:g}x plain RAG's right answers in every "
          f"source: {general} (data/presets.json has {PRESETS['general'].cost:g})")
    decided = own_decisions(records, sources)
    print("the runs' own decisions (the calibration they ran with): " + "; ".join(
        f"{source}: " + ", ".join(f"{system} {c['right']} right / {c['wrong']} wrong (Phi1 {c['phi_1']:+.3f}, "
                                  f"unanswerable answered {c['unanswerable']})" for system, c in by.items())
        for source, by in decided.items()))  # fmt: skip
    withheld = withheld_right(records)
    print("plain RAG's right answers the graph's runs did not show, by why (the runs' own decisions): "
          + "; ".join(f"{source}: {counts}" for source, counts in withheld.items()))
    print(f"wrote {out}; {cpu} CPU s")
    RESULTS.mkdir(parents=True, exist_ok=True)
    summary = {"cross_validation": fitted["cross_validation"], "model": fitted["model"], "cost_floors": floors,
               "general_cost": {"rule": f"the most cautious cost keeping >= {KEEP_RIGHT:g}x plain RAG's right answers "
                                        "in every tuning source (cross-validated probabilities)", "chosen": general},
               "backend_neutral": {"cross_validation": neutral["cross_validation"], "model": neutral["model"]},
               "runs_own_decisions": decided, "plain_right_withheld": withheld,
               "cpu_seconds": cpu, "questions": command, **run_origin}
    name = (f"calibration_fit_{model_slug(args.model)}" if args.model else
            f"calibration_fit_verifier-{model_slug(args.verifier)}" if args.verifier else "calibration_fit")
    name += ("" if args.ungrounded_drafts == "withheld" else f"_{args.ungrounded_drafts}")
    name += "".join(f"_{key}-{value}" for key, value in settings.items())  # a trial beside the fit
    name += (f"_{args.trial}" if args.trial else "") + ".json"
    (RESULTS / name).write_text(json.dumps(summary, indent=2) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
