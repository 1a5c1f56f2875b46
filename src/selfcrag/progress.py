"""Progress events for `stream_mode="custom"`: one short line per step, as it happens.

    {"node": "grade_documents", "text": "graded 5 documents: 3 correct, 2 incorrect", "correct": 3, ...}

The trace says the same things once the run has ended; these arrive while it runs, so a CLI, a UI or a
parent agent can show what the agent is doing (`selfcrag ask --stream`).
"""

from __future__ import annotations

from typing import Any

from langgraph.config import get_stream_writer


def emit(node: str, text: str, **data: Any) -> None:
    """Send a progress event to the run's custom stream. A no-op when nobody streams `custom` and when a
    node function is called outside a graph (unit tests call nodes directly)."""
    try:
        writer = get_stream_writer()
    except RuntimeError:  # not inside a graph run
        return
    writer({"node": node, "text": text, **data})
