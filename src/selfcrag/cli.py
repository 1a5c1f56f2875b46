"""`selfcrag ingest PATH... --index DIR` and `selfcrag ask "QUESTION" [--index DIR] [--json] [--trace]`.

Bad input (an empty question, a missing index, an unreadable file) ends with one line on stderr and a
non-zero exit, never a traceback.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from typing import Any

EXIT_USAGE = 2
EXIT_ERROR = 1


class CliError(Exception):
    """A user-facing error: printed as one line."""


def _progress(done: int, total: int) -> None:
    width = 30
    filled = width * done // max(total, 1)
    sys.stderr.write(f"\rembedding [{'#' * filled}{'.' * (width - filled)}] {done}/{total} texts")
    if done >= total:
        sys.stderr.write("\n")
    sys.stderr.flush()


def cmd_ingest(args: argparse.Namespace) -> int:
    from selfcrag import Context
    from selfcrag.components.embeddings import embedder_for
    from selfcrag.components.retrieval import HybridIndex, chunk_documents, load_documents

    started = time.perf_counter()
    embedder = embedder_for(Context.from_env(embeddings=args.embeddings or None).embeddings)
    documents = load_documents(args.paths)
    chunks = chunk_documents(documents)
    index = HybridIndex.build(chunks, embedder, on_progress=_progress if sys.stderr.isatty() else None)
    index.save(args.index)
    seconds = time.perf_counter() - started
    print(f"indexed {len(documents)} documents as {len(chunks)} chunks into {args.index} in {seconds:.1f}s")
    return 0


def cmd_ask(args: argparse.Namespace) -> int:
    question = (args.question or "").strip()
    if not question:
        raise CliError("the question is empty")
    from selfcrag import Context, graph
    from selfcrag.components.retrieval import open_index

    # --model: this run on the model backend with that model; otherwise the environment decides (Context.backend).
    context = Context.from_env(index_dir=args.index, generator_model=args.model or None,
                               backend="model" if args.model else None,
                               embeddings=args.embeddings or None, domain=args.domain or None,
                               risk=args.risk or None)  # fmt: skip
    if args.index:
        from selfcrag.components.embeddings import embedder_for

        # Fail fast, with the loader's one-line message (a missing index, other embeddings), before the run starts.
        open_index(args.index, embedder_for(context.embeddings))
    if args.stream:  # progress and tokens live on stderr; the answer on stdout as usual
        from selfcrag.streaming import stream_run

        result, timings = stream_run(graph, {"question": question}, context, sys.stderr)
        print(timings.summary(), file=sys.stderr)
    else:
        result = graph.invoke({"question": question}, context=context)
    result.pop("messages", None)  # the chat copy of the answer; `answer` and `citations` already say it
    if args.json:
        print(json.dumps(result, ensure_ascii=False, indent=2, default=str))
    else:
        print(render(result, show_trace=args.trace))
    return 0


def render(result: dict[str, Any], show_trace: bool = False) -> str:
    lines = [result.get("answer", ""), ""]
    citations = result.get("citations") or []
    if citations:
        lines.append("Sources:")
        for c in citations:
            lines.append(f"  [{c['ref']}] {c['title']} ({c['source']}): \"{c['quote']}\"")
        lines.append("")
    scores = result.get("scores") or {}
    lines.append(f"Decision: {result.get('decision')}   Confidence: {result.get('confidence', 0.0):.2f}")
    lines.append(
        "Scores: " + " · ".join(f"{name.replace('_', ' ')} {value:.2f}" for name, value in scores.items())
        + f"   Model calls: {result.get('llm_calls', 0)}"
    )
    if show_trace:
        lines += ["", "Trace:"]
        for n, step in enumerate(result.get("trace") or [], 1):
            lines.append(f"  {n:>2}. {step.get('node', '?'):<20} {step.get('decision', '')}: {step.get('reason', '')}")
    return "\n".join(lines)


def parser() -> argparse.ArgumentParser:
    top = argparse.ArgumentParser(prog="selfcrag", description="Self-corrective RAG on LangGraph.")
    sub = top.add_subparsers(dest="command", required=True)

    ingest = sub.add_parser("ingest", help="build an index from folders, .md/.txt files or a JSONL corpus")
    ingest.add_argument("paths", nargs="+", help="folders, .md/.txt/.pdf files, or .jsonl with id/title/text")
    ingest.add_argument("--index", required=True, help="directory to write the index to")
    embeddings_help = ("`local` (default, offline MiniLM) or `openai:<model>` at OPENAI_BASE_URL; default: "
                       "SELFCRAG_EMBEDDINGS. An index is read with the embeddings that built it.")
    ingest.add_argument("--embeddings", default="", help=embeddings_help)
    ingest.set_defaults(run=cmd_ingest)

    ask = sub.add_parser("ask", help="answer a question from an index (default: the bundled sample)")
    ask.add_argument("question")
    ask.add_argument("--index", default="", help="index directory from `selfcrag ingest`")
    ask.add_argument("--json", action="store_true", help="print the whole output as one JSON object")
    ask.add_argument("--trace", action="store_true", help="show the path the graph took and why")
    ask.add_argument("--embeddings", default="", help=embeddings_help)
    domains = ["general", "customer_service", "financial", "medical", "legal"]
    ask.add_argument("--domain", default="", choices=["", *domains],
                     help="quality preset: how good evidence and answer must be before answering (default general)")
    ask.add_argument("--risk", default="", choices=["", "low", "normal", "critical"],
                     help="moves every preset minimum by -0.05 / 0 / +0.05 (default normal)")
    ask.add_argument("--model", default="", help="answer with this chat model, as provider:model (e.g. "
                     "openai:gpt-4o-mini); needs OPENAI_API_KEY, or OPENAI_BASE_URL for a compatible server")
    ask.add_argument("--stream", action="store_true",
                     help="show progress and answer tokens live on stderr, with the time to the first token")
    ask.set_defaults(run=cmd_ask)
    return top


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    from selfcrag.components.embeddings import EmbeddingModelError
    from selfcrag.components.retrieval import IngestError

    try:
        return int(args.run(args))
    except BrokenPipeError:  # `selfcrag ask ... | head -1`: the reader left, nothing to report
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except CliError as exc:
        print(f"selfcrag: error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except (IngestError, EmbeddingModelError, ValueError, OSError) as exc:
        print(f"selfcrag: error: {exc}", file=sys.stderr)
        return EXIT_ERROR
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
