"""One module per graph node. Each `make(components)` returns the node function: it reads state, calls one
component, and returns a state update with one trace step saying what it decided and why."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from langgraph.runtime import Runtime

from selfcrag.context import Context
from selfcrag.contract import ModelUse
from selfcrag.ledger import count_of, ledger_of
from selfcrag.llm.calls import run_limits
from selfcrag.state import State
from selfcrag.trust_boundary import settings_of


def bounded(node: Callable[[State, Runtime[Context]], dict[str, Any]], turn: int = 0) -> Any:  # Any: add_node's
    """A node that may call models, run within the run's limits (llm/calls.py): the call budget and
    the deadline of the run's ledger (selfcrag/ledger.py), never state a client could have written. The
    components read them from a ContextVar, so their Protocols stay. The update carries the ledger's totals.
    A node that runs concurrently with others has its `turn` among them: with too few calls left for all, the
    first calls go in that order (the count at the superstep's start is the state's, the same for each of them;
    it can only hold a node back, the ledger still caps every call)."""

    def run(state: State, runtime: Runtime[Context]) -> dict[str, Any]:
        settings = settings_of(runtime.context)
        ledger = ledger_of(state, runtime, settings)
        spent_before = count_of(state.get("llm_calls"), settings.max_llm_calls) if turn else None
        with run_limits(settings, ledger, turn, spent_before) as limits:
            return ledger.spent(node(state, runtime), limits.reserved)

    run.__name__ = getattr(node, "__name__", "node")
    return run


def spent(*results: ModelUse | None) -> dict[str, int]:
    """The run's model usage these results added; `bounded` adds it to the run's ledger and writes the totals."""
    used = [r for r in results if r is not None]
    return {"llm_calls": sum(r.llm_calls for r in used), "tokens": sum(r.tokens for r in used)}


def model_notes(*results: ModelUse | None) -> dict[str, Any]:
    """Trace keys of a model-backed step: prompt versions, tokens, and the fault it degraded from, if any.
    Offline steps get none."""
    used = [r for r in results if r is not None]
    notes: dict[str, Any] = {}
    if prompts := list(dict.fromkeys(r.prompt for r in used if r.prompt)):
        notes["prompt"] = ", ".join(prompts)
    if tokens := sum(r.tokens for r in used):
        notes["tokens"] = tokens
    if errors := [r.error for r in used if r.error]:
        notes["error"] = "; ".join(errors)
    return notes
