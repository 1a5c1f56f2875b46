"""The offline backend's injection screen: none. Judging what a sentence does by its meaning takes a model
(`llm/screen.py`); offline, the detector (`quality/injection.py`) and the output check (`quality/echoes.py`) stand
alone."""

from __future__ import annotations

from typing import TYPE_CHECKING

from selfcrag.contract import Passage, Screening

if TYPE_CHECKING:
    from selfcrag.context import Context


class NoScreen:
    def screen(self, passages: list[Passage], settings: Context) -> Screening:
        return Screening()
