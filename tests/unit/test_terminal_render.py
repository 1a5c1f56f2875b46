"""How `selfcrag ask` shows a result: each source once, with every sentence the answer quoted from it."""

from __future__ import annotations

from selfcrag.terminal import render


def test_two_sentences_of_one_source_list_it_once() -> None:
    source = {"ref": "doc_1", "title": "Error Codes", "source": "sample_kb/error_codes.md"}
    result = {"answer": "`E1042` — Declined. [doc_1] Contact support. [doc_1]", "decision": "answer",
              "confidence": 0.76, "citations": [source | {"quote": "`E1042` — Declined."},
                                                source | {"quote": "Contact support."}]}
    lines = render(result).splitlines()
    listed = lines[lines.index("Sources:") + 1 : lines.index("Sources:") + 3]
    assert listed == ['  [doc_1] Error Codes (sample_kb/error_codes.md): "`E1042` — Declined." "Contact support."', ""]
