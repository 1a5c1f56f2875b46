"""`selfcrag eval`: one way to measure the agent against plain retrieve-then-generate on a question set.

- `questions.py`: reading a question file (one-line errors) and SQuAD-style answer matching.
- `run.py`: runs both systems over the questions and writes one record per question and system.
- `signals.py`: the cheap signals a run's output and trace offer, kept in each record for calibration work.
- `metrics.py`: pure functions from records to numbers (accuracy, AUROC, risk-coverage, ECE, latency).
- `plots.py`: matplotlib figures from plain numbers (reusable by a dashboard), embedded as inline PNG.
- `report.py`: the one-file HTML page that puts the systems side by side.

matplotlib comes with the `eval` extra; nothing here is imported by the agent itself.
"""
