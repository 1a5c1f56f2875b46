"""What the CLI's commands share (selfcrag/cli.py and selfcrag/cli_store.py): the operator's settings from the
flags, the graph whose runs are thread turns, and a result as the terminal shows it (changed: out of cli.py, so
cli_store.py no longer imports cli.py, which imports it).

Imports sit inside the functions for start-up time: `selfcrag --help` and a bad flag answer without loading the
graph, the index or the store.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any


def settings_given(items: list[str]) -> dict[str, str]:
    """`--set NAME=VALUE` flags (`ask`, `eval`) as a dict, checked as settings before any index is built."""
    from selfcrag.context import Context
    from selfcrag.errors import CliError

    pairs = [item.split("=", 1) for item in items]
    if bad := next((item for item, pair in zip(items, pairs, strict=True) if len(pair) != 2 or not pair[0]), None):
        raise CliError(f"--set takes NAME=VALUE, got {bad!r}")
    given = {name.strip(): value.strip() for name, value in pairs}
    Context.from_env(**given)  # a wrong name or value: SettingsError, one line
    return given


def operator_flags(args: argparse.Namespace) -> tuple[Any, dict[str, Any], dict[str, Any]]:
    """The command line is the operator: it picks the index, the embeddings and (--model) the model backend, and
    builds its graph with them, and the settings `--set` names (`ask`); the quality preset is a run setting.
    Returns (settings, operator fields, context)."""
    from selfcrag.context import Context
    from selfcrag.knowledge.loaded_indexes import open_index

    operator = {"index_dir": args.index or None, "generator_model": args.model or None,
                "backend": "model" if args.model else None, "embeddings": args.embeddings or None,
                "verifier": args.verifier or None, "verifier_url": args.verifier_url or None}
    operator |= settings_given(getattr(args, "set", None) or [])  # as `eval --set`: a --set wins over a flag
    settings = Context.from_env(**operator)
    chosen = {name: value for name, value in operator.items() if value is not None}
    context = {name: value for name, value in (("domain", args.domain), ("risk", args.risk)) if value}
    if getattr(args, "review", False):
        context["human_review"] = True
    if args.index:
        from selfcrag.knowledge.embeddings import embedder_for

        # Fail fast, with the loader's one-line message (a missing index, other embeddings), before the run starts.
        open_index(args.index, embedder_for(settings.embeddings))
    return settings, chosen, context


def thread_graph(chosen: dict[str, Any], needed: bool) -> Any:
    """The graph with the store's checkpointer, so the run is a thread turn and a paused run can be reviewed later.
    Without a usable store, a one-off question still runs (said on stderr); a named thread cannot."""
    from selfcrag.errors import StoreError
    from selfcrag.threads import persistent

    try:
        return persistent(settings=chosen)
    except StoreError as exc:
        if needed:
            raise
        print(f"selfcrag: warning: {exc}; this run is not kept", file=sys.stderr)
        return None


def render(result: dict[str, Any], show_trace: bool = False) -> str:
    lines = [result.get("answer", ""), ""]
    citations = result.get("citations") or []
    if citations:
        lines.append("Sources:")
        quotes: dict[tuple[str, str, str], list[str]] = {}  # each source once, with every sentence quoted from it
        for c in citations:
            quotes.setdefault((c["ref"], c["title"], c["source"]), []).append(f"\"{c['quote']}\"")
        for (ref, title, source), quoted in quotes.items():
            lines.append(f"  [{ref}] {title} ({source}): {' '.join(quoted)}")
        lines.append("")
    scores = result.get("scores") or {}
    lines.append(f"Decision: {result.get('decision')}   Confidence: {result.get('confidence', 0.0):.2f}")
    lines.append(
        "Scores: " + " · ".join(f"{name.replace('_', ' ')} {value:.2f}" for name, value in scores.items())
        + f"   Model calls: {result.get('llm_calls', 0)}"
    )
    if result.get("review"):
        lines.append(f"Review: {result['review']['id']} (selfcrag review show {result['review']['id']})")
    elif result.get("thread_id"):
        lines.append(f"Thread: {result['thread_id']} (turn {result.get('turn')}; continue with --thread)")
    if show_trace:
        lines += ["", "Trace:"]
        for n, step in enumerate(result.get("trace") or [], 1):
            lines.append(f"  {n:>2}. {step.get('node', '?'):<20} {step.get('decision', '')}: {step.get('reason', '')}")
    return "\n".join(lines)
