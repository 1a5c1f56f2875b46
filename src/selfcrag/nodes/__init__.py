"""One module per graph node. Each `make(components)` returns the node function: it reads state, calls one
component, and returns a state update with one trace step saying what it decided and why."""

from __future__ import annotations

from typing import Any

from selfcrag.components.base import ModelUse


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
