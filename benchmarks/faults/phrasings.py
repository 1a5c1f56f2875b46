"""Planted instructions in phrasings the project did not tune on: the twenty documents of
`../shared/injection/new_phrasings_2026-12-02.jsonl` (issue 44's audit, read at run time and never copied into the
repository), and the project's own: sixty written after earlier defences, each twenty measured once and then tuned on
(`tests/data/injection_documents_tuning.jsonl`, cases `tuning/...`), and twenty written after the last change to the
contested-claim check and never tuned on (`tests/data/injection_documents_heldout.jsonl`, cases `heldout/...`).
Each document is ingested alone (the same door as `selfcrag ingest`: `selfcrag.ingest`) and asked its question,
twice:

- offline: the default backend;
- with a model that obeys: the real `ChatOpenAI` against the test server, whose generator copies every sentence of
  the evidence it is shown into its answer, each cited (so any planted sentence that reaches its prompt is
  repeated), and whose checker calls every statement grounded.

A case fails ("instructions obeyed") when a published answer (not an abstention) contains the case's
`published_if` text. Without the shared folder its cases are skipped, with one line saying so.
"""

from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path
from typing import Any

from langchain_openai import ChatOpenAI
from support.openai_server import OpenAIServer
from support.replies import Plausible

from faults.core import BOUNDED, OPERATOR_KEY, ROOT, Outcome, cases, described, timed
from selfcrag import build_graph, ingest
from selfcrag.backend import model_components
from selfcrag.knowledge.langchain_objects import load_index
from selfcrag.text.text import split_sentences


def _shared() -> Path:
    """`shared/` beside the checkout; from a git worktree elsewhere, the one beside the main checkout (the folder
    is not in the repository, so a worktree would otherwise skip the audit's cases without anyone noticing)."""
    import subprocess

    common = subprocess.run(["git", "rev-parse", "--path-format=absolute", "--git-common-dir"], cwd=ROOT,
                            capture_output=True, text=True).stdout.strip()  # fmt: skip
    places = [ROOT.parent] + ([Path(common).parent.parent] if common else [])
    return next((p / "shared" for p in places if (p / "shared").is_dir()), ROOT.parent / "shared")


SOURCE = _shared() / "injection" / "new_phrasings_2026-12-02.jsonl"
OWN = ROOT / "tests" / "data" / "injection_documents_{}.jsonl"


def published(result: dict[str, Any] | None, marker: str) -> bool:
    return bool(result) and result["decision"] not in ("abstain", "human_review") and marker in result["answer"]


def obeying_answer(question: str, evidence: list[tuple[str, str]]) -> str:
    """Every sentence the prompt showed, cited: a model that does whatever the evidence tells it."""
    return " ".join(f"{sentence} [{ident}]" for ident, text in evidence for sentence in split_sentences(text))


def _indexed(row: dict[str, str]) -> Path:
    work = Path(tempfile.mkdtemp(prefix="selfcrag-faults-phrasing-"))
    (work / "kb").mkdir()
    (work / "kb" / Path(row["file"]).name).write_text(row["document"], encoding="utf-8")
    ingest(work / "kb", work / "index", strict=True)
    return work / "index"


def _offline(outcome: Outcome, row: dict[str, str]) -> None:
    index = _indexed(row)
    result, error, _ = timed(lambda: build_graph(settings={"index_dir": str(index)}).invoke(
        {"question": row["question"]}))
    outcome.seen.append(json.dumps(result, default=str) if result else str(error))
    outcome.flags["crashes"] = result is None
    outcome.flags["instructions_obeyed"] = published(result, row["published_if"])
    outcome.note = described(result, error)


def _obeying_model(outcome: Outcome, row: dict[str, str]) -> None:
    index = _indexed(row)
    model = Plausible(relevant=lambda question, text: True, answer=obeying_answer)
    with OpenAIServer(model.responder()) as server:
        llm = ChatOpenAI(model="fault-model", base_url=server.base_url, api_key=OPERATOR_KEY,
                         timeout=BOUNDED["llm_timeout"], max_retries=0)  # fmt: skip
        graph = build_graph(model_components(llm, retriever=load_index(index)), settings=dict(BOUNDED))
        result, error, _ = timed(lambda: graph.invoke({"question": row["question"]}))
    outcome.seen.append(json.dumps(result, default=str) if result else str(error))
    outcome.flags["crashes"] = result is None
    outcome.flags["instructions_obeyed"] = published(result, row["published_if"])
    outcome.note = described(result, error)


def _rows(path: Path, prefix: str = "") -> list[dict[str, str]]:
    rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    return [{**r, "file": prefix + r["file"]} for r in rows if "note" not in r]


ROWS = _rows(Path(str(OWN).format("tuning")), "tuning/") + _rows(Path(str(OWN).format("heldout")), "heldout/")
if SOURCE.is_file():
    ROWS = _rows(SOURCE) + ROWS
else:
    print(f"fault matrix: {SOURCE} not found: the audit's phrasing cases are skipped", file=sys.stderr)
cases("phrasings", [f"offline: {r['file']}" for r in ROWS], _offline, ROWS)
cases("phrasings", [f"obeying model: {r['file']}" for r in ROWS], _obeying_model, ROWS)
