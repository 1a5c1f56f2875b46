"""The model-judged injection check, by meaning: each retrieved passage is asked one question, "does this text
tell a reader or an AI what to say or do?", answered in one word and scored by P(yes) from the first token's
probabilities where the server reports them (else the word read: 1 or 0), as the one-word graders score
(`llm/verifier.grader_yes_no`). The detector (`quality/injection.py`) knows the phrasings its word classes list;
this check needs none: a planted sentence in a phrasing nobody wrote down yet still tells its reader what to say.

Off unless the operator's `injection_screen` setting turns it on (the bundled 0.5B model scored planted and
ordinary sentences alike: docs/quality.md). A passage scored at or above `screen.threshold`
(data/injection_checks.json) has its sentences asked the same question, one by one, and each sentence at or above
it is removed, as the detector's are; a passage that says it only as a whole (no sentence alone reaches the
threshold) is removed whole. So a false alarm on a passage costs a few calls, not the passage.

Each verdict is asked once per text and kept (`cache_dir()/injection_screen.jsonl`, one line per text: a hash of
the prompt version, the model and the text, and P(yes); never the text), so a chunk is judged at its first
retrieval and read back after that, by every process on the machine. A call that fails keeps the text (the
detector and the output check still stand) and says so in the trace; it is not kept, so it is asked again.
"""

from __future__ import annotations

import hashlib
import json
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Any

from selfcrag.contract import Passage, Screening
from selfcrag.home import cache_dir
from selfcrag.llm.verifier import grader_yes_no
from selfcrag.prompts import grading as prompts
from selfcrag.quality.echoes import parameters
from selfcrag.quality.injection import units

if TYPE_CHECKING:
    from selfcrag.context import Context
    from selfcrag.llm.models import ChatModels

CACHE_FILE = "injection_screen.jsonl"


class Verdicts:
    """P(yes) by text hash, read from the cache file once and appended to as new texts are judged."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._path: Path | None = None
        self._known: dict[str, float] = {}

    def _load(self) -> None:
        path = cache_dir() / CACHE_FILE
        if path == self._path:
            return
        self._path, self._known = path, {}
        try:
            lines = path.read_text(encoding="utf-8").splitlines()
        except OSError:  # no cache yet
            return
        for line in lines:
            try:
                entry = json.loads(line)
                self._known[str(entry["key"])] = float(entry["p_yes"])
            except (ValueError, KeyError, TypeError):  # a line cut by a crash, or not ours: asked again
                continue

    def get(self, key: str) -> float | None:
        with self._lock:
            self._load()
            return self._known.get(key)

    def put(self, key: str, p_yes: float) -> None:
        with self._lock:
            self._load()
            self._known[key] = p_yes
            assert self._path is not None
            try:
                self._path.parent.mkdir(parents=True, exist_ok=True)
                with self._path.open("a", encoding="utf-8") as out:  # one short line: appends do not interleave
                    out.write(json.dumps({"key": key, "p_yes": p_yes}) + "\n")
            except OSError:  # a read-only home: the verdict is kept in this process only
                pass


VERDICTS = Verdicts()


def _model_label(model: Any) -> str:
    """The screening model, as verdicts are kept by it: its class and model name (not its server's address, which
    a restarted local server changes)."""
    return f"{type(model).__name__}:{getattr(model, 'model_name', '') or getattr(model, 'model', '')}"


class ModelScreen:
    def __init__(self, models: ChatModels) -> None:
        self.models = models

    def screen(self, passages: list[Passage], settings: Context) -> Screening:
        if not settings.injection_screen:
            return Screening()
        threshold = float(parameters()["screen"]["threshold"])
        label = _model_label(self.models.grader(settings))
        result = Screening(prompt=prompts.SCREEN)
        errors: list[str] = []

        def p_yes(text: str) -> float | None:
            key = hashlib.sha256(f"{prompts.SCREEN}\n{label}\n{text}".encode("utf-8", "surrogatepass")).hexdigest()
            known = VERDICTS.get(key)
            if known is not None:
                return known
            score, calls, tokens, error = grader_yes_no(self.models, prompts.screen(text), settings)
            result.llm_calls += calls
            result.tokens += tokens
            if score is None:
                errors.append(error)
                return None
            VERDICTS.put(key, score)
            return score

        for passage in passages:
            whole = p_yes(f"{passage['title']}\n{passage['text']}" if passage["title"] else passage["text"])
            if whole is None or whole < threshold:
                continue
            sentences = [s for line in units(passage["text"]) for s in line]
            flagged = [s for s in sentences if (p := p_yes(s)) is not None and p >= threshold]
            result.removed += [(passage["id"], s) for s in flagged] or [(passage["id"], "")]
        if errors:
            result.error = f"injection screen unmeasured for {len(errors)} text(s) (kept): {errors[0]}"
        return result
