"""The model backend on the real local 0.5B model beside plain RAG with the same model: calls, tokens, CPU (the
client's and the model server's) and parse failures per role, per question.

    .venv/bin/python benchmarks/real_model_sample.py [--questions tests/data/sample_questions.jsonl] [--limit 10]
                                                     [--out benchmarks/results/real_model_sample.jsonl]

Needs the realmodel extra. Starts the local server (llm/local_server.py, 2 threads). Records are
appended as each is measured, one per question and system; a rerun skips the (question, system) pairs already in
`--out`, so an interrupted run resumes. Plain = the same retriever's passages into the same generator, one call
(as `selfcrag eval --baseline plain`). Right = the answer contains a gold answer (the sample file's `answer`).
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

import httpx
from langchain_core.callbacks import BaseCallbackHandler
from provenance import provenance

from selfcrag import build_graph
from selfcrag.backend import model_components
from selfcrag.context import Context
from selfcrag.evaluation.questions import contains_gold
from selfcrag.knowledge.embeddings import EmbeddingCaches, embedding_caches

ROOT = Path(__file__).parents[1]
MODEL = "qwen2.5-coder-0.5b"
# The role of a model call, from its system prompt's opening words (prompts/grading.py, prompts/generation.py).
ROLES = {"You are the retrieval evaluator": "relevance", "You answer questions": "generator",
         "You check an answer": "groundedness", "You grade whether": "answer_grade", "You write search": "rewrite",
         "You turn a question": "rewrite", "You select evidence": "refine"}  # fmt: skip
NODE_ROLES = {"grade_documents": "relevance", "check_hallucination": "groundedness", "grade_answer": "answer_grade",
              "rewrite_query": "rewrite", "refine": "refine", "contextualize": "contextualize"}  # fmt: skip
PARSE_FAILURE = ("malformed reply", "no structured-output method worked", "no verdict")


class Roles(BaseCallbackHandler):
    """Counts model calls per role."""

    def __init__(self) -> None:
        self.calls: Counter[str] = Counter()

    def on_chat_model_start(self, serialized: Any, messages: Any, **kwargs: Any) -> None:
        system = str(messages[0][0].content) if messages and messages[0] else ""
        self.calls[next((r for p, r in ROLES.items() if system.startswith(p)), "other")] += 1


def server_cpu(pid: int) -> float:
    """CPU seconds the model server has used (user + system), from /proc."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def start_server() -> tuple[subprocess.Popen[bytes], str]:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    process = subprocess.Popen([sys.executable, "-m", "selfcrag.llm.local_server", "--port", str(port)],
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    for _ in range(360):
        try:
            if httpx.get(f"http://127.0.0.1:{port}/health", timeout=2).status_code == 200:
                return process, f"http://127.0.0.1:{port}/v1"
        except httpx.TransportError:
            time.sleep(0.5)
    raise SystemExit("the local model server did not start")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--questions", default=str(ROOT / "tests/data/sample_questions.jsonl"))
    parser.add_argument("--limit", type=int, default=10)
    parser.add_argument("--out", default=str(ROOT / "benchmarks/results/real_model_sample.jsonl"))
    args = parser.parse_args()
    lines = Path(args.questions).read_text(encoding="utf-8").splitlines()
    questions = [json.loads(line) for line in lines if line.strip()]
    # Answerable and unanswerable alike: alternate so a short run sees both.
    answerable = [q for q in questions if q.get("answerable", True)]
    unanswerable = [q for q in questions if not q.get("answerable", True)]
    mixed = [q for pair in zip(answerable, unanswerable, strict=False) for q in pair]
    questions = (mixed + answerable[len(mixed) // 2 :])[: args.limit]
    out = Path(args.out)
    records = [json.loads(line) for line in out.read_text().splitlines()] if out.exists() else []
    done = {(r["question"], r["system"]) for r in records}
    process, url = start_server()
    origin = provenance()  # the code as the run began
    caches = {system: EmbeddingCaches() for system in ("selfcrag", "plain")}
    try:
        settings = {"backend": "model", "generator_model": f"openai:{MODEL}", "base_url": url, "llm_timeout": 900,
                    "run_timeout": 3600}  # fmt: skip
        components = model_components()
        graph = build_graph(components, settings=settings)
        context = Context(**settings)
        retriever = components.retriever_for(context)
        retriever.retrieve(questions[0]["question"], context)  # load the index before the clock starts
        for q in questions:
            for system in ("selfcrag", "plain"):
                if (q["question"], system) in done:
                    continue
                roles = Roles()
                cpu, served, wall = time.process_time(), server_cpu(process.pid), time.perf_counter()
                with embedding_caches(caches[system]):  # each system embeds its own question (eval/run.py)
                    if system == "selfcrag":
                        result = graph.invoke({"question": q["question"]}, config={"callbacks": [roles]},
                                              context={"human_review": False})  # fmt: skip
                        answered = result["decision"] in ("answer", "answer_with_caveat")
                        answer, calls, tokens = result["answer"], result["llm_calls"], result["tokens"]
                        failures = Counter(NODE_ROLES.get(s["node"], s["node"]) for s in result["trace"]
                                           if any(p in (s.get("error") or "") for p in PARSE_FAILURE))  # fmt: skip
                    else:
                        passages = retriever.retrieve(q["question"], context)
                        keys = ("id", "doc_id", "title", "source", "text", "score")
                        strips = [{k: p[k] for k in keys} for p in passages]
                        draft = components.generator.generate(q["question"], strips, context)  # type: ignore[arg-type]
                        answered, answer = bool(draft.answer), draft.answer
                        calls, tokens = draft.llm_calls, draft.tokens
                        roles.calls["generator"] += draft.llm_calls
                        failures = Counter()
                gold = [q["answer"]] if q.get("answerable", True) and q.get("answer") else []
                record = {"question": q["question"], "system": system, "answerable": bool(gold),
                          "answered": answered, "right": answered and bool(gold) and contains_gold(answer, gold),
                          "answer": answer, "llm_calls": calls, "tokens": tokens, "calls_by_role": dict(roles.calls),
                          "parse_failures_by_role": dict(failures),
                          "client_cpu_s": round(time.process_time() - cpu, 2),
                          "server_cpu_s": round(server_cpu(process.pid) - served, 2),
                          "wall_s": round(time.perf_counter() - wall, 1),
                          **origin}  # fmt: skip
                out.parent.mkdir(parents=True, exist_ok=True)
                with out.open("a", encoding="utf-8") as f:
                    f.write(json.dumps(record) + "\n")
                print(json.dumps({k: record[k] for k in ("system", "answered", "right", "llm_calls", "tokens",
                                                         "server_cpu_s")}), q["question"][:60], flush=True)
    finally:
        os.killpg(process.pid, signal.SIGTERM)
        process.wait(timeout=30)


if __name__ == "__main__":
    main()
