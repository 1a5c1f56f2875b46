"""Self-RAG's hallucination check on a model, statement by statement (grounded / inferred / unsupported),
merged with the offline rule checks (numbers, names, identifiers, absolute words absent from the evidence),
which catch the small edits a model reader may wave through. It fails closed: an answer it cannot check is
not grounded.

The model sees the evidence one document per block, labelled as the generator labelled it, and is told that a
statement citing [doc_2] must be supported by doc_2. The rule checks hold a cited sentence to the documents it
cites too, so a model that waves "365 days [doc_1]" through, because another document says 365, is still
overruled. A sentence that addresses the assistant (copied instructions) makes the answer not grounded.

`groundedness_checking="yes_no"` asks for one word instead, and takes P(yes) from the first token's probabilities
as the supported share, as the one-word graders do (llm/answer_grade.py, llm/relevance.py): the rule checks, the
copied sentences and failing closed apply unchanged; only no statement is named for the next draft to avoid."""

from __future__ import annotations

from functools import lru_cache
from typing import TYPE_CHECKING, Annotated, Any, Literal, NamedTuple

from pydantic import BaseModel, BeforeValidator, Field, create_model

from selfcrag.contract import GroundednessCheck, Strip
from selfcrag.llm.structured import ask, normalised
from selfcrag.llm.verifier import grader_yes_no
from selfcrag.offline.groundedness import (
    FLAG_PENALTY,
    citation_scope,
    cited_sentences,
    copied_from,
    instruction_claim,
    instruction_flag,
)
from selfcrag.prompts import grading as prompts
from selfcrag.prompts.system import version
from selfcrag.quality.injection import is_instruction
from selfcrag.text.rules import rule_flags

if TYPE_CHECKING:
    from selfcrag.context import Context
    from selfcrag.llm.models import ChatModels

Verdict = Literal["grounded", "inferred", "unsupported"]
_SYNONYMS = {"supported": "grounded", "fully supported": "grounded", "yes": "grounded", "partially supported":
             "inferred", "partial": "inferred", "not supported": "unsupported", "no": "unsupported",
             "contradicted": "unsupported", "hallucinated": "unsupported"}  # fmt: skip
INFERRED_WEIGHT = 0.5  # a statement the evidence implies but does not state counts half


# (the supported share, or None when the check gave no verdict; the statements it called unsupported; usage; why
# it gave no verdict)
Judged = tuple[float | None, list[str], dict[str, Any], str]

STATEMENT_CHARS, REASON_CHARS = 300, 100  # a statement is a clause of the answer; a reason "a few words"
STATEMENTS_PER_SENTENCE = 3  # an answer sentence may hold a few statements: the list may hold this many per sentence


class StatementVerdict(BaseModel):
    text: str = Field(json_schema_extra={"maxLength": STATEMENT_CHARS})
    verdict: Annotated[Verdict, BeforeValidator(normalised(_SYNONYMS))]
    reason: str = Field("", json_schema_extra={"maxLength": REASON_CHARS})


class StatementCheck(BaseModel):
    """Every factual statement of the answer, with its verdict against the evidence."""

    statements: list[StatementVerdict]


@lru_cache(maxsize=64)
def statement_check(most: int) -> type[StatementCheck]:
    """The reply schema with room for `most` statements. The schema says so (maxItems, and each string's
    maxLength), so a server that constrains replies to the schema stops the list there: a 0.5B model otherwise
    repeated statements until its token cap cut the JSON, and an answer nobody could check fails closed. Only the
    request carries the bounds; a longer reply is still read."""
    bounded = Field(json_schema_extra={"maxItems": most})
    model: type[StatementCheck] = create_model("StatementCheck", __base__=StatementCheck,
                                               __doc__=StatementCheck.__doc__,
                                               statements=(list[StatementVerdict], bounded))  # fmt: skip
    return model


class LLMGroundednessChecker:
    def __init__(self, models: ChatModels) -> None:
        self.models = models

    def check(self, answer: str, strips: list[Strip], settings: Context, question: str = "",
              given: str = "") -> GroundednessCheck:
        flags, flagged, instructed, sentences, copied, findings, dangling = rule_checks(answer, strips, given)
        exact = instructed or dangling  # findings that are certain: never shown, whatever the score
        asked = self._yes_no if settings.groundedness_checking == "yes_no" else self._statements
        supported, said, usage, error = asked(answer, strips, sentences, settings)
        # Sentences copied from the documents they cite are stated there, whatever the model says: a 0.5B checker
        # called such sentences unsupported (SQuAD tuning questions), and its verdict then withheld right answers.
        copied_share = copied / max(1, sentences)
        if supported is None and copied_share == 1 and not instructed:
            return GroundednessCheck(score=round(max(0.0, 1 - FLAG_PENALTY * len(flags)), 4), grounded=True,
                                     flags=[*flags, "every sentence copied from the evidence it cites"],
                                     findings=findings, vetoed=dangling, error=error, **usage)  # fmt: skip
        if supported is None:  # fails closed: an answer nobody could check is not shown as grounded
            return GroundednessCheck(score=0.0, grounded=False, unsupported=flagged,
                                     flags=[*flags, f"groundedness check failed: {error}; not grounded (fails closed)"],
                                     findings=findings, vetoed=True, error=error, **usage)
        # A sentence the rules reject is unsupported whatever the model said of it: the model's share cannot exceed
        # the share of sentences that passed the rules.
        share = min(max(supported, copied_share), 1 - len(flagged) / max(1, sentences))
        score = min(1.0, max(0.0, share - FLAG_PENALTY * len(flags)))
        unsupported = list(dict.fromkeys(said + flagged))
        grounded = score >= settings.thresholds().groundedness and not instructed
        return GroundednessCheck(score=round(score, 4), grounded=grounded, unsupported=unsupported, flags=flags,
                                 findings=findings, vetoed=exact, **usage)

    def _statements(self, answer: str, strips: list[Strip], sentences: int, settings: Context) -> Judged:
        """The JSON verdicts, statement by statement: the supported share, and the statements called unsupported."""
        schema = statement_check(STATEMENTS_PER_SENTENCE * max(1, sentences))
        reply = ask(self.models, self.models.grader(settings), schema, prompts.groundedness(answer, strips, settings),
                    settings, "groundedness")  # fmt: skip
        usage: dict[str, Any] = {"llm_calls": reply.calls, "tokens": reply.tokens,
                                 "prompt": version(settings, "check_hallucination")}
        statements = reply.value.statements if reply.value else []
        if not statements:
            return None, [], usage, reply.error or "the checker returned no statements"
        verdicts = [s.verdict for s in statements]
        supported = verdicts.count("grounded") + INFERRED_WEIGHT * verdicts.count("inferred")
        said = [instruction_claim(s.text) if is_instruction(s.text) else s.text for s in statements
                if s.verdict == "unsupported"]  # fmt: skip
        return supported / len(statements), said, usage, ""

    def _yes_no(self, answer: str, strips: list[Strip], sentences: int, settings: Context) -> Judged:
        """P(yes) for "does the evidence state everything the answer says?"; no statement is named, so only the
        rule checks' sentences are fed back to the next draft."""
        asked = prompts.groundedness_yes_no(answer, strips, settings)
        p_yes, calls, tokens, error = grader_yes_no(self.models, asked, settings)
        usage: dict[str, Any] = {"llm_calls": calls, "tokens": tokens,
                                 "prompt": version(settings, "check_hallucination_yes_no")}
        if p_yes is None:
            return None, [], usage, error
        return p_yes, [], usage, ""


class RuleChecks(NamedTuple):
    flags: list[str]  # every finding, as a short human string
    flagged: list[str]  # the sentences they reject
    instructed: bool  # a sentence addresses the assistant: exact, never shown
    sentences: int
    copied: int  # sentences copied from the text they are checked against
    findings: int  # names, numbers, identifiers and absolute words no text the rules read holds: a feature
    dangling: bool  # a sentence cites a label the evidence does not have: exact, never shown


def rule_checks(answer: str, strips: list[Strip], given: str = "") -> RuleChecks:
    """The rule checks of every sentence. A sentence citing documents is checked against them only; an uncited one
    against all the evidence. The rules read a document's title beside its text, because the prompt shows it as
    part of the document: a page titled "Ed Wood" whose text says "He was an American filmmaker" names Ed Wood. A
    copied sentence must be copied from the text: a bare title is no answer. Names and numbers `given` holds (the
    run's other retrieved passages, and what `question_terms` lets an answer repeat of its question) pass as well."""
    flags: list[str] = []
    flagged: list[str] = []
    instructed = dangling = False
    copied = findings = 0
    cited = cited_sentences(answer)
    for sentence, refs in cited:
        if is_instruction(sentence):
            instructed = True
            flags.append(instruction_flag(sentence))
            flagged.append(instruction_claim(sentence))
            continue
        docs, unknown = citation_scope(refs, strips)
        if unknown:
            dangling = True
            flags.append(f"cites {', '.join(unknown)}, which the evidence does not have")
            flagged.append(sentence)
            continue
        scope = [s for s in strips if s["doc_id"] in docs] if docs else strips
        text = "\n".join(s["text"] for s in scope)
        titles = "\n".join(dict.fromkeys(s["title"] for s in scope if s["title"]))
        found = rule_flags(sentence, f"{titles}\n{text}", given)
        findings += len(found)
        flags.extend(f for f in found if f not in flags)
        if found:
            flagged.append(sentence)
        elif copied_from(sentence, text):
            copied += 1
    return RuleChecks(flags, flagged, instructed, len(cited), copied, findings, dangling)
