"""Run the graph and show it while it runs: progress events (`stream_mode="custom"`, see `progress.py`) and
the generator's tokens (`stream_mode="messages"`), with the time to the first event and to the first token.

`selfcrag ask --stream` uses it; any caller can pass another compiled graph or output stream.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any, TextIO

from langchain_core.messages import AIMessageChunk

# Tokens are shown from the nodes that write the answer only: graders that call a model stream too, but
# their tokens are verdicts, not the answer. `first_draft` writes plain's single-pass draft; a correction's
# `generate` may follow it with another candidate, after a progress line saying why.
ANSWER_NODES = ("first_draft", "generate")


@dataclass
class Timings:
    first_event: float | None = None  # seconds from the start to the first progress event
    first_token: float | None = None  # ... to the generator's first token (None: nothing streamed)
    total: float = 0.0

    def summary(self) -> str:
        def seconds(value: float | None) -> str:
            return f"{value:.2f}s" if value is not None else "none"

        first_token = seconds(self.first_token) if self.first_token is not None else "none streamed"
        return f"first event {seconds(self.first_event)} · first token {first_token} · total {self.total:.2f}s"


def stream_run(graph: Any, inputs: dict[str, Any], context: Any, out: TextIO) -> tuple[dict[str, Any], Timings]:
    """Run `graph` on `inputs`, writing progress lines and answer tokens to `out` as they arrive.
    Returns the run's output (as `invoke` would) and its timings."""
    timings = Timings()
    result: dict[str, Any] = {}
    in_tokens = False  # tokens are written on one line; the next progress line starts a new one
    started = time.perf_counter()
    for mode, chunk in graph.stream(inputs, context=context, stream_mode=["custom", "messages", "values"]):
        elapsed = time.perf_counter() - started
        if mode == "values":
            result = dict(chunk)  # the last one is the run's output
        elif mode == "custom" and isinstance(chunk, dict) and "text" in chunk:
            if timings.first_event is None:
                timings.first_event = elapsed
            out.write(("\n" if in_tokens else "") + f"[{elapsed:6.2f}s] {chunk.get('node', '?')}: {chunk['text']}\n")
            in_tokens = False
        elif mode == "messages":
            message, metadata = chunk
            token = message.text if isinstance(message, AIMessageChunk) else ""
            node = metadata.get("langgraph_node")
            if token and node in ANSWER_NODES:
                if timings.first_token is None:
                    timings.first_token = elapsed
                out.write(token if in_tokens else f"[{elapsed:6.2f}s] {node}: {token}")
                in_tokens = True
        out.flush()
    if in_tokens:
        out.write("\n")
    timings.total = time.perf_counter() - started
    return result, timings
