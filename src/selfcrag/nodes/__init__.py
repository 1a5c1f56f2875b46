"""One module per graph node. Each `make(components)` returns the node function: it reads state, calls one
component, and returns a state update with one trace step saying what it decided and why."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from langgraph.runtime import Runtime

from selfcrag.components.base import ModelUse
from selfcrag.components.llm.calls import run_limits
from selfcrag.context import Context, settings_of
from selfcrag.state import State


def bounded(node: Callable[[State, Runtime[Context]], dict[str, Any]]) -> Any:  # Any: what add_node accepts
    """A node that may call models, run within the run's limits (components/llm/calls.py): the call budget left
    after `llm_calls`, shared with the nodes running in the same superstep (the same checkpoint), and the run's
    deadline counted from `run_started`. The components read them from a ContextVar, so their Protocols stay."""

    def run(state: State, runtime: Runtime[Context]) -> dict[str, Any]:
        step = getattr(getattr(runtime, "execution_info", None), "checkpoint_id", None)
        with run_limits(settings_of(runtime.context), spent=state.get("llm_calls", 0),
                        started=state.get("run_started"), step=step):  # fmt: skip
            return node(state, runtime)

    run.__name__ = getattr(node, "__name__", "node")
    return run


def spent(*results: ModelUse | None) -> dict[str, int]:
    """The update for the run's model usage: what these results added (the state's reducers sum it)."""
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
