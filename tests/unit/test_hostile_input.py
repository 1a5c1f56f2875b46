"""Hostile text and unusable review replies, as pure functions: cleaning, argv decoding, the script check, the
two routes that use them, and the reviewer-reply check."""

from __future__ import annotations

import unicodedata

import pytest
from langgraph.graph import END

from selfcrag import routing
from selfcrag.context import Context
from selfcrag.nodes.human_review import MAX_ANSWER_CHARS, check_reply
from selfcrag.text.sanitize import clean_text, decode_argv, script_of, unreadable

RETURNS = "How many days do I have to return an item?"
S = Context()


@pytest.mark.parametrize(
    ("dirty", "clean"),
    [
        (f"\x1b[31m{RETURNS}\x1b[0m", RETURNS),  # colour codes go whole: no "31m" left to search for
        (f"\x1b[1;38;5;196m{RETURNS}", RETURNS),
        (f"\x1b]0;window title\x07{RETURNS}", RETURNS),  # OSC string up to BEL
        (f"\x1b]8;;http://x.example\x1b\\{RETURNS}\x1b]8;;\x1b\\", RETURNS),  # hyperlink, ST-terminated
        (f"\x9b31m{RETURNS}", RETURNS),  # 8-bit CSI
        (f"\x1bPq#0;2;0;0;0\x1b\\{RETURNS}", RETURNS),  # DCS string
        (f"\x1b(B{RETURNS}\x1b=", RETURNS),  # short ESC sequences
        ("How many\u200b days\u200d do I\u2060 have\ufeff to return an item?", RETURNS),  # zero-width
        ("How many days do I have to \u202eretur\u202c\u2066n an item?\u2069", RETURNS),  # bidi controls
        ("How\x00 many\x07 days\x7f do\x85I have to return an item?", RETURNS.replace("do I", "do\nI")),
        ("How many days do I have to return an item?\ud800\udfff", RETURNS),  # lone surrogates
        ("How many days \ufffd\ufffd\ufffddo I have to return an item?", RETURNS),  # replacement runs
        ("  How   many\tdays do I\r\n\r\n\n have to return an item?  ", "How many days do I\nhave to return an item?"),
        ("caf\u0065\u0301", "caf\u00e9"),  # NFC: composed
        ("\U000e0069\U000e0067gnore", "gnore"),  # invisible tag characters carry hidden instructions
        ("退货期限是多久？", "退货期限是多久？"),
        ("😀 ok", "😀 ok"),
        ("\x1b[0m\u200b\x00", ""),
    ],
)
def test_clean_text(dirty, clean):
    assert clean_text(dirty) == clean


def test_clean_text_leaves_plain_text_alone_and_is_idempotent():
    assert clean_text(RETURNS) == RETURNS
    once = clean_text("\x1b[31mA\u200bB\r\n\tC\ud800")
    assert clean_text(once) == once == "AB\nC"


def test_clean_text_leaves_no_control_or_format_character_for_any_code_point():
    everything = "".join(map(chr, range(0x110000)))
    cleaned = clean_text(everything)
    assert not {unicodedata.category(c) for c in cleaned} & {"Cc", "Cf", "Cs"}
    assert set(cleaned) & {"\x1b", "\ufffd", "\r"} == set()


def test_argv_bytes_that_are_not_utf8_become_replacement_characters():
    escaped = b"caf\xe9 refund \xff".decode("utf-8", "surrogateescape")  # how Python hands such argv over
    assert decode_argv(escaped) == "caf\ufffd refund \ufffd"
    assert clean_text(decode_argv(escaped)) == "caf refund"
    assert decode_argv("退货 ok") == "退货 ok"
    assert decode_argv("x\ud800") == "x\ud800"  # no escaped byte: left to clean_text, which drops it


def test_script_of_a_letter_is_the_first_word_of_its_name():
    assert [script_of(c) for c in "aé中ب Жक1?😀"] == ["LATIN", "LATIN", "CJK", "ARABIC", "", "CYRILLIC",
                                                   "DEVANAGARI", "", "", ""]
    assert script_of("Ａ") == "LATIN"  # full-width read as the plain letter


@pytest.mark.parametrize(
    ("question", "passages", "reason"),
    [
        (RETURNS, [], ""),
        (RETURNS, ["退货期限为三十天"], ""),
        ("退货期限是多久？", ["Returns within 30 days"], ""),  # Chinese: the tokenizer reads it
        ("Plus 会员的退货期限是多久？", [], ""),
        ("E1042", [], ""),
        ("2024?", [], ""),  # digits only: nothing to judge a script by
        ("Wie lange dauert die Rückgabe?", ["Returns within 30 days"], ""),  # Latin script
        ("😀😀", ["Returns within 30 days"], "empty"),
        ("?!? ...", [], "empty"),
        ("ما هي مدة إرجاع المنتج؟", ["Returns within 30 days", "退货期限为三十天"], "Arabic"),
        ("ما هي مدة إرجاع المنتج؟", [], "Arabic"),
        ("ما هي مدة إرجاع المنتج؟", ["يمكن إرجاع المنتج خلال ثلاثين يوما"], ""),  # the evidence is Arabic too
        ("Как вернуть товар?", ["Returns within 30 days"], "Cyrillic"),
        ("पैसे वापस कब मिलेंगे?", ["Returns within 30 days"], "Devanagari"),
        ("ما هي مدة return policy for headphones?", [], ""),  # most letters Latin
        ("Parcelly ما هي مدة إرجاع المنتج؟", [], "Arabic"),  # a Latin name in an Arabic question
    ],
)
def test_unreadable(question, passages, reason):
    assert unreadable(question, passages) == reason


def test_routing_sends_an_unreadable_question_from_retrieve_to_finalize():
    passage = {"id": "a#0", "title": "Returns", "text": "Returns within 30 days.", "score": 0.5}
    assert routing.after_retrieve({"question": RETURNS, "documents": [passage]}, S) == "grade_documents"
    assert routing.after_retrieve({"question": RETURNS, "documents": []}, S) == "grade_documents"
    assert routing.after_retrieve({"question": "😀", "documents": [passage]}, S) == "finalize"
    assert routing.after_retrieve({"question": "Как вернуть товар?", "documents": [passage]}, S) == "finalize"
    russian = {**passage, "text": "Товар можно вернуть за 30 дней."}
    assert routing.after_retrieve({"question": "Как вернуть товар?", "documents": [russian]}, S) == "grade_documents"


def test_routing_asks_the_reviewer_again_until_a_reply_decides():
    assert routing.after_review({"decision": "human_review", "review": {"error": "x"}}, S) == "human_review"
    assert routing.after_review({"decision": "answer"}, S) == END
    assert routing.after_review({"decision": "abstain"}, S) == END


@pytest.mark.parametrize(
    ("reply", "review"),
    [
        ({"action": "approve"}, {"action": "approve"}),
        ("approve", {"action": "approve"}),
        (" reject ", {"action": "reject"}),
        ({"action": "reject", "note": "wrong policy"}, {"action": "reject", "note": "wrong policy"}),
        ({"action": "edit", "answer": " 30 days [doc_1]. "}, {"action": "edit", "answer": "30 days [doc_1]."}),
        ({"action": "edit", "answer": "\x1b[31m30 days\u200b"}, {"action": "edit", "answer": "30 days"}),
        ({"action": "approve", "note": None}, {"action": "approve"}),
    ],
)
def test_check_reply_accepts(reply, review):
    assert check_reply(reply) == (review, "")


@pytest.mark.parametrize(
    ("reply", "says"),
    [
        ({"action": "edit", "answer": 5}, "edit needs the edited answer as non-empty text"),
        ({"action": "edit"}, "edit needs the edited answer"),
        ({"action": "edit", "answer": "   "}, "edit needs the edited answer"),
        ({"action": "edit", "answer": "\x1b[0m\u200b"}, "edit needs the edited answer"),
        ({"action": "edit", "answer": "x" * (MAX_ANSWER_CHARS + 1)}, "at most 10,000"),
        ("", "got an empty reply"),
        (None, "got an empty reply"),
        ([], "got list []"),
        (["approve"], "got list"),
        (5, "got int 5"),
        (True, "got bool True"),
        ("edit", "got str 'edit'"),
        ("yes please", "got str"),
        ("x" * 10_000_000, "got str 'xxx"),
        ({}, "action must be one of approve, edit, reject, got None"),
        ({"action": "APPROVE"}, "action must be one of"),
        ({"action": ["approve"]}, "action must be one of"),
        ({"action": {"x": 1}}, "action must be one of"),
        ({"action": "approve", "answer": {"x": 1}}, "approve takes no `answer`"),
        ({"action": "approve", "answer": "new text"}, "approve takes no `answer` (to change the answer, use edit)"),
        ({"action": "reject", "note": 5}, "`note` must be text"),
        ({"action": "reject", "note": "n" * 5000}, "`note` must be text of at most 2,000 characters"),
        ({"action": "approve", "comment": "ok"}, "unknown field(s) ['comment']"),
    ],
)
def test_check_reply_refuses_with_a_short_message_saying_what_is_wrong(reply, says):
    review, error = check_reply(reply)
    assert review == {} and says in error
    assert "\n" not in error and len(error) < 300  # one line, whatever the reply's size
