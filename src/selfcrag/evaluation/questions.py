"""Question files and answer matching.

A question file is JSONL with `id`, `question`, `answers` (acceptable answer strings; may be empty when the
question is unanswerable) and `is_impossible`, as in shared/datasets; `context_title` is kept when present so the
calibration work can group questions by article, and the gold documents when the set names them (`context_id`, as
SQuAD's paragraph id, or `gold_titles`, as HotpotQA's supporting pages) so retrieval's hit@k can be measured.
Bad lines end the command with one line naming file and line.
"""

from __future__ import annotations

import json
import re
import string
from pathlib import Path
from typing import Any

from selfcrag.errors import QuestionFileError

_PUNCTUATION = set(string.punctuation)
_ARTICLES = re.compile(r"\b(a|an|the)\b")
_CITATION = re.compile(r"\[[^\]]*\]")  # [doc_1]: a citation, not a word of the answer
POLARITY = ("yes", "no")


def normalise(text: str) -> str:
    """SQuAD's answer normalisation: lower case, no punctuation, no articles, single spaces."""
    text = "".join(ch for ch in text.lower() if ch not in _PUNCTUATION)
    return " ".join(_ARTICLES.sub(" ", text).split())


def contains_gold(answer: str, golds: list[str]) -> bool:
    """The answer contains a gold answer as whole words after normalisation. Whole words, because a short gold
    such as "yes" or "pol" would otherwise match inside "eyes" or "policy". A yes/no gold is judged by the answer's
    polarity word, the first word after any citation ("Yes, both are American." for "yes"): a "no" anywhere else
    ("... has no sequel") does not answer the question, and an answer in a sentence without one says neither."""
    shown = f" {normalise(answer)} "
    opening = normalise(_CITATION.sub(" ", answer)).split()[:1]
    for gold in (normalise(g) for g in golds):
        if gold in POLARITY:
            if opening == [gold]:
                return True
        elif gold and f" {gold} " in shown:
            return True
    return False


def _record(raw: Any, where: str) -> dict[str, Any]:
    if not isinstance(raw, dict):
        raise QuestionFileError(f"{where}: expected a JSON object")
    question = raw.get("question")
    if not isinstance(question, str) or not question.strip():
        raise QuestionFileError(f"{where}: missing 'question'")
    answers = raw.get("answers", [])
    if not isinstance(answers, list) or not all(isinstance(a, str) for a in answers):
        raise QuestionFileError(f"{where}: 'answers' must be a list of strings")
    impossible = raw.get("is_impossible", not answers)
    if not isinstance(impossible, bool):
        raise QuestionFileError(f"{where}: 'is_impossible' must be true or false")
    if not impossible and not answers:
        raise QuestionFileError(f"{where}: an answerable question needs at least one of 'answers'")
    return {"id": str(raw.get("id") or where), "question": question.strip(), "answers": answers,
            "is_impossible": impossible, "group": str(raw.get("context_title") or ""), "gold": _gold(raw, where)}


def _gold(raw: dict[str, Any], where: str) -> list[str]:
    """The documents the set says hold the answer (empty when it names none)."""
    named = raw.get("gold_titles", raw.get("context_id", []))
    named = [named] if isinstance(named, str) else named
    if not isinstance(named, list) or not all(isinstance(n, str) for n in named):
        raise QuestionFileError(f"{where}: 'context_id' / 'gold_titles' must be a string or a list of strings")
    return [n for n in named if n]


def load_questions(path: str | Path, limit: int = 0) -> list[dict[str, Any]]:
    """The questions of a JSONL file (the first `limit` when > 0); one-line QuestionFileError on bad input."""
    path = Path(path)
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as exc:
        raise QuestionFileError(f"cannot read questions from {path}: {getattr(exc, 'strerror', None) or exc}") from None
    questions: list[dict[str, Any]] = []
    seen: set[str] = set()
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        where = f"{path.name}:{number}"
        try:
            raw = json.loads(line)
        except json.JSONDecodeError:
            raise QuestionFileError(f"{where}: invalid JSON") from None
        question = _record(raw, where)
        if question["id"] in seen:
            raise QuestionFileError(f"{where}: duplicate id {question['id']!r}")
        seen.add(question["id"])
        questions.append(question)
        if limit and len(questions) >= limit:
            break
    if not questions:
        raise QuestionFileError(f"{path} holds no questions")
    return questions
