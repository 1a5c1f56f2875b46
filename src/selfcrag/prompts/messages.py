"""User-facing text written without a model, in the question's language (`selfcrag.language.language_of`):
abstentions, caveats, and the phrases that say what the evidence or an answer lacked."""

from __future__ import annotations

from selfcrag.language import Language

VERSION = "messages/5"

_ABSTAIN: dict[Language, str] = {
    "en": "I don't know: the available evidence does not answer this question.",
    "zh": "我不知道：现有资料无法回答这个问题。",
}
_MISSING: dict[Language, str] = {"en": " Missing: {}.", "zh": "缺少的信息：{}。"}
# An abstention the confidence floor made: an answer was found, its confidence below the domain's floor. (Not in
# `vocabulary`: it is a final answer only, never feedback the rewriter reads.)
_WITHHELD: dict[Language, str] = {"en": "I can't answer this with enough confidence: {}.",
                                  "zh": "我无法足够有把握地回答：{}。"}
_BELOW_FLOOR: dict[Language, str] = {
    "en": "the answer found has a confidence of {}, below the {} domain's floor of {}",
    "zh": "找到的回答置信度为 {}，低于{}领域要求的最低值 {}",
}
_CAVEAT: dict[Language, str] = {
    "en": "Caveat: this answer may be incomplete or only partly supported ({}).",
    "zh": "请注意：这个回答可能不完整，或者只有部分内容有依据（{}）。",
}
_SEPARATOR: dict[Language, str] = {"en": "; ", "zh": "；"}
_LIST: dict[Language, str] = {"en": ", ", "zh": "、"}

# What the evidence or an answer lacked. Components put these in `missing` and in the answer grader's
# feedback; the rewriter reads the terms back after "mentions:" / "提到：".
PHRASES: dict[str, dict[Language, str]] = {
    "not_mentioned": {"en": "no passage mentions: {}", "zh": "没有任何段落提到：{}"},
    "not_retrieved": {"en": "no retrieved passage mentions: {}", "zh": "检索到的段落都没有提到：{}"},
    "not_in_kb": {"en": "no passage in the knowledge base is about: {}", "zh": "知识库中没有任何段落提到：{}"},
    "not_answered": {"en": "no passage answers: {}", "zh": "没有段落能回答：{}"},
    "all_unsupported": {"en": "every supporting sentence was unsupported before",
                        "zh": "能支持回答的句子此前都未通过核查"},
    "type_not_in_evidence": {"en": "no {} in the evidence", "zh": "资料中没有{}"},
    "type_not_in_answer": {"en": "no {} in the answer", "zh": "回答中没有{}"},
    "not_in_answer": {"en": "does not mention: {}", "zh": "回答没有提到：{}"},
    "unsupported": {"en": "support for: {}", "zh": "以下内容缺少依据：{}"},
    "negation_not_in_answer": {"en": "the question asks what is not so; the answer states what is",
                               "zh": "问题问的是否定的情况，回答却是肯定的陈述"},
    "opposite_in_answer": {"en": "the question asks about \"{}\"; the answer says \"{}\"",
                           "zh": "问题问的是“{}”，回答说的却是“{}”"},
    "evidence_about_other": {"en": "the evidence is about \"{}\", not \"{}\"", "zh": "资料说的是“{}”，而不是“{}”"},
    "contradicts": {"en": "this contradicts an earlier answer: \"{}\"", "zh": "这与之前的回答矛盾：“{}”"},
    "clarify": {"en": "Do you mean {} or {}?", "zh": "您是想问{}，还是{}？"},
    # The generator's `missing` when the model gave no answer: a plain phrase; the fault itself goes to the trace.
    "model_unreachable": {"en": "the model could not be reached", "zh": "无法连接到模型"},
    "model_limit": {"en": "this question reached its limit of model calls or time",
                    "zh": "这个问题已用完模型调用次数或时间"},
    # A question the evidence cannot read (text/sanitize.py): nothing to look up, or another script.
    "no_words": {"en": "the question has no letters or digits to look up", "zh": "问题中没有可以查找的文字或数字"},
    "script_not_covered": {"en": "the question's script ({}) is not covered by the knowledge base or the "
                           "answering system", "zh": "知识库和问答系统都不支持问题所用的文字（{}）"},
    "instruction_in_answer": {"en": "a statement that repeats instructions planted in a document (withheld)",
                              "zh": "一句照搬文档中所植入指令的内容（已拦截）"},
    "contested_in_answer": {"en": "a statement its own sources contradict (withheld)",
                            "zh": "一句与其来源自相矛盾的内容（已拦截）"},
    # What an abstention says when no check named a gap: the answer found was judged unclear, or none was found.
    "unclear_answer": {"en": "the answer the passages found support does not clearly answer the question",
                       "zh": "找到的段落所支持的回答没有明确回答这个问题"},
    "no_supported_answer": {"en": "no passage found supports an answer", "zh": "找到的段落都不足以支持回答"},
    # The reply to a greeting or a question about the assistant (offline/router.py): what it does, no claim.
    "direct_reply": {"en": "Hello! I answer questions from my knowledge base, citing the documents I used. "
                           "What would you like to know?",
                     "zh": "你好！我根据知识库中的文档回答问题，并注明出处。您想了解什么？"},
    "direct_reply_topics": {"en": "Hello! I answer questions from my knowledge base, citing the documents I used; "
                                  "it covers topics such as {}. What would you like to know?",
                            "zh": "你好！我根据知识库中的文档回答问题，并注明出处；知识库包括{}等内容。您想了解什么？"},
    "awaits_review": {"en": "This answer awaits review by a person; it will be shown once it is reviewed.",
                      "zh": "这个回答正在等待人工审核，审核通过后才会显示。"},
}
# The kind of answer a question expects, as named in "no number in the answer" (generic: nothing to name).
ANSWER_TYPES: dict[str, dict[Language, str]] = {
    "number": {"en": "number", "zh": "数字"},
    "date": {"en": "date or time", "zh": "日期或时间"},
    "person": {"en": "name of a person or organisation", "zh": "人名或机构名称"},
    "place": {"en": "place", "zh": "地点"},
    "reason": {"en": "reason", "zh": "原因"},
    "yesno": {"en": "yes/no statement", "zh": "明确的肯定或否定"},
}
SIGNALS: dict[str, dict[Language, str]] = {
    "context_relevance": {"en": "context relevance", "zh": "资料相关性"},
    "groundedness": {"en": "groundedness", "zh": "有据程度"},
    "answer_relevance": {"en": "answer relevance", "zh": "回答相关性"},
    "confidence": {"en": "confidence", "zh": "置信度"},
}


def listing(items: list[str], language: Language = "en") -> str:
    """Terms in a row: "a, b" / "甲、乙"."""
    return _LIST[language].join(items)


def separate(findings: list[str], language: Language = "en") -> str:
    """Findings in a row: "a; b" / "甲；乙"."""
    return _SEPARATOR[language].join(findings)


def phrase(key: str, language: Language = "en", *values: str) -> str:
    """`phrase("not_mentioned", "zh", "南极")` -> "没有任何段落提到：南极"."""
    return PHRASES[key][language].format(*values)


def answer_type(kind: str, language: Language = "en") -> str:
    """The name of an expected kind of answer ("number", "数字"); empty for a question of no particular kind."""
    return ANSWER_TYPES[kind][language] if kind in ANSWER_TYPES else ""


def conflict(kind: str, asked: str, stated: str, language: Language = "en") -> str:
    """What the answer says instead of what the question asks (text.opposites)."""
    if kind == "negation":
        return phrase("negation_not_in_answer", language)
    return phrase("opposite_in_answer", language, asked, stated)


def signal(name: str, language: Language = "en") -> str:
    return SIGNALS[name][language] if name in SIGNALS else name.replace("_", " ")


def abstain(missing: str, language: Language = "en") -> str:
    text = _ABSTAIN[language]
    return text + _MISSING[language].format(missing.rstrip(".。")) if missing else text


def below_floor(confidence: float, domain: str, floor: float, language: Language = "en") -> str:
    """What an abstention the confidence floor made lacked: the confidence, the domain and its floor."""
    return _BELOW_FLOOR[language].format(f"{confidence:.2f}", domain, f"{floor:.2f}")


def withheld(below_floor: str, missing: str, language: Language = "en") -> str:
    """An abstention the confidence floor made (`below_floor`: that phrase), with what was missing when a check
    named it."""
    text = _WITHHELD[language].format(below_floor)
    return text + _MISSING[language].format(missing.rstrip(".。")) if missing and missing != below_floor else text


def caveat(reasons: list[str], language: Language = "en") -> str:
    return _CAVEAT[language].format(separate(reasons, language))


def vocabulary() -> str:
    """Every template's text, for telling a template's words from a question's."""
    tables: list[dict[Language, str]] = [_ABSTAIN, _MISSING, _CAVEAT, *PHRASES.values(), *ANSWER_TYPES.values(),
                                     *SIGNALS.values()]
    return "\n".join(text for table in tables for text in table.values())
