"""A run reads the stored vectors of the index it searches, and no other loaded index's.

Late chunking stores a sentence's vector as read in its chunk: two indexes that hold one sentence in different
chunks store two vectors for it. Two graphs in one process (a server's, an evaluation's over several corpora), each
over its own index, must answer exactly as each does alone, with the real ingest and the local model."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np

import selfcrag
from selfcrag import Context, build_graph, ingest
from selfcrag.knowledge.embeddings import default_embedder
from selfcrag.knowledge.retrieval import HybridIndex
from selfcrag.knowledge.vector_store import key

FERRY = "The ferry to Ostholm leaves every 40 minutes."  # in both indexes, among other sentences
HARBOUR = ("# Harbour\n\nQuellport harbour is busy all summer and fishing boats come back at dawn. " + FERRY +
           " The harbour master, Ines Varga, keeps the tide tables.")
TIMETABLE = ("# Timetable\n\nBuses to the airport run hourly on Sundays and tickets are sold at the kiosk. " + FERRY +
             " Night trains stop at Quellport on weekdays only.")
QUESTION = "How often does the ferry to Ostholm leave?"

# Prints what a graph over one index answers in a process that has loaded no other.
ALONE = """
import json, sys
from selfcrag import Context, build_graph
out = build_graph(settings=Context(index_dir=sys.argv[1])).invoke({"question": sys.argv[2]})
print(json.dumps({k: out[k] for k in ("decision", "answer", "confidence", "scores")}))
"""


def outcome(out: dict[str, Any]) -> dict[str, Any]:
    return json.loads(json.dumps({k: out[k] for k in ("decision", "answer", "confidence", "scores")}))


def alone(index_dir: Path) -> dict[str, Any]:
    src = str(Path(selfcrag.__file__).resolve().parents[1])  # the selfcrag this test imports
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([src, os.environ.get("PYTHONPATH", "")])}
    done = subprocess.run([sys.executable, "-c", ALONE, str(index_dir), QUESTION], env=env, capture_output=True,
                          text=True, check=True, timeout=600)
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_two_indexes_holding_one_sentence_each_answer_with_their_own_vectors(tmp_path: Path) -> None:
    dirs = {}
    for name, text in (("harbour", HARBOUR), ("timetable", TIMETABLE)):
        docs = tmp_path / f"{name}-docs"
        docs.mkdir()
        (docs / f"{name}.md").write_text(text, encoding="utf-8")
        dirs[name] = tmp_path / f"{name}-index"
        ingest(docs, dirs[name])

    # The premise: the shared sentence has a different stored vector in each index.
    stored = [HybridIndex.load(d, default_embedder()).text_vectors for d in dirs.values()]
    vectors = [s.get(key(FERRY)) if s is not None else None for s in stored]
    assert vectors[0] is not None and vectors[1] is not None
    assert float(np.dot(vectors[0], vectors[1])) < 0.999

    # Both graphs in this process, both indexes loaded; each run must decide as in a process with its index alone.
    graphs = {name: build_graph(settings=Context(index_dir=str(d))) for name, d in dirs.items()}
    together = {name: outcome(graph.invoke({"question": QUESTION})) for name, graph in graphs.items()}
    assert all("40 minutes" in out["answer"] for out in together.values())
    for name, d in dirs.items():
        assert together[name] == alone(d), name
    assert together["harbour"]["confidence"] != together["timetable"]["confidence"] or \
        together["harbour"]["scores"] != together["timetable"]["scores"]  # their vectors really differ
