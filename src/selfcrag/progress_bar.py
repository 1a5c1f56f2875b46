"""Progress of long CLI work (embedding at ingest): tqdm's bar, with rate and ETA, on a terminal. Off a terminal (a
log, CI, a pipe) no bar, whose carriage returns would fill the file: the command's own closing line says how much
was done and how fast.

`advance` is a callback of the shape `HybridIndex.build(on_progress=...)` calls: (done, total), repeatedly.
"""

from __future__ import annotations

import sys
from typing import Any

_open: dict[str, Any] = {}  # desc -> its tqdm bar


def advance(desc: str, unit: str, done: int, total: int) -> None:
    """Move the `desc` bar to `done` of `total`; the call with done >= total closes it."""
    if not sys.stderr.isatty():
        return
    from tqdm import tqdm

    if desc not in _open:
        _open[desc] = tqdm(total=total, desc=desc, unit=f" {unit}", file=sys.stderr, dynamic_ncols=True)
    bar = _open[desc]
    bar.update(max(0, min(done, total) - bar.n))
    if done >= total:
        bar.close()
        del _open[desc]
