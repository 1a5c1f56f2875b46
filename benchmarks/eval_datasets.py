"""`selfcrag eval --baseline plain` on each evaluation set with its corpus: the one way the benchmarks measure.

    .venv/bin/python benchmarks/eval_datasets.py [squad squad-allowed hotpotqa popqa halueval squad-reserved]
                                                 [--per-class N] [--limit N] [--seed 0] [--datasets ../shared/datasets]
                                                 [--model provider:model] [--set NAME=VALUE ...] [--resume]
                                                 [--verifier provider:model --verifier-url URL --server-pid PID]

Sets (default: all but squad-reserved):
- `squad`: the SQuAD 2.0 dev sample, 100 answerable + 100 unanswerable over its 285 paragraphs (tuning allowed).
- `squad-allowed`: N answerable + N unanswerable other questions of the same 8 articles (dev-v2.0.json; tuning
  allowed there too), indexed on those articles' paragraphs.
- `hotpotqa`, `popqa`: 100 questions each, out-of-domain checks: measure as often as you like, never read their
  misses to add rules, word lists or constants.
- `halueval`: 500 multi-hop questions seeded from HotpotQA, each with its own knowledge passages as the corpus;
  tuning allowed (it is the tuning stand-in for multi-hop questions). Runs only when named.
- `halueval-split`: the same questions over a corpus whose documents are cut at HaluEval's glue points
  (`split_glued`), one document per source paragraph, so a second hop has to be retrieved as in HotpotQA; tuning
  allowed. Runs only when named.
- `squad-reserved`: N + N from the 27 articles reserved for acceptance; runs only when named, never a place to tune.

Writes benchmarks/results/eval_<set>/ (records.jsonl, metrics.json, report.html) and prints one table over the sets;
with `--model`, on the model backend into eval_<set>_<model>/ instead, so a model run never replaces the offline
results. A rerun replaces a set's folder; `--resume` continues an interrupted run there instead (`selfcrag eval
--resume`: a model run of a set takes about an hour on 2 cores, so it may span sessions).
Indexes are cached under $TMPDIR/selfcrag-eval-indexes by corpus content, so a rerun does not embed again.
Data: SQuAD 2.0 (Rajpurkar et al. 2018), HotpotQA (Yang et al. 2018), both CC BY-SA 4.0; HaluEval (Li et al. 2023,
MIT); PopQA (Mallen et al.
2023) as distributed with the Self-RAG evaluation data (MIT), passages from Wikipedia (CC BY-SA).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import random
import re
import shutil
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from data_files import require  # noqa: E402
from provenance import provenance  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_DATASETS = ROOT.parent / "shared" / "datasets"
RESULTS = ROOT / "benchmarks" / "results"
DEFAULT_SETS = ("squad", "squad-allowed", "hotpotqa", "popqa")
ALL_SETS = (*DEFAULT_SETS, "halueval", "halueval-split", "squad-reserved")
FILES = {"squad": ("squad2/dev_sample_200.jsonl", "squad2/dev_sample_corpus.jsonl"),
         "hotpotqa": ("hotpotqa/dev_distractor_100.jsonl", "hotpotqa/dev_distractor_100_corpus.jsonl"),
         "popqa": ("popqa/longtail_100.jsonl", "popqa/longtail_100_corpus.jsonl"),
         "halueval": ("halueval/qa_500.jsonl", "halueval/qa_500_corpus.jsonl")}  # fmt: skip


def load_jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def squad_split(folder: Path, split: str, per_class: int, seed: int, work: Path) -> tuple[Path, Path]:
    """Questions and corpus files of a SQuAD 2.0 split beyond the dev sample: `allowed` draws from the other
    questions of the sample's 8 articles, `reserved` from the 27 articles reserved for acceptance. The draw is the
    one squad_graph_vs_plain.py made (same pool order, same seed), so earlier numbers stay comparable."""
    sample = load_jsonl(folder / "dev_sample_200.jsonl")
    allowed = {doc["title"] for doc in load_jsonl(folder / "dev_sample_corpus.jsonl")}
    taken = {q["id"] for q in sample}
    articles = [a for a in json.loads((folder / "dev-v2.0.json").read_text())["data"]
                if (a["title"] in allowed) == (split == "allowed")]  # fmt: skip
    pool = [{"id": qa["id"], "question": qa["question"], "answers": [x["text"] for x in qa["answers"]],
             "is_impossible": qa["is_impossible"], "context_title": article["title"],
             "context_id": f"{article['title']}#p{i}"}  # the corpus id of the question's paragraph (hit@k)
            for article in articles for i, paragraph in enumerate(article["paragraphs"]) for qa in paragraph["qas"]
            if qa["id"] not in taken]  # fmt: skip
    draw = random.Random(seed)
    questions = [q for impossible in (False, True)
                 for q in draw.sample([q for q in pool if q["is_impossible"] == impossible], per_class)]  # fmt: skip
    work.mkdir(parents=True, exist_ok=True)
    questions_file, corpus = work / f"squad-{split}.jsonl", work / f"squad-{split}-corpus.jsonl"
    questions_file.write_text("".join(json.dumps(q) + "\n" for q in questions), encoding="utf-8")
    corpus.write_text("".join(
        json.dumps({"id": f"{article['title']}#p{i}", "title": article["title"], "text": paragraph["context"]}) + "\n"
        for article in articles for i, paragraph in enumerate(article["paragraphs"])), encoding="utf-8")
    return questions_file, corpus


# HaluEval built each knowledge text by concatenating the question's source paragraphs with no separator, so a
# paragraph's final stop runs straight into the next one's capital ("...in the 19th century.First for Women is").
# Written prose puts a space there: a stop after a lower-case letter, digit or closing bracket/quote, directly
# followed by a capital (any script) or an opening quote, is a glue point. Abbreviations have an upper-case letter
# before the stop ("U.S.A") or a space after it, decimals ("1.2") no capital after it; a one-letter word or a
# capitalised two-letter one before the stop ("Ph.D.", a team "e.Dams") is an abbreviation, not a paragraph's end.
GLUE = re.compile(r"(?<=[a-z0-9)\]\"'”’%][.!?])(?=[\"“]?[^\W\d_a-z])")


def split_glued(text: str) -> list[str]:
    """A HaluEval knowledge text cut back into its source paragraphs (one, when it has no glue point)."""
    parts, start = [], 0
    for point in GLUE.finditer(text):
        word = text[:point.start() - 1].rsplit(None, 1)[-1].lstrip("(\"“'")
        if len(word) == 1 or (len(word) == 2 and word[0].isupper()):
            continue
        parts.append(text[start:point.start()].strip())
        start = point.start()
    parts.append(text[start:].strip())
    return [part for part in parts if part] or [text]


def halueval_split(corpus: Path, work: Path) -> Path:
    """HaluEval's corpus with each knowledge text split at its glue points into one document per paragraph."""
    rows = []
    for row in load_jsonl(corpus):
        parts = split_glued(str(row.get("text") or ""))
        rows += [{**row, "id": f"{row['id']}#{i}" if len(parts) > 1 else row["id"], "text": part}
                 for i, part in enumerate(parts, 1)]  # fmt: skip
    work.mkdir(parents=True, exist_ok=True)
    split = work / "qa_500_split_corpus.jsonl"
    split.write_text("".join(json.dumps(row, ensure_ascii=False) + "\n" for row in rows), encoding="utf-8")
    return split


def files_for(name: str, datasets: Path, per_class: int, seed: int, work: Path) -> tuple[Path, Path]:
    if name == "halueval-split":
        questions, corpus = FILES["halueval"]
        return datasets / questions, halueval_split(with_text(datasets / corpus, work), work)
    if name in FILES:
        questions, corpus = FILES[name]
        return datasets / questions, with_text(datasets / corpus, work)
    return squad_split(datasets / "squad2", name.removeprefix("squad-"), per_class, seed, work)


def with_text(corpus: Path, work: Path) -> Path:
    """The corpus without passages whose text is empty (PopQA's set has 96 title-only category pages): they hold
    nothing to retrieve, and the ingester rightly refuses them."""
    rows = load_jsonl(corpus)
    kept = [row for row in rows if str(row.get("text") or "").strip()]
    if len(kept) == len(rows):
        return corpus
    print(f"{corpus.name}: {len(rows) - len(kept)} passages without text left out", file=sys.stderr)
    work.mkdir(parents=True, exist_ok=True)
    cleaned = work / corpus.name
    cleaned.write_text("".join(json.dumps(row, ensure_ascii=False) + "\n" for row in kept), encoding="utf-8")
    return cleaned


def index_dir(corpus: Path) -> Path:
    """One cached index per corpus content and index format: `selfcrag eval --corpus` builds it only when the
    folder has none, and an index of an older format (one without stored text vectors answers far slower) is
    never picked up."""
    from selfcrag.knowledge.retrieval import FORMAT_VERSION
    from selfcrag.knowledge.vector_store import FORMAT
    from selfcrag.text.text import TOKENIZER

    stamp = f"{FORMAT_VERSION}|{FORMAT}|{TOKENIZER}".encode()
    digest = hashlib.sha256(stamp + corpus.read_bytes()).hexdigest()[:16]
    return Path(tempfile.gettempdir()) / "selfcrag-eval-indexes" / f"{corpus.stem}-{digest}"


def results_dir(results: Path, name: str, model: str, verifier: str = "", settings: list[str] | None = None) -> Path:
    """A set's folder: eval_<set>/ offline, eval_<set>_<model>/ on the model backend (the model's name with
    anything but letters, digits, dots and dashes as "-", e.g. eval_hotpotqa_openai-qwen2.5-coder-0.5b),
    _verifier-<model> after it with the local verifier on, and each `--set NAME=VALUE` after that as NAME-VALUE."""
    slugs = [model_slug(model), *([f"verifier-{model_slug(verifier)}"] if verifier else []),
             *(model_slug(item.replace("=", "-")) for item in settings or [])]
    return results / "_".join(["eval", name.replace("-", "_"), *(slug for slug in slugs if slug)])


def settings_given(cli: argparse.ArgumentParser, items: list[str]) -> dict[str, str]:
    """A benchmark's `--set NAME=VALUE` flags as a dict; anything else ends the script with its usage."""
    given = dict(item.split("=", 1) for item in items if "=" in item)
    if len(given) != len(items):
        cli.error("--set takes NAME=VALUE")
    return given


def model_slug(model: str) -> str:
    """A model's name for a file name: anything but letters, digits, dots and dashes as "-"."""
    return re.sub(r"[^A-Za-z0-9.-]+", "-", model).strip("-")


def _seconds(server_cpu: dict[str, float | None] | None) -> float | None:
    """A model server's median CPU per question, in seconds (None when it was not measured)."""
    p50 = (server_cpu or {}).get("p50")
    return None if p50 is None else p50 / 1000


def _pct(value: float | None) -> str:
    return "—" if value is None else f"{100 * value:.1f}%"


def _num(value: float | None, digits: int = 3) -> str:
    return "—" if value is None else f"{value:.{digits}f}"


def main(argv: list[str] | None = None) -> int:
    cli = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    # No `choices`: with nargs="*" Python 3.11's argparse checks the empty list itself against them and refuses it.
    cli.add_argument("sets", nargs="*", metavar="SET",
                     help=f"any of {', '.join(ALL_SETS)} (default: {' '.join(DEFAULT_SETS)})")
    cli.add_argument("--datasets", type=Path, default=DEFAULT_DATASETS)
    cli.add_argument("--per-class", type=int, default=100, help="questions per class of the drawn SQuAD splits")
    cli.add_argument("--seed", type=int, default=0, help="which questions the drawn SQuAD splits take")
    cli.add_argument("--limit", type=int, default=0, help="only the first N questions of each set (timing runs)")
    cli.add_argument("--results", type=Path, default=RESULTS, help="where eval_<set>/ folders are written")
    cli.add_argument("--model", default="", help="the model backend with this chat model (selfcrag eval --model)")
    cli.add_argument("--verifier", default="", help="the local verifier on, with this chat model (selfcrag eval "
                     "--verifier); its results go to eval_<set>_verifier-<model>/")
    cli.add_argument("--verifier-url", default="", help="the verifier's server (selfcrag eval --verifier-url)")
    cli.add_argument("--server-pid", type=int, default=0, help="the local model server's pid: its CPU per question "
                     "is measured too (selfcrag eval --server-pid)")
    cli.add_argument("--set", action="append", default=[], metavar="NAME=VALUE", help="a setting for selfcrag's "
                     "runs (repeatable; selfcrag eval --set); its results go to eval_<set>_..._NAME-VALUE/")
    cli.add_argument("--resume", action="store_true", help="continue each set's interrupted run (selfcrag eval "
                     "--resume) instead of replacing its folder")
    args = cli.parse_args(argv)
    args.sets = args.sets or list(DEFAULT_SETS)
    if unknown := [name for name in args.sets if name not in ALL_SETS]:
        cli.error(f"unknown set {unknown[0]!r}: choose from {', '.join(ALL_SETS)}")
    splits = any(name.startswith("squad-") for name in args.sets)  # drawn from the official dev file
    require(args.datasets, *(file for name in args.sets if name in FILES for file in FILES[name]),
            *(FILES["halueval"] if "halueval-split" in args.sets else ()),
            *(("squad2/dev-v2.0.json", "squad2/dev_sample_200.jsonl") if splits else ()))

    from selfcrag.cli import main as selfcrag
    origin = provenance(sys.argv[1:] if argv is None else argv, __file__)  # the code as the run began

    if not args.model:  # the offline results' folder holds offline runs, whatever the environment says (`auto`
        os.environ["SELFCRAG_BACKEND"] = "offline"  # would take the model backend when OPENAI_API_KEY is set)
    work = Path(tempfile.mkdtemp(prefix="selfcrag-eval-splits-"))
    table = {}
    for name in args.sets:
        questions, corpus = files_for(name, args.datasets, args.per_class, args.seed, work)
        out = results_dir(args.results, name, args.model, args.verifier, args.set)
        if not args.resume:
            shutil.rmtree(out, ignore_errors=True)  # this script's own results: a rerun replaces them
        command = ["eval", str(questions), "--index", str(index_dir(corpus)), "--corpus", str(corpus),
                   "--baseline", "plain", "--out", str(out), *(["--limit", str(args.limit)] if args.limit else []),
                   *(["--model", args.model] if args.model else []), *(["--resume"] if args.resume else []),
                   *(["--verifier", args.verifier] if args.verifier else []),
                   *(["--verifier-url", args.verifier_url] if args.verifier_url else []),
                   *(["--server-pid", str(args.server_pid)] if args.server_pid else []),
                   *(flag for item in args.set for flag in ("--set", item))]
        print(f"== {name}: selfcrag {' '.join(command)}", file=sys.stderr)
        code = selfcrag(command)
        if (out / "metrics.json").exists():  # an interrupted run's metrics too (run.interrupted says so)
            table[name] = json.loads((out / "metrics.json").read_text(encoding="utf-8"))
            # What produced these figures, beside them: the code's commit and this script's own command line.
            table[name]["run"] |= origin
            (out / "metrics.json").write_text(json.dumps(table[name], indent=2) + "\n", encoding="utf-8")
        if code:
            return code
    shutil.rmtree(work, ignore_errors=True)

    print(f"\n{'set':<16}{'system':<10}{'Phi1':>7}{'Phi3':>7}{'coverage':>9}{'right':>6}{'wrong':>6}"
          f"{'unans. answered':>16}{'AUROC':>7}{'AURC':>7}{'ECE':>7}{'hit@k':>7}{'p50 ms':>8}{'srv CPU s':>10}"
          f"{'seconds':>9}")
    for name, result in table.items():
        for system, m in result["systems"].items():
            phi = m["effective_reliability"]
            print(f"{name:<16}{system:<10}{_num(phi['1']):>7}{_num(phi['3']):>7}{_pct(m['coverage']):>9}"
                  f"{m['right']:>6}{m['wrong']:>6}{_pct(m['unanswerable_answered']):>16}"
                  f"{_num(m['auroc']):>7}{_num(m['aurc']):>7}{_num(m['ece']):>7}{_pct(m['hit_at_k']):>7}"
                  f"{_num(m['latency_ms']['p50'], 0):>8}{_num(_seconds(m.get('server_cpu_ms')), 1):>10}"
                  f"{result['run']['seconds']:>9}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
