"""The evaluation's two systems pay for their own embeddings: plain RAG embeds each question itself instead of
finding the vector the graph's run left in the shared embedding cache (which made plain's CPU read 3-7x low)."""

from __future__ import annotations

import json
from importlib import resources
from pathlib import Path

from selfcrag import build_graph
from selfcrag.backend import offline_components
from selfcrag.context import Context
from selfcrag.evaluation.run import Systems, evaluate
from selfcrag.knowledge.documents import chunk_documents, load_documents
from selfcrag.knowledge.embeddings import default_embedder
from selfcrag.knowledge.retrieval import HybridIndex
from selfcrag.trust_boundary import resolve

QUESTIONS = Path(__file__).resolve().parents[1] / "data" / "sample_questions.jsonl"


class Recording:
    """The local model, recording which system asked it to embed which text."""

    def __init__(self) -> None:
        self.inner = default_embedder()
        self.name, self.languages = self.inner.name, self.inner.languages
        self.system = "build"
        self.embedded: list[tuple[str, str]] = []

    def embed_documents(self, texts: list[str]):  # noqa: ANN201
        self.embedded += [(self.system, text) for text in texts]
        return self.inner.embed_documents(texts)

    def embed_query(self, text: str):  # noqa: ANN201
        self.embedded.append((self.system, text))
        return self.inner.embed_query(text)


class Named(Systems):
    """The evaluation's systems, telling the embedder whose turn it is."""

    recording: Recording

    def selfcrag(self, question: str) -> dict:
        self.recording.system = "selfcrag"
        return super().selfcrag(question)

    def plain(self, question: str) -> dict:
        self.recording.system = "plain"
        return super().plain(question)


def test_plain_embeds_each_question_itself(tmp_path):
    recording = Recording()
    with resources.as_file(resources.files("selfcrag") / "data" / "sample_kb") as folder:
        index = HybridIndex.build(chunk_documents(load_documents([folder])), recording)
    components = offline_components(retriever=index, embedder=recording)
    run_context = {"human_review": False}
    systems = Named(build_graph(components), components, resolve(run_context, Context.from_env()), run_context)
    systems.recording = recording
    rows = [json.loads(line) for line in QUESTIONS.read_text(encoding="utf-8").splitlines() if line.strip()][:3]
    questions = [{"id": f"q{i}", "question": row["question"], "group": "sample",
                  "answers": [row["answer"]] if row["answerable"] else [], "is_impossible": not row["answerable"]}
                 for i, row in enumerate(rows)]  # fmt: skip
    evaluate(questions, systems, tmp_path, baseline=True, info={}, progress=False)
    for question in questions:
        for system in ("selfcrag", "plain"):
            assert (system, question["question"]) in recording.embedded, (system, question["question"])
