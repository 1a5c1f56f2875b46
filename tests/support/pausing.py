"""The real `selfcrag` command with one point of it made to wait, for tests that stop (SIGSTOP) a process there:

    python -m support.pausing POINT MARKER GO_ON selfcrag-arguments...

runs `selfcrag.cli.main(arguments)` in this process with POINT made to write its process id to the file MARKER and
then wait until the file GO_ON exists, and go on. POINT is `decision` (the `human_review` node, before any write of
the reviewer's decision) or `record` (`reviews.set_status`, after the thread's write and before the record's).
Everything else is the shipped code."""

from __future__ import annotations

import functools
import importlib
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

POINTS = ("decision", "record")


def pausing(run: Callable[..., Any], marker: Path, go_on: Path) -> Callable[..., Any]:
    @functools.wraps(run)  # the same signature: the graph passes the runtime as it would
    def paused(*args: Any, **kwargs: Any) -> Any:
        marker.write_text(str(os.getpid()))
        while not go_on.exists():
            time.sleep(0.02)
        return run(*args, **kwargs)

    return paused


def pause_at(point: str, marker: Path, go_on: Path) -> None:
    if point == "decision":
        module = importlib.import_module("selfcrag.nodes.human_review")
        make = module.make
        module.make = lambda components: pausing(make(components), marker, go_on)
        graph_module = importlib.import_module("selfcrag.graph")
        graph_module.graph = graph_module.build_graph()  # a review resumes on the module's graph
    elif point == "record":
        from selfcrag.store import reviews

        reviews.set_status = pausing(reviews.set_status, marker, go_on)
    else:
        raise SystemExit(f"point must be one of {', '.join(POINTS)}, got {point!r}")


if __name__ == "__main__":
    point, marker, go_on, *arguments = sys.argv[1:]
    pause_at(point, Path(marker), Path(go_on))
    from selfcrag.cli import main

    sys.exit(main(arguments))
