"""CPU per warm offline question, with and without the index's stored text vectors, measured side by side.

    .venv/bin/python benchmarks/question_cpu.py [--limit N] [--index DIR] [--batch-sizes 4,16] [--no-compare]
                                                [--reference SRC]

Builds the SQuAD 2.0 dev-sample corpus index with its stored vectors (or reuses it: `--index`, default a
directory under the temp dir named by the corpus, the embedder and the store format), then asks the dev-sample
questions through the offline graph in one process, each question once per arm, one arm after the other:
- `stored`: the index with its stored vectors (this branch);
- `no store`: the same index saved without them (an index from before them), same embedding batch size;
- `no store, batch 32 (main)`: as before this change, embedding batches of 32;
- `no store, batch N`: for each of `--batch-sizes`, to pick the batch size texts unknown to the index get.
- `plain RAG`: the same index (stored vectors) and the same offline reader, retrieve then generate once, no graph:
  the anchor issue 46 holds a warm question to (within 2x of it);
- `--reference SRC` (e.g. /work/main/src): this script run at the same time in a second process importing the
  selfcrag under SRC (its `stored` arm): CPU before and after a change, measured side by side on the same load,
  and its decisions, confidences and answers compared with this tree's.
Each arm has its own embedder object, so its own embedding cache: an arm never reuses another's vectors. The
machine is shared and noisy, so the headline is process CPU seconds (`time.process_time()`, all threads) and
their ratio, not wall time. Per arm: CPU per question (median, p90), wall median, embedding calls and texts per
question, and how many decisions differ from the `stored` arm's. Writes benchmarks/results/question_cpu.json.
Data: SQuAD 2.0 (Rajpurkar et al. 2018, CC BY-SA 4.0), the dev sample shared/datasets allows for tuning.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from data_files import require  # noqa: E402
from provenance import provenance  # noqa: E402
from squad_offline import DEFAULT_DATASETS, ROOT, load_jsonl  # noqa: E402


class CountingEmbedder:
    """Wraps the real embedder under its own name (so stored vectors and the index's manifest match) and counts
    what it is asked to embed."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.name, self.dim = inner.name, inner.dim
        self.languages = getattr(inner, "languages", None)
        self.calls = self.texts = 0

    def embed_documents(self, texts: list[str]) -> np.ndarray:
        self.calls += 1
        self.texts += len(texts)
        return self.inner.embed_documents(texts)

    def embed_query(self, text: str) -> np.ndarray:
        return self.embed_documents([text])[0]


@dataclass
class Arm:
    name: str
    batch_size: int
    stored: bool
    embedder: CountingEmbedder
    graph: Any = None
    plain: Any = None  # the components plain RAG retrieves and generates with (the plain arm: no graph)
    rows: list[dict] = field(default_factory=list)


def index_dir(corpus: Path, embedder_name: str, root: Path | None) -> Path:
    from selfcrag.knowledge.vector_store import FORMAT
    from selfcrag.text.text import TOKENIZER

    if root:
        return root
    digest = hashlib.sha256(f"{embedder_name}\0{TOKENIZER}\0{FORMAT}\0".encode() + corpus.read_bytes())
    return Path(tempfile.gettempdir()) / f"selfcrag-question-cpu-{digest.hexdigest()[:12]}"


def build_or_reuse(corpus: Path, directory: Path, embedder: Any, with_plain: bool = True) -> dict:
    """The index with its stored vectors in `directory` (built unless there), and one without them beside it."""
    from selfcrag.knowledge.documents import chunk_documents, load_documents
    from selfcrag.knowledge.index_files import MANIFEST
    from selfcrag.knowledge.retrieval import HybridIndex
    from selfcrag.knowledge.vector_store import KEYS_FILE, VECTORS_FILE

    info: dict[str, Any] = {"index": str(directory), "reused": (directory / MANIFEST).is_file()}
    if not info["reused"]:
        chunks = chunk_documents(load_documents([corpus]))
        for stored in (False, True):  # what the stored vectors cost at ingest
            cpu, wall = time.process_time(), time.perf_counter()
            index = HybridIndex.build(chunks, embedder, text_vectors=stored)
            suffix = "" if stored else "_without_store"
            info[f"ingest_cpu_s{suffix}"] = round(time.process_time() - cpu, 2)
            info[f"ingest_wall_s{suffix}"] = round(time.perf_counter() - wall, 2)
        index.save(directory)
    plain = directory.with_name(directory.name + "-plain")
    if not with_plain:  # a run of the stored arm alone (a reference run) must not rewrite the copy another reads
        return info | _sizes(directory, plain)
    plain.mkdir(exist_ok=True)
    for item in directory.iterdir():
        if item.is_dir():  # keywords/ (index format 2)
            shutil.copytree(item, plain / item.name, dirs_exist_ok=True)
        elif item.name not in (VECTORS_FILE, KEYS_FILE):
            shutil.copy2(item, plain / item.name)
    for name in (VECTORS_FILE, KEYS_FILE):
        (plain / name).unlink(missing_ok=True)
    return info | _sizes(directory, plain)


def _sizes(directory: Path, plain: Path) -> dict[str, Any]:
    from selfcrag.knowledge.index_files import MANIFEST
    from selfcrag.knowledge.vector_store import KEYS_FILE, VECTORS_FILE

    manifest = json.loads((directory / MANIFEST).read_text())
    return {"chunks": manifest["chunks"], "stored_texts": int(np.load(directory / KEYS_FILE).shape[0]),
            "stored_mb": round((directory / VECTORS_FILE).stat().st_size / 2**20, 2), "plain": str(plain)}


def summarise(arm: Arm, reference: Arm) -> dict:
    cpu = [r["cpu_s"] for r in arm.rows]
    differ = None if arm.plain else [  # plain RAG is another system: its answers are not meant to match
        r["id"] for r, ref in zip(arm.rows, reference.rows, strict=True)
        if (r["decision"], r["confidence"], r["answer"]) != (ref["decision"], ref["confidence"], ref["answer"])]
    return {
        "batch_size": arm.batch_size,
        "stored_vectors": arm.stored,
        "questions": len(arm.rows),
        "cpu_ms_median": round(1000 * statistics.median(cpu), 1),
        "cpu_ms_p90": round(1000 * statistics.quantiles(cpu, n=10)[-1], 1) if len(cpu) > 1 else None,
        "cpu_ms_mean": round(1000 * statistics.mean(cpu), 1),
        "wall_ms_median": round(1000 * statistics.median(r["wall_s"] for r in arm.rows), 1),
        "embed_calls_per_question": round(statistics.mean(r["embed_calls"] for r in arm.rows), 2),
        "embed_texts_per_question": round(statistics.mean(r["embed_texts"] for r in arm.rows), 2),
        "embed_texts_median": statistics.median(r["embed_texts"] for r in arm.rows),
        "outputs_differing_from_stored": differ,
    }


def start_reference(args: argparse.Namespace, index: str) -> tuple[subprocess.Popen[bytes], Path]:
    """This benchmark's stored arm over the selfcrag in `args.reference`, started now in another process."""
    out = Path(tempfile.mkdtemp(prefix="question-cpu-reference-")) / "result.json"
    command = [sys.executable, __file__, "--datasets", str(args.datasets), "--index", index, "--no-compare",
               "--limit", str(args.limit), "--out", str(out), "--ready", str(out.with_name("ready"))]
    environment = {**os.environ, "PYTHONPATH": str(args.reference.resolve())}
    return subprocess.Popen(command, env=environment, stdout=subprocess.DEVNULL), out


def meet(own: Path | None, other: Path | None, patience: float = 600.0) -> None:
    """Both processes warm, then both measure: say this one is ready (`own`), wait until the other is (`other`)."""
    if own is not None:
        own.touch()
        while not own.with_name("go").exists() and patience > 0:
            time.sleep(0.05)
            patience -= 0.05
    if other is not None:
        while not other.exists() and patience > 0:
            time.sleep(0.05)
            patience -= 0.05
        other.with_name("go").touch()


def finish_reference(process: subprocess.Popen[bytes], out: Path, source: Path) -> tuple[str, list[dict]]:
    if process.wait() != 0:
        raise SystemExit(f"the reference run over {source} failed (exit {process.returncode})")
    result = json.loads(out.read_text())
    return f"reference {source}", [{"id": row["id"], **row["stored"]} for row in result["rows"]]


PLAIN = "plain RAG"


def plain_arm(components: Any, question: str, settings: Any) -> dict:
    """Plain RAG as `selfcrag eval --baseline plain` runs it (the same function): retrieve, generate once."""
    from selfcrag.evaluation.plain import plain_rag

    passages, draft = plain_rag(components, question, settings)
    return {"decision": "answer" if draft.answer else "abstain", "answer": draft.answer,
            "confidence": max((float(p["score"]) for p in passages), default=0.0)}


def main() -> int:
    cli = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    cli.add_argument("--datasets", type=Path, default=DEFAULT_DATASETS)
    cli.add_argument("--limit", type=int, default=0, help="questions (0 = all 200 of the dev sample)")
    cli.add_argument("--index", type=Path, default=None, help="index directory to build or reuse")
    cli.add_argument("--batch-sizes", default="", help="extra no-store arms at these batch sizes, e.g. 4,16")
    cli.add_argument("--no-compare", action="store_true", help="only the stored arm (and plain RAG beside it)")
    cli.add_argument("--ready", type=Path, default=None, help=argparse.SUPPRESS)  # the reference run's signal
    cli.add_argument("--reference", type=Path, default=None,
                     help="a selfcrag source directory (its src/) run at the same time in another process")
    cli.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" / "question_cpu.json")
    args = cli.parse_args()
    require(args.datasets, "squad2/dev_sample_200.jsonl", "squad2/dev_sample_corpus.jsonl")
    origin = provenance()  # the code as the run began

    from selfcrag import Context, build_graph
    from selfcrag.backend import offline_components
    from selfcrag.knowledge import embeddings, minilm
    from selfcrag.knowledge.retrieval import HybridIndex

    folder = args.datasets / "squad2"
    corpus = folder / "dev_sample_corpus.jsonl"
    questions = load_jsonl(folder / "dev_sample_200.jsonl")
    if args.limit:
        questions = questions[: args.limit]
    real = embeddings.default_embedder()
    real.embed_documents(["warm up"])
    info = build_or_reuse(corpus, index_dir(corpus, real.name, args.index), real, with_plain=not args.no_compare)
    # Started once the index exists; both processes warm up, then measure together (`meet`).
    reference = start_reference(args, info["index"]) if args.reference else None

    default_batch = minilm.BATCH_SIZE
    arms = [Arm("stored", default_batch, True, CountingEmbedder(real))]
    if not args.no_compare:
        arms.append(Arm("no store", default_batch, False, CountingEmbedder(real)))
        if default_batch != 32:
            arms.append(Arm("no store, batch 32 (main)", 32, False, CountingEmbedder(real)))
    if args.ready is None:  # not a reference run: plain RAG beside this tree's graph
        arms.append(Arm(PLAIN, default_batch, True, CountingEmbedder(real)))
    for size in (int(s) for s in args.batch_sizes.split(",") if s.strip()):
        arms.append(Arm(f"no store, batch {size}", size, False, CountingEmbedder(real)))
    indexes = {}
    for arm in arms:
        index = HybridIndex.load(info["index"] if arm.stored else info["plain"], arm.embedder)
        indexes[arm.name] = index
        components = offline_components(retriever=index, embedder=arm.embedder)
        if arm.name == PLAIN:
            arm.plain = components
        else:
            arm.graph = build_graph(components)
    # Each arm's run reads only the stored vectors of the index it searches: the no-store arms' copy has none.
    assert indexes["stored"].text_vectors is not None, "the index has no stored vectors"
    context = Context.from_env()

    def ask(arm: Arm, question: str) -> dict:
        minilm.BATCH_SIZE = arm.batch_size
        calls, texts = arm.embedder.calls, arm.embedder.texts
        cpu, wall = time.process_time(), time.perf_counter()
        out = plain_arm(arm.plain, question, context) if arm.plain else arm.graph.invoke({"question": question},
                                                                                        context=context)  # fmt: skip
        return {"cpu_s": time.process_time() - cpu, "wall_s": time.perf_counter() - wall,
                "embed_calls": arm.embedder.calls - calls, "embed_texts": arm.embedder.texts - texts,
                "decision": out["decision"], "confidence": out["confidence"], "answer": out["answer"]}

    try:
        for arm in arms:  # warm: the graph, the index, the code paths; then every question is measured
            ask(arm, "What is the capital of Normandy?")
        meet(args.ready, reference[1].with_name("ready") if reference else None)
        for q in questions:
            for arm in arms:
                arm.rows.append({"id": q["id"], **ask(arm, q["question"])})
    finally:
        minilm.BATCH_SIZE = default_batch

    summary = {arm.name: summarise(arm, arms[0]) for arm in arms}
    if reference is not None:
        name, rows = finish_reference(*reference, args.reference)
        summary[name] = summarise(Arm(name, default_batch, True, arms[0].embedder, rows=rows), arms[0])
    base = summary["stored"]["cpu_ms_median"]
    plain_ms = summary[PLAIN]["cpu_ms_median"] if PLAIN in summary else None
    print(f"index: {info['chunks']} chunks, {info['stored_texts']} stored texts ({info['stored_mb']} MB)"
          + (f", built in {info['ingest_cpu_s']} s CPU ({info['ingest_cpu_s_without_store']} s without the store)"
             if "ingest_cpu_s" in info else ", reused"))
    header = (f"{'arm':<28}{'CPU med ms':>11}{'p90 ms':>9}{'x stored':>9}{'x plain':>9}{'wall med':>9}{'texts/q':>9}"
              f"{'differ':>7}")
    print(header)
    for name, s in summary.items():
        times_plain = f"{s['cpu_ms_median'] / plain_ms:.2f}" if plain_ms else "-"
        differ = s["outputs_differing_from_stored"]
        print(f"{name:<28}{s['cpu_ms_median']:>11}{s['cpu_ms_p90'] or '-':>9}{s['cpu_ms_median'] / base:>9.2f}"
              f"{times_plain:>9}{s['wall_ms_median']:>9}{s['embed_texts_per_question']:>9}"
              f"{'-' if differ is None else len(differ):>7}")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    rows = [{"id": q["id"], **{arm.name: {k: v for k, v in arm.rows[i].items() if k != "id"} for arm in arms}}
            for i, q in enumerate(questions)]
    if plain_ms:  # the warm question against plain RAG, side by side (issue 46 asks for 2x or less)
        summary["stored_over_plain"] = round(base / plain_ms, 2)
    args.out.write_text(json.dumps({**origin, "index": info, "embedder": real.name, "summary": summary, "rows": rows},
                                   indent=2) + "\n")
    print(f"wrote {args.out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
