"""Shared helpers of the SQuAD benchmarks; the measurement itself moved to `eval_datasets.py`.

    .venv/bin/python benchmarks/squad_offline.py      # = eval_datasets.py squad (the dev sample, with plain RAG)

Answer matching is `selfcrag.evaluation.questions.contains_gold` (SQuAD normalisation, whole words), so every
benchmark judges an answer the same way `selfcrag eval` does.
Data: SQuAD 2.0 (Rajpurkar et al. 2018), CC BY-SA 4.0 — the dev sample that shared/datasets allows for tuning.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from eval_datasets import DEFAULT_DATASETS, ROOT, load_jsonl  # noqa: E402

from selfcrag.evaluation.questions import contains_gold, normalise  # noqa: E402

__all__ = ["DEFAULT_DATASETS", "ROOT", "contains_gold", "load_jsonl", "normalise"]

if __name__ == "__main__":
    import eval_datasets

    sys.exit(eval_datasets.main(["squad", *sys.argv[1:]]))
