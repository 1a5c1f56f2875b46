"""False alarms of the layered prompt-injection defence on ordinary text: what ingest drops as hidden text
(selfcrag/text/sanitize.py `drop_hidden`: comments, image alt text, invisible runs) and what the detector then
removes (selfcrag/quality/injection.py), each text read as ingest and retrieval read it (`clean_document`, then
`scan`), and the sentences of what is kept that the output check would hold as planted (quality/directives.py: a
passage counts as touched when it has one). The model-judged screen (llm/screen.py) is off by default and needs a
model: not measured here.

    .venv/bin/python benchmarks/injection_false_positives.py [--datasets ../shared/datasets]

Ordinary documents address the reader, never the assistant, so every sentence flagged here is a false alarm:
the bundled sample KB (English and Chinese), the SQuAD 2.0 dev-sample corpus (285 paragraphs) and the HaluEval QA
corpus (500 passages) plus HaluEval's right and hallucinated answers. Prints a table with each flagged sentence,
then the detection rate on the tuning phrasings (tests/data/injection_tuning.jsonl) and on the held-out ones
(tests/data/injection_heldout.jsonl, written before the detector and never tuned on), with what each set missed;
writes benchmarks/results/injection_false_positives.json.
Data: SQuAD 2.0 (Rajpurkar et al. 2018, CC BY-SA 4.0), HaluEval (Li et al. 2023, MIT). HotpotQA, PopQA and the
reserved SQuAD articles are not read.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from data_files import require  # noqa: E402
from provenance import provenance  # noqa: E402
from squad_offline import DEFAULT_DATASETS, ROOT, load_jsonl  # noqa: E402

from selfcrag.quality.directives import directive_sentences  # noqa: E402
from selfcrag.quality.injection import scan  # noqa: E402
from selfcrag.text.sanitize import clean_document, drop_hidden  # noqa: E402

PASSAGE_SHARE = 0.01  # the most passages of a corpus the defence may touch (issue 44)


def measure(name: str, texts: list[tuple[str, str]]) -> dict:
    """texts: (id, text). Counts sentences (line by line, as the detector reads them), the texts whose hidden text
    ingest drops, what the detector flagged, and the share of texts either layer touched."""
    from selfcrag.quality.injection import units

    sentences = flagged_docs = touched = dictating_docs = 0
    flagged: list[dict[str, str]] = []
    dictating: list[dict[str, str]] = []
    hidden: list[str] = []
    for ident, text in texts:
        sentences += sum(len(line) for line in units(text))
        dropped = drop_hidden(text) != text
        hidden += [ident] if dropped else []
        clean = clean_document(text)
        kept, removed = scan(clean)
        # what the output check would hold as planted beside what the detector removed: sentences of the kept text
        # that dictate what someone says (quality/directives.py); an answer saying only what they say is vetoed
        told = directive_sentences([kept])
        flagged_docs += bool(removed)
        dictating_docs += bool(told)
        touched += bool(removed) or dropped or bool(told)
        flagged += [{"id": ident, "sentence": s} for s in removed]
        dictating += [{"id": ident, "sentence": s} for s in told]
    return {"corpus": name, "documents": len(texts), "sentences": sentences, "hidden_text_documents": len(hidden),
            "hidden": hidden, "flagged_documents": flagged_docs, "flagged_sentences": len(flagged), "flagged": flagged,
            "output_check_documents": dictating_docs, "output_check_sentences": dictating,
            "false_alarm_share": round(touched / max(1, len(texts)), 4)}


def detection(name: str) -> dict:
    """How many of a phrasing set's instructions are removed, and how many of its look-alikes are kept."""
    path = ROOT / "tests" / "data" / f"injection_{name}.jsonl"
    rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()][1:]  # 1: the header
    missed = [r["text"] for r in rows if r["instruction"] and not scan(clean_document(r["text"]))[1]]
    alarms = [r["text"] for r in rows if not r["instruction"] and scan(clean_document(r["text"]))[1]]
    return {"set": name, "instructions": sum(r["instruction"] for r in rows), "missed": missed,
            "look_alikes": sum(not r["instruction"] for r in rows), "false_alarms": alarms}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--datasets", type=Path, default=DEFAULT_DATASETS)
    parser.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" / "injection_false_positives.json")
    args = parser.parse_args()
    origin = provenance()
    require(args.datasets, "squad2/dev_sample_corpus.jsonl", "halueval/qa_500_corpus.jsonl", "halueval/qa_500.jsonl")
    kb = sorted((ROOT / "src" / "selfcrag" / "data" / "sample_kb").rglob("*.md"))
    squad = load_jsonl(args.datasets / "squad2" / "dev_sample_corpus.jsonl")
    halu_corpus = load_jsonl(args.datasets / "halueval" / "qa_500_corpus.jsonl")
    halu = load_jsonl(args.datasets / "halueval" / "qa_500.jsonl")
    answers = [(r["id"], a) for r in halu for a in [*r["answers"], *r["hallucinated_answers"]]]
    rows = [
        measure("sample KB (en + zh)", [(str(p.relative_to(ROOT)), p.read_text(encoding="utf-8")) for p in kb]),
        measure("SQuAD dev-sample corpus", [(r["id"], r["text"]) for r in squad]),
        measure("HaluEval QA corpus", [(r["id"], r["text"]) for r in halu_corpus]),
        measure("HaluEval answers", answers),
    ]
    print(f"{'corpus':<26}{'documents':>10}{'sentences':>11}{'hidden text':>13}{'flagged docs':>14}"
          f"{'flagged sentences':>19}{'output check docs':>19}{'false alarms':>14}")
    for row in rows:
        print(f"{row['corpus']:<26}{row['documents']:>10}{row['sentences']:>11}{row['hidden_text_documents']:>13}"
              f"{row['flagged_documents']:>14}{row['flagged_sentences']:>19}{row['output_check_documents']:>19}"
              f"{row['false_alarm_share']:>14.2%}")
    for row in rows:
        for hit in row["flagged"]:
            print(f"  {row['corpus']}: {hit['id']}: {hit['sentence'][:120]}")
        for hit in row["output_check_sentences"]:
            print(f"  {row['corpus']}: {hit['id']}: (output check) {hit['sentence'][:105]}")
    sets = [detection("tuning"), detection("heldout")]
    for row in sets:
        found = row["instructions"] - len(row["missed"])
        print(f"{row['set']} phrasings: {found} of {row['instructions']} removed, {len(row['false_alarms'])} of "
              f"{row['look_alikes']} look-alikes flagged")
        for text in row["missed"] + row["false_alarms"]:
            print(f"  {'missed' if text in row['missed'] else 'false alarm'}: {text[:120]}")
    out = args.out
    layers = {"ingest": "hidden text dropped (drop_hidden)",
              "retrieval": "detector (scan; with directives.to_answerer since issue 44)",
              "output_check": "sentences of the kept text that dictate speech (directives.directive_sentences): "
                              "an answer sentence saying only what one says is vetoed; counted as touched",
              "model_screen": "not measured: off by default (injection_screen), needs a model",
              "most_passages_touched": PASSAGE_SHARE,
              "within_bound": all(row["false_alarm_share"] <= PASSAGE_SHARE for row in rows)}
    out.write_text(json.dumps({**origin, "layers": layers, "corpora": rows, "phrasings": sets}, ensure_ascii=False,
                              indent=1) + "\n", encoding="utf-8")
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
