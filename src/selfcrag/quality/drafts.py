"""The run's candidates: every draft it wrote, each scored where it was judged, and which one to show.

Self-RAG ranks continuations by its critiques instead of deleting them; this follows it. The first candidate is
plain RAG's single-pass draft (nodes/first_draft.py); every later draft (from refined strips, a regeneration, a
rewrite round, a web round) is another. `judge` keeps each with the state it was judged in and its calibrated
probability, read with that draft's own evidence, citations, check verdicts and history (which round wrote it,
after how many regenerations); `finalize` shows the most probable one that may be shown, or abstains.

A candidate may be shown unless a finding is exact (`vetoed`: a citation to a document the run does not hold, text
that addresses the assistant, or nothing could check it), and, where the calibration was fitted on drafts the
groundedness check passed only (`ungrounded_drafts: withheld`), unless that check failed it: there its
probability has never seen such drafts.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from selfcrag.quality.calibration import for_settings
from selfcrag.state import State

if TYPE_CHECKING:
    from selfcrag.context import Context

# What a draft's confidence and its finalize decision read that later rounds overwrite.
DRAFT_KEYS = ("answer", "citations", "knowledge", "groundedness", "grounded", "vetoed", "answer_relevance",
              "answer_useful", "unsupported_claims", "feedback", "missing")  # fmt: skip


def showable(state: State, settings: Context) -> bool:
    """Whether the state's draft may be shown, if confident enough. A draft no check has judged counts as vetoed."""
    if not state.get("answer"):
        return False
    return bool(state.get("grounded")) or (for_settings(settings).scores_ungrounded and not state.get("vetoed", True))


def snapshot(state: State, plain: bool) -> dict[str, Any]:
    """A judged draft as finalize will read it, and where it came from (for the trace and the features)."""
    kept = {key: state.get(key) for key in DRAFT_KEYS if key in state}
    generation = 0 if plain else state.get("generations", 0)
    return {**kept, "round": state.get("retrieval_rounds", 0), "generation": generation, "plain": plain}


def as_judged(state: State, draft: dict[str, Any]) -> State:
    """The run's state with `draft`'s evidence, citations and verdicts in place of the last round's. The trace
    and the retrieval rounds stay the run's: they describe the whole run, whichever draft it shows."""
    view = dict(state)
    view.update({key: draft[key] for key in DRAFT_KEYS if key in draft})
    return view  # type: ignore[return-value]
