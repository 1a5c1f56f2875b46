"""A bridge question and its two hops, and sentence similarity without an embedder, for the tests of the
extractive generator's second hop (test_hops, test_drafting)."""

from __future__ import annotations

from typing import Any

import numpy

SERIES = ('"Human Error" is the season finale of the third season of "House". '
          "It was written by the show's writers.")
SHOW = "House is an American medical drama. It originally ran on the Fox network for eight seasons."
BRIDGE_QUESTION = 'Human Error" is the season finale of the third season of a show that aired on what network?'


def flat_similarity(monkeypatch: Any) -> None:
    """Every sentence alike to the generator, so term coverage and answer type decide."""
    import selfcrag.offline.extractive as extractive

    monkeypatch.setattr(extractive, "similarity_or_stand_in", lambda *a: 0.5)
    monkeypatch.setattr(extractive, "embed", lambda embedder, texts, stored=None: numpy.ones((len(texts), 2)))
