"""The run's drafts that may be shown, and which one to show.

A correction round can write a worse draft than an earlier one (a second hop's passage answers the question less
well than the first), or none at all; the graph used to show whatever the last round left. `judge` keeps a
snapshot of every showable draft with the state it was judged in; `finalize` scores each with the calibrated
confidence, read with the draft's own evidence, citations and check verdicts, and shows the most confident.

Which drafts may be shown is the calibration's call (quality/calibration.py, `ungrounded_drafts`): those the
groundedness check passed, or, with a calibration fitted on them, any draft it did not veto.
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


def snapshot(state: State) -> dict[str, Any]:
    """A judged draft as finalize will read it, and the generation that wrote it (for the trace)."""
    kept = {key: state.get(key) for key in DRAFT_KEYS if key in state}
    return {**kept, "round": state.get("retrieval_rounds", 0), "generation": state.get("generations", 0)}


def as_judged(state: State, draft: dict[str, Any]) -> State:
    """The run's state with `draft`'s evidence, citations and verdicts in place of the last round's. The trace
    and the retrieval rounds stay the run's: they describe the whole run, whichever draft it shows."""
    view = dict(state)
    view.update({key: draft[key] for key in DRAFT_KEYS if key in draft})
    return view  # type: ignore[return-value]
