"""Where the two concurrent checks of a draft meet (the hallucination check and the answer grade). It changes
nothing: LangGraph runs it once both have finished, and `routing.after_checks` then reads both verdicts to
regenerate, rewrite the query, or finalize."""

from __future__ import annotations

from typing import Any

from selfcrag.components.backend import Components
from selfcrag.state import NodeFunction, State


def make(components: Components) -> NodeFunction:
    def judge(state: State) -> dict[str, Any]:
        return {}

    return judge
