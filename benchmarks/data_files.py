"""Where the benchmarks' evaluation data lives, and one line instead of a traceback when it is not there.

The sets are the vendored ones of `shared/datasets/` beside this project (SQuAD 2.0, HotpotQA, PopQA, HaluEval;
their README gives sources, licences and the rules for using them); `--datasets DIR` points elsewhere.
"""

from __future__ import annotations

import sys
from pathlib import Path

DEFAULT_DATASETS = Path(__file__).resolve().parents[2] / "shared" / "datasets"


def require(folder: Path, *files: str) -> None:
    """Exit with status 2 and one line naming the first missing file when `folder` lacks any of `files`."""
    for name in files:
        if not (folder / name).is_file():
            print(f"benchmarks: missing {folder / name}: these benchmarks read the evaluation sets of "
                  f"shared/datasets (see its README) beside the project; pass --datasets DIR if they live elsewhere",
                  file=sys.stderr)  # fmt: skip
            sys.exit(2)
