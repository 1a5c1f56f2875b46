"""`selfcrag ingest PATH... --index DIR` and `selfcrag ask "QUESTION" [--index DIR] [--thread ID] [--json] [--trace]`;
`chat`, `review`, `monitor` and `report` live in selfcrag/cli_store.py.

Bad input (an empty question, a missing index, an unreadable file) ends with one line on stderr and a
non-zero exit, never a traceback. Imports sit inside the commands for start-up time: `selfcrag --help` and a bad
flag answer without loading the graph, the index or the store.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import signal
import sys
import threading
import time
from pathlib import Path
from typing import Any

from selfcrag.errors import CliError
from selfcrag.terminal import operator_flags, render, settings_given, thread_graph

EXIT_USAGE = 2
EXIT_ERROR = 1


def quiet_libraries() -> None:
    """Libraries log what they recover from: pypdf a damaged PDF's "EOF marker not found", psycopg's pool every
    reconnection attempt to a stopped PostgreSQL (dozens of lines). A command reports each fault once, itself."""
    import logging

    for chatty in ("pypdf", "psycopg"):
        logging.getLogger(chatty).setLevel(logging.CRITICAL)


def _version() -> str:
    from selfcrag import __version__

    return __version__


class _Version(argparse.Action):
    """`--version`, its version read only when asked for: finding the installed distribution scans the path, a
    cost every other command paid (argparse's own action wants the string when the parser is made)."""

    def __init__(self, option_strings: list[str], dest: str = argparse.SUPPRESS, **_: Any) -> None:
        super().__init__(option_strings, dest=dest, default=argparse.SUPPRESS, nargs=0,
                         help="show the version and exit")  # fmt: skip

    def __call__(self, parser: argparse.ArgumentParser, namespace: Any, values: Any, option: str | None = None) -> None:
        print(f"selfcrag {_version()}")
        parser.exit()


def _progress(done: int, total: int) -> None:
    """Embedding progress: a tqdm bar with rate and ETA on a terminal; nothing otherwise (the summary line says it)."""
    from selfcrag.progress_bar import advance

    advance("embedding", "chunks", done, total)


_NAMED = 20  # replaced documents named on the line; past that, counted (IngestReport.replaced_ids holds them all)


def cmd_ingest(args: argparse.Namespace) -> int:
    from selfcrag import Context
    from selfcrag.knowledge.embeddings import embedder_for
    from selfcrag.knowledge.ingestion import ingest

    if args.replace and not args.append:
        raise CliError("--replace goes with --append (without it the index is built from these sources alone)")
    embedder = embedder_for(Context.from_env(embeddings=args.embeddings or None).embeddings)
    metadata = {}
    for pair in args.metadata:  # KEY=VALUE, each document's metadata (a tenant's folder: --metadata tenant=acme)
        key, equals, value = pair.partition("=")
        if not equals or not key.strip():
            raise CliError(f"--metadata {pair!r}: expected KEY=VALUE, e.g. --metadata tenant=acme")
        metadata[key.strip()] = value
    report = ingest(args.paths, args.index, append=args.append, replace=args.replace, strict=args.strict,
                    embeddings=embedder, on_progress=_progress, metadata=metadata)
    for skipped in report.skipped:  # one line each, so `grep`/`wc -l` work on them
        print(f"selfcrag: warning: skipped {skipped}", file=sys.stderr)
    for clash in report.clashes:
        print(f"selfcrag: {clash}", file=sys.stderr)
    if report.replaced_ids:
        shown = ", ".join(repr(doc_id) for doc_id in report.replaced_ids[:_NAMED])
        more = f" and {len(report.replaced_ids) - _NAMED} more" if len(report.replaced_ids) > _NAMED else ""
        print(f"selfcrag: replaced with their new versions: {shown}{more}", file=sys.stderr)
    if report.replaced_index:
        print(f"selfcrag: replaced the index at {args.index} (--append adds to it instead)", file=sys.stderr)
    print(report.summary())
    if report.skipped:
        print(f"selfcrag: warning: {len(report.skipped)} bad records or files skipped (listed above); "
              "--strict makes the first one an error", file=sys.stderr)
    return 0


def cmd_reindex(args: argparse.Namespace) -> int:
    from selfcrag.home import is_postgres
    from selfcrag.knowledge.reindex import reindex

    if is_postgres(args.index):
        raise CliError("reindex rebuilds a directory index's files; a PostgreSQL knowledge base keeps its keywords "
                       "in its tables")
    print(reindex(args.index).summary())
    return 0


def cmd_ask(args: argparse.Namespace) -> int:
    question = (args.question or "").strip()
    if not question:
        raise CliError("the question is empty")
    from contextlib import AbstractContextManager, nullcontext

    from selfcrag import build_graph
    from selfcrag.threads import config, finish, new_thread_id, turn, turn_input

    _, chosen, context = operator_flags(args)
    graph = thread_graph(chosen, needed=bool(args.thread))
    thread = args.thread or new_thread_id()
    if graph is None:
        graph, run_config, inputs = build_graph(settings=chosen), {}, {"question": question}
    else:
        run_config, inputs = config(thread), turn_input(question)
    # A turn of the thread: one at a time on it, after settling a turn a crash cut short (threads.py).
    held: AbstractContextManager[dict[str, Any]] = (
        turn(graph, thread, context, new=not args.thread) if run_config else nullcontext({}))  # fmt: skip
    with held as extra:
        if args.stream:  # progress and tokens live on stderr; the answer on stdout as usual
            from selfcrag.streaming import stream_run

            result, timings = stream_run(graph.with_config(run_config), inputs, context, sys.stderr)
            print(timings.summary(), file=sys.stderr)
        else:
            result = graph.invoke(inputs, run_config, context=context)
        if run_config:
            result = finish(graph, thread, dict(result)) | extra
    result.pop("messages", None)  # the chat copy of the answer; `answer` and `citations` already say it
    if args.json:
        print(json.dumps(result, ensure_ascii=False, indent=2, default=str))
    else:
        print(render(result, show_trace=args.trace))
    return 0


def _questions_index(args: argparse.Namespace) -> tuple[dict[str, Any], Path | str]:
    """`eval` and `calibrate`: the operator's settings from the flags, and the index (a folder, or a postgresql://
    URL named without its password), built from `--corpus` first when it has none; a missing index or other
    embeddings fail here in one line, before any run."""
    from pathlib import Path

    from selfcrag import Context
    from selfcrag.home import describe, is_postgres
    from selfcrag.knowledge.documents import chunk_documents, load_documents
    from selfcrag.knowledge.embeddings import embedder_for
    from selfcrag.knowledge.index_files import complete
    from selfcrag.knowledge.loaded_indexes import open_index
    from selfcrag.knowledge.retrieval import HybridIndex

    operator = {"index_dir": args.index, "generator_model": args.model or None,
                "backend": "model" if args.model else None, "verifier": args.verifier or None,
                "verifier_url": args.verifier_url or None}
    embedder = embedder_for(Context.from_env(**operator).embeddings)
    if is_postgres(args.index):  # a knowledge base in PostgreSQL: built by `ingest`, its one write path
        from selfcrag.knowledge.ingestion import ingest
        from selfcrag.knowledge.pg_schema import has_knowledge_base

        if args.corpus and not has_knowledge_base(args.index):
            report = ingest([args.corpus], args.index, embeddings=embedder, on_progress=_progress)
            print(report.summary(), file=sys.stderr)
        elif args.corpus:
            print(f"{describe(args.index)} already holds a knowledge base: using it, --corpus not indexed again",
                  file=sys.stderr)
        open_index(args.index, embedder)
        return operator, describe(args.index)
    index = Path(args.index)
    if args.corpus and not complete(index):
        documents = load_documents([args.corpus])
        chunks = chunk_documents(documents)
        HybridIndex.build(chunks, embedder, on_progress=_progress).save(index)
        print(f"indexed {len(documents)} documents as {len(chunks)} chunks into {index}", file=sys.stderr)
    elif args.corpus:
        print(f"{index} already holds an index: using it, --corpus not indexed again", file=sys.stderr)
    open_index(index, embedder)
    return operator, index


def cmd_eval(args: argparse.Namespace) -> int:
    """Evaluate selfcrag (and plain RAG) on a question file; write records, metrics and an HTML report."""
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        raise CliError("selfcrag eval needs matplotlib: pip install 'selfcrag[eval]'") from None
    from pathlib import Path

    from selfcrag.evaluation.provenance import sha256
    from selfcrag.evaluation.questions import load_questions
    from selfcrag.evaluation.report import text_table
    from selfcrag.evaluation.run import Systems, evaluate, process_cpu
    from selfcrag.llm.replay import CallFile, recorded_calls

    if args.limit < 0:
        raise CliError(f"--limit must be 0 (all) or more, got {args.limit}")
    questions = load_questions(args.questions, args.limit)  # bad input fails before any index is built
    if args.resume and not args.out:
        raise CliError("--resume continues the evaluation in --out: name that folder")
    out = Path(args.out or time.strftime("eval-%Y%m%d-%H%M%S"))
    if (out / "records.jsonl").exists() and not args.resume:
        raise CliError(f"{out} already holds an evaluation (records.jsonl); --resume continues it, or choose "
                       "another --out")
    server_cpu = process_cpu(args.server_pid) if args.server_pid else None  # a wrong pid fails here, in one line
    replay = recorded_calls(Path(args.replay)) if args.replay else None
    if args.replay_misses and not replay:
        raise CliError("--replay-misses says what a replay does with a call it lacks: give --replay too")
    changed = settings_given(args.set)
    operator, index = _questions_index(args)
    operator |= changed
    out.mkdir(parents=True, exist_ok=True)
    run_context = {name: value for name, value in (("domain", args.domain), ("risk", args.risk)) if value}
    # Every model call goes into the folder's calls.jsonl; a bad --replay file fails here, in one line.
    calls = CallFile(out / "calls.jsonl", replay, live_misses=args.replay_misses == "live", append=args.resume)
    systems = Systems.build({name: value for name, value in operator.items() if value is not None}, run_context,
                            server_cpu, calls)  # fmt: skip
    info = {"questions_file": str(args.questions), "questions_sha256": sha256(Path(args.questions)),
            "index": str(index), **({"settings": changed} if changed else {}),
            **({"selective_plain_floor": args.selective_plain_floor} if args.selective_plain_floor is not None
               else {})}  # fmt: skip
    # A resume refused (ResumeError, a ValueError) ends in one line, the records untouched.
    result = evaluate(questions, systems, out, baseline=args.baseline == "plain", info=info, resume=args.resume)
    print(text_table(result["systems"]))
    print(f"wrote {out}/records.jsonl, metrics.json, report.html"
          + (f", calls.jsonl ({calls.hits} calls replayed, {calls.misses} not in {replay})" if replay else ""))
    return 0


def cmd_calibrate(args: argparse.Namespace) -> int:
    """Fit confidence on the user's own labelled questions: run the graph over them, fit, write the file."""
    import tempfile
    from pathlib import Path

    from selfcrag import Context
    from selfcrag.evaluation.calibrate import calibrate, table, with_mode
    from selfcrag.evaluation.questions import load_questions
    from selfcrag.evaluation.run import Systems
    from selfcrag.quality.calibration import for_settings

    if args.limit < 0:
        raise CliError(f"--limit must be 0 (all) or more, got {args.limit}")
    out = Path(args.out)
    if out.is_dir():
        raise CliError(f"--out {out} is a directory; name the calibration file to write (e.g. {out}/mine.json)")
    if args.records:
        return _refit(args, out)
    if not args.questions or not args.index:
        raise CliError("calibrate needs a question file and --index (or --records FOLDER of earlier eval records)")
    questions = load_questions(args.questions, args.limit)  # bad input fails before anything runs
    operator, index = _questions_index(args)
    if args.ungrounded_drafts:  # runs with a copy of the file they would use, saying which drafts they keep
        current = for_settings(Context.from_env(**{k: v for k, v in operator.items() if v is not None})).source
        folder = Path(tempfile.mkdtemp(prefix="selfcrag-calibrate-"))
        operator["calibration"] = str(with_mode(Path(current), args.ungrounded_drafts, folder))
    systems = Systems.build({name: value for name, value in operator.items() if value is not None}, {})
    files = [Path(args.questions), *([Path(args.corpus)] if args.corpus else [])]
    command = "selfcrag calibrate " + " ".join(
        [Path(args.questions).name, *(["--corpus", Path(args.corpus).name] if args.corpus else []),
         *(["--limit", str(args.limit)] if args.limit else []), *(["--model", args.model] if args.model else []),
         *(["--verifier", args.verifier] if args.verifier else []),
         *(["--ungrounded-drafts", args.ungrounded_drafts] if args.ungrounded_drafts else [])])
    fitted = calibrate(questions, systems, files, out, command)
    print(table(fitted))
    print(f"wrote {out}; use it with SELFCRAG_CALIBRATION={out.resolve()} (or build_graph(settings="
          "{'calibration': ...}))")
    return 0


def _refit(args: argparse.Namespace, out: Path) -> int:
    """`calibrate --records`: fit on earlier eval records and re-decide their questions, with no model and no index."""
    from selfcrag.evaluation.calibrate import fit, provenance, rows_of, table, write
    from selfcrag.evaluation.refit import read_records, redecide, redecided_table
    from selfcrag.quality.calibration import FEATURES
    from selfcrag.quality.thresholds import PRESETS

    paths = [Path(p) for p in args.records]
    records = read_records(paths)
    mode = args.ungrounded_drafts or "withheld"
    rows = rows_of(records, ungrounded=mode == "scored")
    fitted = fit(rows, list(FEATURES))
    files = [p / "records.jsonl" if p.is_dir() else p for p in paths]
    backends = sorted({str(r.get("backend", "")) for r in records if r.get("backend")}) or ["records"]
    command = f"selfcrag calibrate --records {' '.join(p.name for p in paths)} --ungrounded-drafts {mode}"
    write(out, fitted, provenance(files, rows, "+".join(backends), command), mode)
    cost = PRESETS[args.domain or "general"].cost
    print(table(fitted))
    print(redecided_table(redecide(rows, fitted["out_of_fold"], records, cost), cost))
    print(f"wrote {out}; use it with SELFCRAG_CALIBRATION={out.resolve()}")
    return 0


def _verifier_flags(command: argparse.ArgumentParser) -> None:
    command.add_argument("--verifier", default="", help="also ask this chat model (provider:model) whether the "
                         "passage the answer cites answers the question; its score feeds the confidence "
                         "(SELFCRAG_VERIFIER; off by default)")
    command.add_argument("--verifier-url", default="", help="the verifier's OpenAI-compatible server, e.g. "
                         "http://127.0.0.1:8090/v1 from python -m selfcrag.llm.local_server (SELFCRAG_VERIFIER_URL)")


def parser() -> argparse.ArgumentParser:
    top = argparse.ArgumentParser(prog="selfcrag", description="Self-corrective RAG on LangGraph.")
    top.add_argument("--version", action=_Version)
    sub = top.add_subparsers(dest="command", required=True)

    ingest = sub.add_parser("ingest", help="build or extend an index from folders, files or a JSONL corpus")
    ingest.add_argument("paths", nargs="+", help="folders, .md/.txt/.html/.csv/.pdf/.docx files (HTML, PDF and DOCX "
                        "need the loaders extra), or .jsonl with id/title/text")
    ingest.add_argument("--index", required=True, help="directory to write the index to")
    embeddings_help = ("`local` (default, offline MiniLM) or `openai:<model>` at OPENAI_BASE_URL; default: "
                       "SELFCRAG_EMBEDDINGS. An index is read with the embeddings that built it.")
    ingest.add_argument("--embeddings", default="", help=embeddings_help)
    ingest.add_argument("--strict", action="store_true",
                        help="fail on the first bad JSONL record or unreadable file instead of skipping it")
    ingest.add_argument("--append", action="store_true",
                        help="add to the index in --index instead of replacing it: new ids are added, changed "
                        "documents replaced, unchanged ones keep their vectors (nothing is embedded twice)")
    ingest.add_argument("--metadata", action="append", default=[], metavar="KEY=VALUE",
                        help="give every document read this metadata (repeatable), e.g. tenant=acme for one "
                        "tenant's folder: what metadata filters and the tenant setting match")
    ingest.add_argument("--replace", action="store_true",
                        help="with --append: a file whose id the index holds from another source (another "
                        "folder's README.md) replaces that document instead of going in under its folder's name")
    ingest.set_defaults(run=cmd_ingest)

    rebuild = sub.add_parser("reindex", help="rebuild an index's keyword index from its stored chunks (an index "
                             "saved by an older selfcrag, or a damaged keyword index); nothing is embedded")
    rebuild.add_argument("index", help="the index directory")
    rebuild.set_defaults(run=cmd_reindex)

    ask = sub.add_parser("ask", help="answer a question from an index (default: the bundled sample)")
    ask.add_argument("question")
    ask.add_argument("--index", default="", help="index directory from `selfcrag ingest`")
    ask.add_argument("--json", action="store_true", help="print the whole output as one JSON object")
    ask.add_argument("--trace", action="store_true", help="show the path the graph took and why")
    ask.add_argument("--embeddings", default="", help=embeddings_help)
    # `choices` without the "" default: help and errors list the real values, not `''`.
    domains = ["general", "customer_service", "financial", "medical", "legal"]
    risks = ["low", "normal", "critical"]
    ask.add_argument("--domain", default="", choices=domains, metavar="{" + ",".join(domains) + "}",
                     help="quality preset: how good evidence and answer must be before answering (default general)")
    ask.add_argument("--risk", default="", choices=risks, metavar="{" + ",".join(risks) + "}",
                     help="moves every preset minimum by -0.05 / 0 / +0.05 (default normal)")
    ask.add_argument("--model", default="", help="answer with this chat model, as provider:model (e.g. "
                     "openai:gpt-4o-mini); needs OPENAI_API_KEY, or OPENAI_BASE_URL for a compatible server")
    _verifier_flags(ask)
    ask.add_argument("--stream", action="store_true",
                     help="show progress and answer tokens live on stderr, with the time to the first token")
    ask.add_argument("--thread", default="", help="continue this conversation (any process; default: a new thread, "
                     "its id printed after the answer)")
    ask.add_argument("--review", action="store_true", help="hold doubtful answers for a person (selfcrag review) "
                     "instead of answering or abstaining; same as SELFCRAG_HUMAN_REVIEW=1")
    ask.add_argument("--set", action="append", default=[], metavar="NAME=VALUE",
                     help="a setting for this run (repeatable), e.g. --set k=8 --set grading=yes_no; the command "
                     "line is the operator, so operator settings may be set too, within their caps")
    ask.set_defaults(run=cmd_ask)
    from selfcrag.cli_store import add_commands

    add_commands(sub, ask)

    evaluate = sub.add_parser("eval", help="measure selfcrag against plain RAG on a question file (needs the eval "
                              "extra)")
    evaluate.add_argument("questions", help="JSONL with id, question, answers, is_impossible (shared/datasets)")
    evaluate.add_argument("--index", required=True, help="index directory (built from --corpus when it has none)")
    evaluate.add_argument("--corpus", default="", help="JSONL corpus (id, title, text) to index into --index first")
    evaluate.add_argument("--baseline", default="", choices=["plain"],
                          help="also run plain retrieve-then-generate with the same retriever and generator")
    evaluate.add_argument("--out", default="", help="output directory (default eval-<timestamp>)")
    evaluate.add_argument("--domain", default="", choices=domains, metavar="{" + ",".join(domains) + "}",
                          help="quality preset (default general)")
    evaluate.add_argument("--risk", default="", choices=risks, metavar="{" + ",".join(risks) + "}",
                          help="moves every preset minimum by -0.05 / 0 / +0.05 (default normal)")
    evaluate.add_argument("--limit", type=int, default=0, help="only the first N questions")
    evaluate.add_argument("--model", default="", help="the model backend with this chat model, as provider:model")
    _verifier_flags(evaluate)
    evaluate.add_argument("--set", action="append", default=[], metavar="NAME=VALUE",
                          help="a setting for selfcrag's runs (repeatable), e.g. --set grading=yes_no; recorded in "
                          "run.json, so a resume must give the same")
    evaluate.add_argument("--resume", action="store_true", help="continue the interrupted evaluation in --out: "
                          "keep its records, run only what is missing (refused if its settings differ)")
    evaluate.add_argument("--replay", default="", metavar="PATH", help="answer every model call from an earlier "
                          "run's calls.jsonl (or its folder) instead of the model: the same prompts cost nothing. "
                          "Every eval writes its calls to --out/calls.jsonl")
    evaluate.add_argument("--replay-misses", default="", choices=["error", "live"], help="a call the --replay file "
                          "lacks ends the eval with one line (error, the default) or is made live and recorded")
    evaluate.add_argument("--selective-plain-floor", type=float, default=None, metavar="SCORE",
                          help="selective plain's floor on plain's retrieval score (default: the one fitted on "
                          "tuning data for the backend at the run's cost, data/selective_plain.json)")
    evaluate.add_argument("--server-pid", type=int, default=0, help="a model server on this machine (e.g. python "
                          "-m selfcrag.llm.local_server): its CPU time per question goes into each record too")
    evaluate.set_defaults(run=cmd_eval)

    fit = sub.add_parser("calibrate", help="fit confidence (the probability an answer is right) on your labelled "
                         "questions; writes a calibration file")
    fit.add_argument("questions", nargs="?", default="", help="JSONL with id, question, answers, is_impossible (and "
                     "context_title to cross-validate by article)")
    fit.add_argument("--index", default="", help="index directory (built from --corpus when it has none)")
    fit.add_argument("--records", nargs="+", default=[], metavar="PATH", help="fit on these `selfcrag eval` folders' "
                     "records (or records files) instead of running the graph, and re-decide their questions with "
                     "the fit: no model, no index")
    fit.add_argument("--domain", default="", choices=domains, metavar="{" + ",".join(domains) + "}",
                     help="with --records: the preset whose cost the questions are re-decided at (default general)")
    fit.add_argument("--corpus", default="", help="JSONL corpus (id, title, text) to index into --index first")
    fit.add_argument("--out", required=True, help="calibration file to write (JSON)")
    fit.add_argument("--limit", type=int, default=0, help="only the first N questions")
    fit.add_argument("--model", default="", help="the model backend with this chat model, as provider:model")
    fit.add_argument("--ungrounded-drafts", choices=("withheld", "scored"), default="",
                     help="which drafts the runs keep and the fit is for: `scored` also keeps drafts the "
                     "groundedness check did not pass, so groundedness is weighed, not a gate (for a weak checker, "
                     "e.g. a small model's); default: as the calibration file in use says")
    _verifier_flags(fit)
    fit.set_defaults(run=cmd_calibrate)
    return top


def _load_env_file() -> None:
    """`.env` in the current directory, the file `langgraph dev` reads through langgraph.json: one place for keys
    and SELFCRAG_* settings whichever way the agent is started. A variable already set in the shell wins."""
    from pathlib import Path

    if Path(".env").is_file():
        from dotenv import load_dotenv

        load_dotenv(".env", override=False)


STOPPED_BY: dict[int, str] = {signal.SIGINT: "Ctrl-C", signal.SIGTERM: "SIGTERM"}
UNWIND_SECONDS = 1.5  # after a signal, the run's own unwinding gets this long; then the process ends regardless
_signalled: list[int] = []  # the first stopping signal's number
_ending = threading.Lock()  # held by whichever of main() and the watchdog ends the process: one line, once


def _stopped_line(signum: int) -> str:
    return f"selfcrag: stopped by {STOPPED_BY.get(signum, f'signal {signum}')}"


def _stop(signum: int, frame: Any) -> None:
    """Ctrl-C and SIGTERM (a service stopping, `kill`) unwind the run: model calls in flight are abandoned
    (selfcrag/stopping.py), the thread's lease and a review claim are freed and an unfinished turn is closed on the
    way out. Should something not let go (a call into native code), the process ends after UNWIND_SECONDS all the
    same, with the same line; its lease then runs out by itself (SELFCRAG_TURN_LEASE)."""
    if _signalled:  # a second Ctrl-C while the first unwinds: the first is already ending the run
        return
    _signalled.append(signum)
    from selfcrag.stopping import stop

    stop()

    def end() -> None:
        if _ending.acquire(blocking=False):  # else main() is ending the process already
            print(_stopped_line(signum), file=sys.stderr, flush=True)
            os._exit(128 + signum)

    timer = threading.Timer(UNWIND_SECONDS, end)
    timer.daemon = True
    timer.start()
    raise KeyboardInterrupt(_stopped_line(signum))


def main(argv: list[str] | None = None) -> int:
    # First, so a signal at start-up ends the command in one line too, not a traceback. Only the main thread may
    # set a handler (main() called from another thread leaves Python's own).
    before: dict[int, Any] = {}
    if threading.current_thread() is threading.main_thread():
        before = {signum: signal.signal(signum, _stop) for signum in STOPPED_BY}
    try:
        return _main(argv)
    except KeyboardInterrupt:
        signum = _signalled[0] if _signalled else signal.SIGINT
        if _signalled and not _ending.acquire(blocking=False):
            time.sleep(UNWIND_SECONDS)  # the watchdog is ending the process this moment, with the line
        print(_stopped_line(signum), file=sys.stderr, flush=True)
        if _signalled:  # the run has unwound (its lease is free): end as the signal would, without the seconds
            sys.stdout.flush()  # an interpreter's shutdown takes to join abandoned workers and free the models
            os._exit(128 + signum)
        return 128 + signum
    finally:  # main() called in process (tests, a script) gives the caller its handlers back
        for signum, handler in before.items():
            signal.signal(signum, handler)


def _main(argv: list[str] | None) -> int:
    from selfcrag.text.sanitize import decode_argv

    # Bytes that are not UTF-8 reach sys.argv as surrogate escapes, which no encoder accepts later: read them
    # back as UTF-8 here, the undecodable ones as U+FFFD (the question's cleaning removes those).
    args = parser().parse_args([decode_argv(arg) for arg in (sys.argv[1:] if argv is None else argv)])
    _load_env_file()
    from selfcrag.errors import EmbeddingModelError, IngestError
    from selfcrag.store.db import database_errors, failure_line

    quiet_libraries()
    try:
        return int(args.run(args))
    except KeyboardInterrupt:  # Ctrl-C, SIGTERM: to main() at once (database_errors() below imports psycopg)
        raise
    except BrokenPipeError:  # `selfcrag ask ... | head -1`: the reader left, nothing to report
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except CliError as exc:
        print(f"selfcrag: error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except (IngestError, EmbeddingModelError, ValueError, OSError) as exc:
        print(f"selfcrag: error: {exc}", file=sys.stderr)
        return EXIT_ERROR
    except database_errors() as exc:  # a disk that filled or a PostgreSQL server that stopped mid-run
        print(f"selfcrag: error: {failure_line(exc)}", file=sys.stderr)
        return EXIT_ERROR


def run() -> None:
    """The `selfcrag` command (pyproject's entry point, and `python -m selfcrag.cli`): `main()`, then the exit
    without the interpreter's last garbage collection. That collection walks every object LangChain, LangGraph,
    pydantic and the models left (~0.3-0.4 CPU-s of a cold `selfcrag ask` here, as much as the graph's whole run)
    to free memory the process returns anyway. `gc.freeze()` moves the objects alive now out of its reach; all the
    rest of an exit is as before: worker threads are joined, atexit handlers run, modules are torn down, and an
    object freed by its last reference closes its file or connection then. Only objects in reference cycles keep
    their memory, and Python never promised to finalize those at exit. Not in `main()`: a process that calls it
    (tests, a script) goes on running and should collect as usual."""
    code = main()
    gc.freeze()
    sys.exit(code)


if __name__ == "__main__":
    run()
