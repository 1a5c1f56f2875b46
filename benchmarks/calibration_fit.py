"""Re-fit the shipped calibration (`src/selfcrag/data/calibration/offline.json`) from the tuning data, reproducibly.

    .venv/bin/python benchmarks/calibration_fit.py [--per-class 300] [--seed 0] [--datasets ../shared/datasets]
                                                   [--out src/selfcrag/data/calibration/offline.json]

The tuning data is the SQuAD 2.0 dev sample (200 questions) and N answerable + N unanswerable other questions of
its 8 articles (the `squad-allowed` draw of eval_datasets.py), on the sample's 285 paragraphs (the same corpus
covers both). They go into one question file and through `selfcrag calibrate`, which runs the offline graph,
picks the features by cross-validation grouped by article, fits, prints AUROC/ECE/AURC before and after, and
writes the file with the data's sha256 and the git commit. HotpotQA, PopQA and the reserved SQuAD articles are
never used here. Re-run after a new feature lands in quality/calibration.py FEATURES.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from eval_datasets import DEFAULT_DATASETS, ROOT, index_dir, load_jsonl, squad_split  # noqa: E402

SHIPPED = ROOT / "src" / "selfcrag" / "data" / "calibration" / "offline.json"


def main(argv: list[str] | None = None) -> int:
    cli = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    cli.add_argument("--datasets", type=Path, default=DEFAULT_DATASETS)
    cli.add_argument("--per-class", type=int, default=300, help="questions per class drawn from the 8 articles")
    cli.add_argument("--seed", type=int, default=0)
    cli.add_argument("--out", type=Path, default=SHIPPED)
    args = cli.parse_args(argv)

    from selfcrag.cli import main as selfcrag

    squad = args.datasets / "squad2"
    work = Path(tempfile.mkdtemp(prefix="selfcrag-calibration-"))
    drawn, _ = squad_split(squad, "allowed", args.per_class, args.seed, work)
    questions = load_jsonl(squad / "dev_sample_200.jsonl") + load_jsonl(drawn)
    tuning = work / f"squad-tuning-{len(questions)}.jsonl"
    tuning.write_text("".join(json.dumps(q, sort_keys=True) + "\n" for q in questions), encoding="utf-8")
    corpus = squad / "dev_sample_corpus.jsonl"
    return selfcrag(["calibrate", str(tuning), "--index", str(index_dir(corpus)), "--corpus", str(corpus),
                     "--out", str(args.out)])


if __name__ == "__main__":
    sys.exit(main())
