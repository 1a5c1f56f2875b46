"""Run selfcrag (and plain retrieve-then-generate) over a question set; write records, metrics and the report.

Plain RAG is the baseline every curve is drawn against: the same retriever's top-k handed to the same generator
(extractive offline, the chat model with the generation prompt on the model backend), no grading, no checks, no
loops. Its confidence is its best retrieval score; it abstains only when the generator writes nothing. Both systems
take their components from one bundle, so they differ only in what the graph adds.

Each question runs selfcrag then plain, so both see the same machine load; each keeps its own embedding cache, so
plain embeds the question itself rather than finding the graph's vector of it. A record is written (and flushed) as
soon as it exists: an interrupted run keeps what it measured, and metrics and the report cover those questions.
`resume=True` continues such a run in the same folder: each (question, system) pair that has a record is not run
again, new records are appended, and metrics and the report cover them all. run.json, written when a run starts,
holds what a resumed run must share with it (question file, backend and models, domain, risk, baseline); every
record names the commit that measured it, so a run that spans commits shows it.
"""

from __future__ import annotations

import datetime
import json
import os
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from selfcrag.backend import Components, auto_components
from selfcrag.context import Context
from selfcrag.endpoints import model_configured
from selfcrag.errors import EvalError, ResumeError
from selfcrag.evaluation.metrics import ANSWERED, metrics
from selfcrag.evaluation.paired import fitted_floor
from selfcrag.evaluation.plain import plain_rag
from selfcrag.evaluation.provenance import git_commit, sha256
from selfcrag.evaluation.questions import contains_gold
from selfcrag.evaluation.report import write_report
from selfcrag.evaluation.signals import graph_signals, node_faults, retrieval_signals, trimmed_trace
from selfcrag.graph import build_graph
from selfcrag.knowledge.embeddings import EmbeddingCaches, embedding_caches
from selfcrag.llm.replay import CallFile, installed
from selfcrag.quality.calibration import for_settings
from selfcrag.quality.thresholds import cost_for
from selfcrag.trust_boundary import resolve

SYSTEMS = ("selfcrag", "plain")
# Output keys a record already holds at its top level; `detail` keeps the rest of the output.
TOP_LEVEL = frozenset({"answer", "decision", "confidence", "scores", "llm_calls", "tokens"})


@dataclass
class Systems:
    """The graph and the plain pipeline over one set of components and one index."""

    graph: Any
    components: Components
    settings: Context  # the operator's settings with the run's (domain, risk) applied
    run_context: dict[str, Any]
    # Each system's own embedding cache, kept across its questions: each pays for its own embeddings (plain reused
    # the graph's vector of the question when they shared one) and keeps what it computed, as one deployed would.
    caches: dict[str, EmbeddingCaches] = field(default_factory=lambda: {name: EmbeddingCaches() for name in SYSTEMS})
    # CPU seconds so far of a model server on this machine (`process_cpu`): a local model's cost is mostly there.
    server_cpu: Callable[[], float] | None = None
    # Where every model call is recorded, and answered from when it replays an earlier run (llm/replay.py).
    calls: CallFile | None = None

    @classmethod
    def build(cls, operator: dict[str, Any], run_context: dict[str, Any],
              server_cpu: Callable[[], float] | None = None, calls: CallFile | None = None) -> Systems:  # fmt: skip
        components = auto_components()
        # Evaluation measures what is shown without a person: a pending human review would show nothing.
        run_context = {**run_context, "human_review": False}
        graph = build_graph(components, settings=operator)
        return cls(graph, components, resolve(run_context, Context.from_env(**operator)), run_context,
                   server_cpu=server_cpu, calls=calls)

    @property
    def backend(self) -> str:
        if self.settings.backend != "auto":
            return self.settings.backend
        return "model" if model_configured() else "offline"

    def warm_up(self, question: str) -> None:
        """Load the embedder and the index before the clock starts, so the first question is not charged with it."""
        self.components.retriever_for(self.settings).retrieve(question, self.settings)

    def selfcrag(self, question: str) -> dict[str, Any]:
        with embedding_caches(self.caches["selfcrag"]):
            out = self.graph.invoke({"question": question}, context=self.run_context)
        out.pop("messages", None)  # the chat copy of the answer
        trace = out.pop("trace", []) or []
        decision = out.get("decision", "abstain")
        closing: dict[str, Any] = next((s for s in reversed(trace) if s.get("node") == "finalize"), {})
        # Correctness is judged on the answer itself: a caveat names weak scores and missing terms, and for a
        # comparison question those terms may be the very names the gold answer holds.
        body = (closing.get("draft") or out.get("answer", "")) if decision in ANSWERED else ""
        # The draft the graph would show whatever it decided: calibration's label is whether it is right.
        return {"answer": out.get("answer", ""), "judged": body, "draft": closing.get("draft", ""),
                "decision": decision,
                "confidence": float(out.get("confidence", 0.0)), "answered": decision in ANSWERED,
                "llm_calls": int(out.get("llm_calls", 0)), "tokens": int(out.get("tokens", 0)),
                "scores": out.get("scores", {}), "signals": graph_signals({**out, "trace": trace}),
                # every candidate the run scored, with its answer and features: `calibrate --records` refits from them
                "detail": {**{k: v for k, v in out.items() if k not in TOP_LEVEL},
                           "candidates": closing.get("candidates") or []},
                "retrieved": [str(p["id"]) for p in first_round(trace)],
                "trace": trimmed_trace(trace)}  # fmt: skip

    def plain(self, question: str) -> dict[str, Any]:
        with embedding_caches(self.caches["plain"]):
            passages, draft = plain_rag(self.components, question, self.settings)
        scores = [float(p["score"]) for p in passages]
        return {"answer": draft.answer, "judged": draft.answer, "decision": "answer" if draft.answer else "abstain",
                "confidence": max(scores, default=0.0), "answered": bool(draft.answer),
                "llm_calls": draft.llm_calls, "tokens": draft.tokens, "retrieved": [str(p["id"]) for p in passages],
                "signals": {**retrieval_signals(scores), "citations": len(draft.citations),
                            "model_faults": int(bool(draft.error)),
                            "node_faults": node_faults([{"node": "generate", "error": draft.error}])},
                "detail": {"missing": draft.missing, "citations": draft.citations, "error": draft.error,
                           "passages": [{"id": p["id"], "score": round(p["score"], 4)} for p in passages]}}  # fmt: skip


def first_round(trace: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return next((list(s.get("passages") or []) for s in trace if s.get("node") == "retrieve"), [])


def gold_hit(retrieved: list[str], gold: list[str]) -> bool | None:
    """Whether a retrieved chunk belongs to a gold document (a chunk id is its document id, '#', its number);
    None when the question names no gold document."""
    if not gold:
        return None
    return any(chunk.rsplit("#", 1)[0] in gold for chunk in retrieved)


def process_cpu(pid: int) -> Callable[[], float]:
    """A probe of process `pid`'s CPU seconds so far (user + system, all its threads), read from /proc (Linux).
    Raises EvalError at once when there is no such process to read."""
    stat, tick = Path(f"/proc/{pid}/stat"), os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100

    def seconds() -> float:
        fields = stat.read_text().rsplit(")", 1)[1].split()  # after the command name, which may hold spaces
        return (int(fields[11]) + int(fields[12])) / tick  # utime, stime (fields 14 and 15 of proc(5))

    try:
        seconds()
    except (OSError, IndexError, ValueError):
        raise EvalError(f"--server-pid {pid}: no process whose CPU time can be read (/proc/{pid}/stat)") from None
    return seconds


def measure(system: str, run: Callable[[str], dict[str, Any]], question: dict[str, Any],
            server_cpu: Callable[[], float] | None = None,
            calls: CallFile | None = None) -> dict[str, Any]:  # fmt: skip
    """One record: the system's answer judged against the gold answers, with wall and CPU time (and a local model
    server's CPU time, with `server_cpu`; with `calls`, how many of its model calls were replayed). A fault the
    components did not absorb is recorded as an error (nothing shown) and the evaluation goes on."""
    server_before = server_cpu() if server_cpu else 0.0
    replayed_before = calls.hits if calls else 0
    wall, cpu = time.perf_counter(), time.process_time()
    try:
        result = run(question["question"])
        error = ""
    except Exception as exc:  # noqa: BLE001 - one question's fault must not end a long evaluation
        result = {"answer": "", "judged": "", "decision": "error", "confidence": 0.0, "answered": False,
                  "llm_calls": 0, "tokens": 0, "signals": {}, "detail": {}, "retrieved": []}  # fmt: skip
        error = f"{type(exc).__name__}: {exc}".splitlines()[0][:300]
    latency_ms = 1000 * (time.perf_counter() - wall)
    cpu_ms = 1000 * (time.process_time() - cpu)
    judged = result.pop("judged")
    hit = gold_hit(result.pop("retrieved", []), question.get("gold") or [])
    correct = bool(result["answered"] and not question["is_impossible"] and contains_gold(judged, question["answers"]))
    record = {"id": question["id"], "system": system, "question": question["question"], "group": question["group"],
              "answers": question["answers"], "is_impossible": question["is_impossible"], **result,
              "correct": correct, "latency_ms": round(latency_ms, 2), "cpu_ms": round(cpu_ms, 2)}  # fmt: skip
    if server_cpu:
        record["server_cpu_ms"] = round(1000 * (server_cpu() - server_before), 2)
    if calls and calls.replay is not None:
        # Counted in llm_calls too (the run's budget counted them, so the graph took the recorded path), but they
        # took no model time: latency and CPU of a replayed record are the agent's own work.
        record["replayed_calls"] = calls.hits - replayed_before
    if hit is not None:
        record["gold_hit"] = hit
    if error:
        record["error"] = error
    return record


def run_settings(systems: Systems, baseline: bool, info: dict[str, Any]) -> dict[str, Any]:
    """What a resumed run must share with the run it continues, or its records would mix two measurements: the
    question file's hash (`info["questions_sha256"]`, which `selfcrag eval` sets), the backend and its models, the
    domain and risk, the local verifier, the calibration file's hash (it decides what is shown, and which drafts
    may be), the baseline, and the settings `--set` changed (`info["settings"]`, only when there are any, so a
    run without them matches what earlier versions wrote). The index path, the machine and the commit may differ.
    The offline backend names no models: the model settings it ignores must not refuse a resume."""
    settings, model = systems.settings, systems.backend == "model"
    return {"questions_sha256": info.get("questions_sha256"), "backend": systems.backend,
            "generator_model": settings.generator_model if model else "",
            "grader_model": settings.grader_model if model else "", "verifier": settings.verifier,
            "domain": settings.domain, "risk": settings.risk, "baseline": "plain" if baseline else "",
            "calibration_sha256": sha256(Path(for_settings(settings).source)),
            **({"settings": info["settings"]} if info.get("settings") else {})}  # fmt: skip


def earlier_records(out_dir: Path, settings: dict[str, Any]) -> list[dict[str, Any]]:
    """The records an earlier run left in `out_dir` ([] when it left none), after checking that its run.json says
    `settings`. A torn last line (the process was killed mid-write) is cut off the file, with one line on stderr;
    settings that differ or a damaged line raise ResumeError before the file is touched."""
    path = out_dir / "records.jsonl"
    if not path.exists():
        return []
    try:
        written = json.loads((out_dir / "run.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        raise ResumeError(f"cannot resume {out_dir}: it has no readable run.json to say what its records measured") \
            from None
    # `settings` (what --set changed) may be on either side alone: a run without any does not write the key.
    if differ := [key for key in dict.fromkeys([*settings, "settings"]) if written.get(key) != settings.get(key)]:
        changes = ", ".join(f"{key} {written.get(key)!r} there, {settings.get(key)!r} now" for key in differ)
        raise ResumeError(f"cannot resume {out_dir}: {changes}; rerun with its settings or choose another --out")
    data = path.read_bytes()
    complete = data[: data.rfind(b"\n") + 1]  # every line a finished write ended; the rest is a torn line
    records = []
    for number, line in enumerate(complete.splitlines(), 1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except ValueError:
            record = None
        if not isinstance(record, dict) or not {"id", "system"} <= record.keys():
            raise ResumeError(f"cannot resume {out_dir}: records.jsonl line {number} is not a record")
        records.append(record)
    if len(complete) < len(data):
        print(f"eval: dropped the torn last line of {path} ({len(data) - len(complete)} bytes); its question runs "
              "again", file=sys.stderr)
        with path.open("r+b") as sink:
            sink.truncate(len(complete))
    return records


def selective_plain(systems: Systems, info: dict[str, Any]) -> dict[str, Any] | None:
    """Selective plain's floor: `info["selective_plain_floor"]` when the user gave one (--selective-plain-floor), else
    the one fitted on tuning data for this backend at the run's cost (data/selective_plain.json); None when neither."""
    cost = cost_for(systems.settings)
    if info.get("selective_plain_floor") is not None:
        return {"floor": float(info["selective_plain_floor"]), "cost": cost, "from": "--selective-plain-floor"}
    fitted = fitted_floor(systems.backend, cost)
    if fitted is None:
        return None
    return {"floor": fitted[0], "cost": cost, "fitted_at_cost": fitted[1], "from": "data/selective_plain.json"}


def evaluate(
    questions: list[dict[str, Any]],
    systems: Systems,
    out_dir: Path,
    *,
    baseline: bool,
    info: dict[str, Any],
    progress: bool = True,
    resume: bool = False,
) -> dict[str, Any]:
    """Run every question through selfcrag (and plain), writing records.jsonl as it goes, then metrics.json and
    report.html. With `resume`, the records already in `out_dir` are kept and only the missing (question, system)
    pairs run. Returns the metrics."""
    from tqdm import tqdm

    runs: list[tuple[str, Callable[[str], dict[str, Any]]]] = [("selfcrag", systems.selfcrag)]
    if baseline:
        runs.append(("plain", systems.plain))
    settings = run_settings(systems, baseline, info)
    earlier = earlier_records(out_dir, settings) if resume else []
    if not earlier:  # a new run: what it measures, before its first record
        started_at = datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds")
        (out_dir / "run.json").write_text(json.dumps({**settings, "started": started_at}, indent=2) + "\n",
                                          encoding="utf-8")
    done = {(r["id"], r["system"]) for r in earlier}
    todo = [q for q in questions if any((q["id"], name) not in done for name, _ in runs)]
    commit = git_commit()
    records: list[dict[str, Any]] = []
    started = time.time()
    if todo:
        systems.warm_up(todo[0]["question"])
    interrupted = False
    # A bar on a terminal only: in a log or CI its carriage returns would fill the file.
    bar = tqdm(todo, desc="eval", unit="q", file=sys.stderr, disable=not (progress and sys.stderr.isatty()),
               dynamic_ncols=True)
    calls = systems.calls
    with (out_dir / "records.jsonl").open("a" if resume else "w", encoding="utf-8") as sink, installed(calls):
        try:
            for question in bar:
                for name, run in runs:
                    if (question["id"], name) in done:  # measured before the interruption
                        continue
                    record = {**measure(name, run, question, systems.server_cpu, calls), "commit": commit}
                    if calls and calls.misses and not calls.live_misses:
                        raise EvalError(f"--replay {calls.replay}: question {question['id']} ({name}) made a model "
                                        f"call the file does not hold ({calls.first_miss}); its record is not "
                                        "written. Record the run again, or add --replay-misses live")
                    records.append(record)
                    sink.write(json.dumps(record, ensure_ascii=False, default=str) + "\n")
                    sink.flush()
                right = {n: sum(1 for r in records if r["system"] == n and r["correct"]) for n, _ in runs}
                bar.set_postfix({f"{n} right": v for n, v in right.items()}, refresh=False)
        except KeyboardInterrupt:
            interrupted = True
        finally:
            bar.close()
    if progress and bar.disable:  # off a terminal: one closing line instead of the bar
        seconds, measured = time.time() - started, len({r["id"] for r in records})  # a disabled bar counts nothing
        print(f"eval: {measured} questions in {seconds:.1f} s, {measured / max(seconds, 1e-9):.2f} q/s",
              file=sys.stderr)
    records = earlier + records
    selective = selective_plain(systems, info) if baseline else None
    result = metrics(records, selective["floor"] if selective else None)
    result["run"] = {**info, **settings, "questions": len({r["id"] for r in records}),
                     **({"selective_plain": selective} if selective else {}),
                     "records_resumed": len(earlier), "commits": sorted({str(r.get("commit", "")) for r in records}),
                     "seconds": round(time.time() - started, 1), "interrupted": interrupted}  # fmt: skip
    (out_dir / "metrics.json").write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    write_report(out_dir / "report.html", result, records)
    if interrupted:
        raise KeyboardInterrupt
    return result
