"""The store's sub-commands of `selfcrag`: `chat`, `review list|show|approve|edit|reject`, `monitor` and `report`
(`selfcrag ask --thread` lives with `ask` in selfcrag/cli.py). Bad input is one line and a non-zero exit.
Imports of the store and the graph sit inside the commands for start-up time (`selfcrag --help` loads neither)."""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

from selfcrag.terminal import operator_flags, render, thread_graph

# chat takes ask's operator and run options
SHARED = ("index", "embeddings", "model", "verifier", "verifier_url", "domain", "risk", "review")


def add_commands(sub: Any, ask: argparse.ArgumentParser) -> None:
    chat = sub.add_parser("chat", help="an interactive conversation on a thread (one question per line)")
    chat.add_argument("--thread", default="", help="continue this thread (default: a new one)")
    for action in ask._actions:  # the same --index/--model/--domain... as `ask`, with the same help
        if action.dest in SHARED:
            chat._add_action(action)
    chat.set_defaults(run=cmd_chat)

    review = sub.add_parser("review", help="the queue of answers awaiting a person's review")
    actions = review.add_subparsers(dest="review_command", required=True)
    listing = actions.add_parser("list", help="pending reviews: thread, question, draft, scores, why, age")
    listing.add_argument("--json", action="store_true")
    listing.set_defaults(run=cmd_review_list)
    show = actions.add_parser("show", help="one review in full")
    show.add_argument("id")
    show.add_argument("--json", action="store_true")
    show.set_defaults(run=cmd_review_show)
    for name, text in (("approve", "show the draft as the answer"), ("edit", "answer with your text instead"),
                       ("reject", "abstain instead of answering")):  # fmt: skip
        decide = actions.add_parser(name, help=text)
        decide.add_argument("id")
        if name == "edit":
            decide.add_argument("--answer", required=True, help="the reviewed answer ([doc_N] keeps a citation)")
        if name == "reject":
            decide.add_argument("--note", default="", help="why, kept with the review")
        decide.add_argument("--json", action="store_true")
        decide.set_defaults(run=cmd_review_decide, action=name)

    monitor = sub.add_parser("monitor", help="quality of recorded runs: pass rate, scores, decisions, latency")
    monitor.add_argument("--since", default="24h", help="time window back from now: 30m, 1h, 7d, 2w (default 24h)")
    monitor.add_argument("--json", action="store_true")
    monitor.add_argument("--prune-before", default="", metavar="DATE",
                         help="delete the records of runs started before DATE (YYYY-MM-DD, ISO time, or e.g. 90d)")
    monitor.set_defaults(run=cmd_monitor)

    report = sub.add_parser("report", help="an HTML dashboard of recorded runs with plots over time")
    report.add_argument("--since", default="7d", help="time window back from now (default 7d)")
    report.add_argument("--out", required=True, help="directory to write index.html and the plots to")
    report.set_defaults(run=cmd_report)


def cmd_chat(args: argparse.Namespace) -> int:
    from selfcrag.errors import ThreadBusyError
    from selfcrag.threads import ask_in_thread, new_thread_id

    _, chosen, context = operator_flags(args)
    graph = thread_graph(chosen, needed=True)
    thread = args.thread or new_thread_id()
    prompt = sys.stdin.isatty()
    print(f"thread {thread} (continue later: selfcrag chat --thread {thread}; end with Ctrl-D or /exit)",
          file=sys.stderr)
    while True:
        if prompt:
            print("you> ", end="", file=sys.stderr, flush=True)
        line = sys.stdin.readline()
        if not line or line.strip() in ("/exit", "/quit"):
            return 0
        if not line.strip():
            continue
        try:
            result = ask_in_thread(line.strip(), thread, context=context, compiled_graph=graph)
        except ThreadBusyError as exc:  # the conversation goes on once the review is done
            print(f"selfcrag: {exc}", file=sys.stderr)
            continue
        print(render(result).split("\nDecision:")[0].rstrip() + "\n", flush=True)


def cmd_review_list(args: argparse.Namespace) -> int:
    from selfcrag.store import reviews

    queue = reviews.pending()
    if args.json:
        print(json.dumps(queue, ensure_ascii=False, indent=2))
        return 0
    if not queue:
        print("no answers await review")
    for item in queue:
        scores = " ".join(f"{k[:1]}{v:.2f}" for k, v in item["scores"].items())
        print(f"{item['id']}  {_age(item['age_seconds']):>5}  conf {item['confidence'] or 0:.2f}  {scores}  "
              f"{item['question'][:60]!r}\n    draft: {item['draft'][:100]!r}\n    why: {item['reason'][:140]}"
              + (f"\n    being decided by {item['claimed_by']}" if item.get("claimed_by") else ""))
    return 0


def cmd_review_show(args: argparse.Namespace) -> int:
    from selfcrag.store import reviews

    item = reviews.get(args.id)
    if args.json:
        print(json.dumps(item, ensure_ascii=False, indent=2))
        return 0
    scores = " · ".join(f"{k.replace('_', ' ')} {v:.2f}" for k, v in item["scores"].items())
    print(f"review {item['id']} ({item['status']}, {_age(item['age_seconds'])} ago)\n\nQuestion: {item['question']}\n\n"
          f"Draft:\n{item['draft']}\n\nScores: {scores}   Confidence: {item['confidence'] or 0:.2f}\n"
          f"Why: {item['reason']}" + (f"\n\nReviewed answer:\n{item['answer']}" if item["answer"] else ""))
    return 0


def cmd_review_decide(args: argparse.Namespace) -> int:
    from selfcrag.threads import resolve_review

    result = resolve_review(args.id, args.action, answer=getattr(args, "answer", ""), note=getattr(args, "note", ""))
    result.pop("messages", None)
    print(json.dumps(result, ensure_ascii=False, indent=2, default=str) if args.json else render(result))
    return 0


def cmd_monitor(args: argparse.Namespace) -> int:
    from selfcrag.store import monitor, runs

    if args.prune_before:
        before = monitor.parse_moment(args.prune_before)
        print(f"deleted {runs.prune(before)} run records from before {monitor.iso(before)}")
        return 0
    until = time.time()
    since = until - monitor.parse_duration(args.since)
    summary = monitor.summarize(runs.recent(since, until), since, until)
    print(json.dumps(summary, ensure_ascii=False, indent=2) if args.json else monitor.render(summary))
    return 0


def cmd_report(args: argparse.Namespace) -> int:
    from selfcrag.store import dashboard, monitor, runs

    until = time.time()
    since = until - monitor.parse_duration(args.since)
    recorded = runs.recent(since, until)
    index = dashboard.write_report(recorded, since, until, Path(args.out))
    print(f"wrote {index} ({len(recorded)} runs)")
    return 0


def _age(seconds: float) -> str:
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size:
            return f"{seconds / size:.0f}{unit}"
    return f"{seconds:.0f}s"
