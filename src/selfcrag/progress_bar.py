"""Progress of long CLI work (embedding at ingest, eval's questions): tqdm's bar, with rate and ETA, on a
terminal; on anything else (a log, CI, a pipe) no bar, which would fill the file with carriage returns, but one
closing line with the count, the time and the rate.

`advance` is a callback of the shape `HybridIndex.build(on_progress=...)` calls: (done, total), repeatedly.
"""

from __future__ import annotations

import sys
import time
from typing import Any

_open: dict[str, tuple[Any, float]] = {}  # desc -> (the tqdm bar or None, when it started)


def advance(desc: str, unit: str, done: int, total: int) -> None:
    """Move the `desc` bar to `done` of `total`; the call with done >= total closes it."""
    from tqdm import tqdm

    if desc not in _open:
        bar = tqdm(total=total, desc=desc, unit=f" {unit}", file=sys.stderr, dynamic_ncols=True,
                   disable=not sys.stderr.isatty())
        _open[desc] = (bar, time.perf_counter())
    bar, started = _open[desc]
    if not bar.disable:
        bar.update(max(0, min(done, total) - bar.n))
    if done >= total:
        bar.close()
        del _open[desc]
        if bar.disable:
            seconds = time.perf_counter() - started
            rate = f", {total / seconds:.1f} {unit}/s" if seconds > 0 else ""
            print(f"{desc}: {total} {unit} in {seconds:.1f} s{rate}", file=sys.stderr, flush=True)
