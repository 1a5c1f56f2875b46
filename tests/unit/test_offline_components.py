"""The offline components (no model) with the real local embedder, on a small hand-written help center."""

from __future__ import annotations

import numpy as np
import pytest

from selfcrag.context import Context
from selfcrag.contract import Grade, Passage, Strip
from selfcrag.knowledge.embeddings import default_embedder, embed
from selfcrag.offline.extractive import ExtractiveGenerator
from selfcrag.offline.groundedness import OfflineGroundednessChecker
from selfcrag.offline.offline_grading import OfflineAnswerGrader, OfflineRelevanceGrader, crag_action
from selfcrag.offline.refine import StripRefiner
from selfcrag.offline.rewrite import KeywordRewriter
from selfcrag.text.rules import rule_flags
from selfcrag.text.terms import answer_type, strip_citations

DOCS = {
    "returns": (
        "Returns",
        "You can return most items within 30 days of delivery. Items must be unused and in their original "
        "packaging. Headphones and other electronics can be returned within 15 days. Final-sale items cannot "
        "be returned.",
    ),
    "refunds": (
        "Refunds",
        "We inspect every return within 3 business days of receiving it. Refunds are issued to your original "
        "payment method within 5-7 business days after inspection. If you choose store credit instead, we add "
        "a 10% bonus.",
    ),
    "errors": (
        "Error codes",
        "Error E1042 means your payment was declined by your bank or card issuer. Try another card or contact "
        "your bank. Error E2001 means your shipping address could not be verified.",
    ),
    "gardening": (
        "Tomatoes",
        "Tomato plants need at least six hours of direct sunlight a day. Water them deeply twice a week.",
    ),
}


def passage(doc_id: str, chunk: int = 0) -> Passage:
    title, text = DOCS[doc_id]
    return Passage(id=f"{doc_id}#{chunk}", doc_id=doc_id, chunk_index=chunk, title=title, source=f"{doc_id}.md",
                   text=text, score=0.5, origin="kb")


def strip(doc_id: str, text: str | None = None) -> Strip:
    title, full = DOCS[doc_id]
    return Strip(id=f"{doc_id}#0", doc_id=doc_id, title=title, source=f"{doc_id}.md", text=text or full, score=0.8)


@pytest.fixture(scope="module")
def embedder():
    return default_embedder()


@pytest.fixture
def settings() -> Context:
    return Context()


# --- relevance grading and the CRAG action ---------------------------------------------------------------


def test_relevance_grader_labels_relevant_and_unrelated_passages(embedder, settings):
    passages = [passage("returns"), passage("gardening"), passage("errors")]
    grading = OfflineRelevanceGrader(embedder).grade("How many days do I have to return an item?", passages,
                                                     settings)
    by_id = {g["id"]: g for g in grading.grades}
    assert [g["id"] for g in grading.grades] == ["returns#0", "gardening#0", "errors#0"]
    assert by_id["returns#0"]["label"] == "correct"
    assert by_id["gardening#0"]["label"] == "incorrect"
    assert by_id["errors#0"]["label"] == "incorrect"
    assert by_id["returns#0"]["score"] > max(by_id["errors#0"]["score"], by_id["gardening#0"]["score"]) + 0.5
    assert all(0.0 <= g["score"] <= 1.0 for g in grading.grades)
    assert grading.llm_calls == 0
    assert "covers 3/3 question terms" in by_id["returns#0"]["reason"]
    assert "missing:" in by_id["gardening#0"]["reason"] and "similarity" in by_id["gardening#0"]["reason"]


def test_relevance_grader_batches_embeddings(embedder, settings):
    class Counting:
        name = "counting"

        def __init__(self) -> None:
            self.calls = 0

        def embed_documents(self, texts):
            self.calls += 1
            return embedder.embed_documents(texts)

        def embed_query(self, text):
            return self.embed_documents([text])[0]

    counting = Counting()
    OfflineRelevanceGrader(counting).grade("refund time", [passage(d) for d in DOCS], settings)
    assert counting.calls == 1


def test_relevance_thresholds_come_from_settings(embedder):
    question, passages = "How many days do I have to return an item?", [passage("gardening")]
    lenient = Context(upper_threshold=0.0, lower_threshold=0.0)  # everything is "correct"
    assert OfflineRelevanceGrader(embedder).grade(question, passages, lenient).grades[0]["label"] == "correct"
    assert OfflineRelevanceGrader(embedder).grade(question, passages, Context()).grades[0]["label"] == "incorrect"


def grades(*labels: str) -> list[Grade]:
    return [Grade(id=str(i), label=label, score=0.5, reason="") for i, label in enumerate(labels)]  # type: ignore[typeddict-item]


@pytest.mark.parametrize(
    ("labels", "expected"),
    [
        ((), "incorrect"),
        (("incorrect",), "incorrect"),
        (("incorrect", "incorrect", "correct"), "correct"),
        (("incorrect", "ambiguous"), "ambiguous"),
        (("ambiguous", "ambiguous"), "ambiguous"),
        (("correct", "correct"), "correct"),
    ],
)
def test_crag_action_any_policy(labels, expected):
    assert crag_action(grades(*labels), "any") == expected


@pytest.mark.parametrize(
    ("labels", "expected"),
    [
        ((), "incorrect"),
        (("correct", "correct", "correct", "incorrect", "incorrect"), "correct"),  # 60% correct
        (("correct", "correct", "incorrect", "incorrect", "incorrect"), "ambiguous"),  # 40% correct, 60% incorrect
        (("incorrect", "incorrect", "incorrect", "incorrect", "correct"), "incorrect"),  # 80% incorrect
        (("incorrect", "incorrect", "incorrect", "ambiguous", "ambiguous"), "ambiguous"),
    ],
)
def test_crag_action_ratio_policy(labels, expected):
    assert crag_action(grades(*labels), "ratio") == expected


def test_crag_action_rejects_unknown_policy():
    with pytest.raises(ValueError, match="policy"):
        crag_action(grades("correct"), "majority")


# --- knowledge refinement ---------------------------------------------------------------------------------


def test_strip_refiner_keeps_ids_orders_by_score_and_drops_off_topic_strips(embedder, settings):
    passages = [passage("gardening"), passage("refunds"), passage("returns")]
    refinement = StripRefiner(embedder).refine("How long does a refund take?", passages, settings)
    strips = refinement.strips
    assert strips and refinement.llm_calls == 0
    assert strips[0]["doc_id"] == "refunds" and "5-7 business days" in strips[0]["text"]
    assert all(s["doc_id"] != "gardening" for s in strips)  # clearly irrelevant strips are dropped
    assert [s["score"] for s in strips] == sorted((s["score"] for s in strips), reverse=True)
    for s in strips:
        source = passage(s["doc_id"])
        assert s["id"] == source["id"] and s["title"] == source["title"] and s["source"] == source["source"]
        assert s["text"] in source["text"]  # strips are cut from the passage, never rewritten


def test_strip_refiner_respects_count_and_token_budget(embedder):
    passages = [passage(d) for d in DOCS]
    question = "returns refunds errors"
    few = StripRefiner(embedder).refine(question, passages, Context(max_strips=2)).strips
    assert len(few) == 2
    budget = StripRefiner(embedder).refine(question, passages, Context(strip_sentences=1, strip_token_budget=25))
    assert budget.strips and sum(len(s["text"].split()) for s in budget.strips) <= 25
    assert StripRefiner(embedder).refine(question, [], Context()).strips == []


# --- extractive generation --------------------------------------------------------------------------------


def test_extractive_answer_is_copied_and_cites_the_right_document(embedder, settings):
    strips = [strip("refunds"), strip("returns")]
    draft = ExtractiveGenerator(embedder).generate("How many days do I have to return an item?", strips, settings)
    assert draft.llm_calls == 0 and not draft.missing
    assert draft.answer.startswith("You can return most items within 30 days of delivery. [doc_2]")
    assert draft.citations[0] == {"ref": "doc_2", "doc_id": "returns", "title": "Returns", "source": "returns.md",
                                  "quote": "You can return most items within 30 days of delivery."}
    for citation in draft.citations:
        assert f"[{citation['ref']}]" in draft.answer
        assert citation["quote"] in DOCS[citation["doc_id"]][1]  # verbatim from the evidence
    assert len(draft.citations) <= settings.max_answer_sentences


def test_labels_number_documents_in_strip_order(embedder, settings):
    strips = [strip("errors"), strip("refunds"), strip("refunds", "Refunds take 5-7 business days.")]
    draft = ExtractiveGenerator(embedder).generate("How long do refunds take?", strips, settings)
    assert {c["ref"] for c in draft.citations} == {"doc_2"}  # the same document keeps one label


def test_avoid_makes_the_generator_pick_another_sentence(embedder, settings):
    generator, question = ExtractiveGenerator(embedder), "How many days do I have to return an item?"
    first = generator.generate(question, [strip("returns")], Context(max_answer_sentences=1))
    avoided = strip_citations(first.answer)
    second = generator.generate(question, [strip("returns")], Context(max_answer_sentences=1), avoid=[avoided])
    assert second.answer and avoided not in second.answer
    assert strip_citations(second.answer) in DOCS["returns"][1]


def test_unanswerable_question_gets_no_answer_and_says_what_is_missing(embedder, settings):
    strips = [strip("returns"), strip("refunds")]
    draft = ExtractiveGenerator(embedder).generate("Do you ship to Antarctica?", strips, settings)
    assert draft.answer == "" and draft.citations == []
    assert "antarctica" in draft.missing.lower()
    unknown_code = ExtractiveGenerator(embedder).generate("What does error E9999 mean?", [strip("errors")], settings)
    assert unknown_code.answer == "" and "e9999" in unknown_code.missing.lower()
    assert ExtractiveGenerator(embedder).generate("What is E1042?", [], settings).answer == ""


def test_a_noun_naming_a_span_of_time_is_answered_by_one_not_demanded_word_for_word(embedder, settings):
    # "refund window" is answered by "within 45 days": before, the reader declined with "no passage mentions:
    # window" and the answer grader asked the answer to say "window".
    boots = Strip(id="boots#0", doc_id="boots", title="Boots", source="boots.md", score=0.5,
                  text="You can return unworn boots within 45 days of delivery for a full refund.")
    question = "What is our refund window?"
    draft = ExtractiveGenerator(embedder).generate(question, [boots], settings)
    assert draft.answer.startswith("You can return unworn boots within 45 days") and not draft.missing
    graded = OfflineAnswerGrader(embedder).grade(question, draft.answer, settings)
    assert "window" not in graded.missing and graded.term_coverage == 1.0
    without_span = OfflineAnswerGrader(embedder).grade(question, "Refunds go to your card. [doc_1]", settings)
    assert "window" in without_span.missing  # a text stating no span of time does not cover it


# --- groundedness and rule checks -------------------------------------------------------------------------


def test_groundedness_accepts_the_extracted_answer_and_a_faithful_paraphrase(embedder, settings):
    strips = [strip("returns"), strip("refunds")]
    checker = OfflineGroundednessChecker(embedder)
    draft = ExtractiveGenerator(embedder).generate("How many days do I have to return an item?", strips, settings)
    check = checker.check(draft.answer, strips, settings)
    assert check.grounded and check.score == 1.0 and not check.unsupported and not check.flags
    paraphrase = checker.check("Most items can be sent back within 30 days of delivery. [doc_1]", strips, settings)
    assert paraphrase.grounded, paraphrase


def test_groundedness_rejects_a_wrong_number_and_an_invented_name(embedder, settings):
    strips = [strip("returns")]
    checker = OfflineGroundednessChecker(embedder)
    wrong_number = checker.check("You can return most items within 45 days of delivery. [doc_1]", strips, settings)
    assert not wrong_number.grounded and wrong_number.score < settings.thresholds().groundedness
    assert "number 45 not in the evidence" in wrong_number.flags
    assert wrong_number.unsupported == ["You can return most items within 45 days of delivery."]
    invented = checker.check(
        "You can return most items within 30 days of delivery. Our manager Linda Obrien approves every return.",
        strips, settings,
    )
    assert not invented.grounded
    assert invented.unsupported == ["Our manager Linda Obrien approves every return."]
    assert any("Linda Obrien" in f for f in invented.flags)


def test_groundedness_of_an_empty_answer_or_no_evidence(embedder, settings):
    checker = OfflineGroundednessChecker(embedder)
    assert checker.check("", [strip("returns")], settings).score == 0.0
    assert not checker.check("  [doc_1] ", [strip("returns")], settings).grounded
    assert not checker.check("Returns take 30 days.", [], settings).grounded


def test_groundedness_catches_a_flipped_negation(embedder, settings):
    check = OfflineGroundednessChecker(embedder).check("Final-sale items can be returned.", [strip("returns")],
                                                       settings)
    assert not check.grounded


def test_rule_flags_numbers_names_identifiers_and_absolute_words():
    evidence = DOCS["returns"][1] + " " + DOCS["errors"][1]
    assert rule_flags("You can return most items within 30 days of delivery. [doc_1]", evidence) == []
    assert rule_flags("Returns are accepted within thirty days. [doc_2]", evidence) == []  # same value as 30
    flags = rule_flags("Returns take 45 days. Ask Dr Maria Keller. See error E3007 or user_42.", evidence)
    assert "number 45 not in the evidence" in flags
    assert any("Maria Keller" in f for f in flags)
    assert "identifier E3007 not in the evidence" in flags
    assert "identifier user_42 not in the evidence" in flags
    assert "identifier E1042 not in the evidence" not in rule_flags("Error E1042 means a declined card.", evidence)
    absolute = rule_flags("Refunds are always guaranteed and 100% instant for every item.", evidence)
    assert {"absolute word 'always' not in the evidence", "absolute word 'guaranteed' not in the evidence",
            "absolute word 'every' not in the evidence", "absolute word '100%' not in the evidence"} <= set(absolute)
    assert not any("doc_1" in f or "number 1" in f for f in rule_flags("See [doc_1].", evidence))


# --- answer grading ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("question", "kind"),
    [
        ("How many days do I have to return an item?", "number"),
        ("How much does express shipping cost?", "number"),
        ("What is the minimum password length?", "number"),
        ("When does a gift card expire?", "date"),
        ("In what year was the company founded?", "date"),
        ("Who founded the company?", "person"),
        ("Where is the head office?", "place"),
        ("Can I return opened headphones?", "yesno"),
        ("Why was my payment declined?", "reason"),
        ("What does error E1042 mean?", "generic"),
        ("What is our refund window?", "date"),
        ("I got E2001 when checking out. What is wrong?", "generic"),
    ],
)
def test_expected_answer_type(question, kind):
    assert answer_type(question) == kind


def test_answer_grader_prefers_an_answer_with_the_asked_for_number(embedder, settings):
    grader, question = OfflineAnswerGrader(embedder), "How many days do I have to return an item?"
    with_number = grader.grade(question, "You can return most items within 30 days of delivery. [doc_1]", settings)
    without = grader.grade(question, "You can return most items after delivery if they are unused. [doc_1]",
                           settings)
    assert with_number.score > without.score
    assert with_number.useful and with_number.llm_calls == 0
    assert "no number in the answer" in without.missing


def test_answer_grader_names_missing_terms_and_scores_an_empty_answer_zero(embedder, settings):
    grader = OfflineAnswerGrader(embedder)
    off_topic = grader.grade("Is the warranty transferable?", "Tomato plants need six hours of sun.", settings)
    assert not off_topic.useful and "warranty" in off_topic.missing
    empty = grader.grade("How long do refunds take?", "", settings)
    assert empty.score == 0.0 and not empty.useful and empty.missing


# --- query rewriting ----------------------------------------------------------------------------------------


def test_rewriter_expands_the_kb_query_and_keeps_the_web_query_short(settings):
    question = "How long until my refund shows up on my card after you inspect the returned headphones?"
    evidence = [strip("refunds")]
    rewriter = KeywordRewriter()
    kb = rewriter.rewrite(question, question, evidence, "does not mention: warranty", False, settings)
    assert kb.query != question and kb.llm_calls == 0
    assert "refund" in kb.query and "warranty" in kb.query  # question terms plus the grader's missing term
    assert "warranty" in kb.reason
    again = rewriter.rewrite(question, kb.query, evidence, "", False, settings)
    assert again.query != kb.query  # a second round asks for something new
    web = rewriter.rewrite(question, question, evidence, "", True, settings)
    assert 0 < len(web.query.split()) <= 8
    assert "refund" in web.query and "how" not in web.query.split()


def test_an_answer_about_the_opposite_is_not_useful_and_says_why(embedder, settings):
    grader = OfflineAnswerGrader(embedder)
    question = "Which plan has the lowest monthly fee?"
    opposite = grader.grade(question, "The Ultra plan has the highest monthly fee. [doc_1]", settings)
    matching = grader.grade(question, "The Basic plan has the lowest monthly fee. [doc_1]", settings)
    assert not opposite.useful and 'asks about "lowest"; the answer says "highest"' in opposite.missing
    assert matching.score > opposite.score and "asks about" not in matching.missing
    zh = grader.grade("哪个套餐的月费最低？", "Ultra 套餐的月费最高。[doc_1]", settings)
    assert "问题问的是“最低”，回答说的却是“最高”" in zh.missing


def test_an_affirmative_answer_to_a_negated_question_is_not_useful(embedder, settings):
    grader = OfflineAnswerGrader(embedder)
    question = "What damage is not covered by the warranty?"
    flipped = grader.grade(question, "Manufacturing defects are covered by the warranty. [doc_1]", settings)
    direct = grader.grade(question, "Accidental damage is not covered by the warranty. [doc_1]", settings)
    assert not flipped.useful and "asks what is not so" in flipped.missing
    assert "asks 'not'" in flipped.reason and "asks" not in direct.reason
    assert direct.score > flipped.score


# --- stored text vectors: a question embeds only itself ------------------------------------------------------


class Recording:
    """The real embedder under its own name (so an index's stored vectors are served to it), recording every
    text it is asked to embed. A new one has an empty embedding cache."""

    def __init__(self, inner) -> None:
        self.inner, self.name, self.languages = inner, inner.name, inner.languages
        self.texts: list[str] = []

    def embed_documents(self, texts):
        self.texts += texts
        return self.inner.embed_documents(texts)

    def embed_query(self, text):
        return self.embed_documents([text])[0]


@pytest.fixture(scope="module")
def help_center(embedder, tmp_path_factory):
    """The help center as an index with stored vectors, and the same index saved without them."""
    from selfcrag.knowledge.documents import SourceDocument, chunk_documents
    from selfcrag.knowledge.retrieval import HybridIndex

    chunks = chunk_documents([SourceDocument(d, title, f"{d}.md", text) for d, (title, text) in DOCS.items()])
    root = tmp_path_factory.mktemp("help_center")
    HybridIndex.build(chunks, embedder).save(root / "stored")
    HybridIndex.build(chunks, embedder, text_vectors=False).save(root / "plain")
    return root


def ask(directory, question, settings):
    """The graph's output over the index in `directory`, and the texts it embedded. A run reads only the stored
    vectors of the index it searches: one without them gets none, whatever else this process has loaded."""
    from selfcrag import build_graph
    from selfcrag.backend import offline_components
    from selfcrag.knowledge.retrieval import HybridIndex

    recording = Recording(default_embedder())
    index = HybridIndex.load(directory, recording)
    out = build_graph(offline_components(retriever=index, embedder=recording)).invoke(
        {"question": question}, context=settings)
    return out, recording.texts


def test_a_question_against_an_index_with_stored_vectors_embeds_only_the_question(help_center):
    question = "How many days do I have to return an item?"
    settings = Context(max_answer_sentences=1)  # a two-sentence answer is a new text for the answer grader
    out, texts = ask(help_center / "stored", question, settings)
    assert out["decision"] == "answer" and "30 days" in out["answer"]
    # Retrieval embeds the query, the grader the question; every passage, sentence and strip was stored.
    assert set(texts) == {question}
    _, without = ask(help_center / "plain", question, settings)
    assert question in without and len(set(without)) > 10  # what the store saves: passages, sentences, strips


@pytest.mark.parametrize("question", [
    "How many days do I have to return an item?",  # answered
    "What does error E2001 mean?",
    "Do you ship to Antarctica?",  # abstains
])
def test_the_graph_decides_the_same_with_and_without_stored_vectors(help_center, question, settings):
    stored, _ = ask(help_center / "stored", question, settings)
    plain, texts = ask(help_center / "plain", question, settings)
    if any(step["node"] == "refine" for step in plain["trace"]):  # evidence was read (no abstention at round 1)
        assert len(set(texts)) > 1  # the plain index really embedded its strips and sentences
    # Stored sentences and strips were read in their chunk's context (late chunking), the plain index's alone: the
    # similarities, and so confidence and scores, move a little; the decisions must not.
    for key in ("answer", "decision", "citations", "missing"):
        assert stored[key] == plain[key], key
    assert abs(stored["confidence"] - plain["confidence"]) < 0.1


def test_stored_vectors_are_the_chunks_own_and_its_sentences_read_in_context(help_center, embedder):
    from selfcrag.knowledge.retrieval import HybridIndex, index_text
    from selfcrag.knowledge.vector_store import KEYS_FILE, evidence_texts, key

    index = HybridIndex.load(help_center / "stored", embedder)
    store = index.text_vectors
    texts = evidence_texts(chunk.text for chunk in index.chunks)
    assert store is not None and len(store) == np.load(help_center / "stored" / KEYS_FILE).shape[0]
    recording = Recording(embedder)
    embed(recording, texts, store)
    assert recording.texts == []  # every evidence text is served by the store ...
    chunk = index.chunks[0]
    whole = index_text(chunk)

    def stored(text: str) -> np.ndarray:  # this index's own vector (another live index may hold the same text)
        vector = store.get(key(text))
        assert vector is not None, text
        return np.asarray(vector)

    # ... a chunk's text as the model embeds it alone, in any batch ...
    np.testing.assert_allclose(stored(whole), embedder.embed_documents([whole])[0], rtol=0, atol=1e-5)
    # ... and each of its sentences and strips as the mean of its tokens in the chunk's one pass.
    encoding = embedder._tokenizer.encode(whole)
    hidden, _ = embedder._hidden([np.asarray(encoding.ids, dtype=np.int64)])
    offset = whole.find(chunk.text)
    parts = [(text, offset + chunk.text.find(text)) for text in evidence_texts([chunk.text]) if text != whole]
    assert len(parts) > 2
    for text, start in parts:
        rows = [row for row, (a, b) in enumerate(encoding.offsets) if b > a and b > start and a < start + len(text)]
        mean = hidden[0, rows].mean(axis=0)
        np.testing.assert_allclose(stored(text), mean / np.linalg.norm(mean), rtol=0, atol=1e-5)


def test_unknown_texts_other_embedders_and_other_components_miss_the_store(help_center, embedder):
    from selfcrag.backend import offline_components
    from selfcrag.knowledge.embeddings import stored_for_run
    from selfcrag.knowledge.retrieval import HybridIndex

    known = DOCS["gardening"][1].split(". ")[0] + "."  # a sentence of the help center, not of the bundled sample
    index = HybridIndex.load(help_center / "stored", Recording(embedder))
    store = index.text_vectors
    assert store is not None and known in store.lookup(embedder, [known])
    recording = Recording(embedder)
    vectors = embed(recording, [known, "A text no index holds.", known], store)
    assert recording.texts == ["A text no index holds."]  # the rest came from the store
    assert np.array_equal(vectors[0], vectors[2])
    embed(recording, ["A text no index holds."], store)
    assert recording.texts == ["A text no index holds."]  # ... and the unknown one from the cache the next time

    other = Recording(embedder)
    other.name = "all-MiniLM-L6-v2/torch-fp32"  # vectors of another runtime must not be mixed in
    assert store.lookup(other, [known]) == {}
    embed(other, [known], store)
    assert other.texts == [known]

    settings = Context()
    # The components a graph over this index is given read its store; ones given only an embedder read none,
    # though the index is loaded: a store is found through the index a run searches, never by what is loaded.
    assert stored_for_run(offline_components(retriever=index).relevance.embedder, settings) is store
    assert stored_for_run(OfflineRelevanceGrader(embedder).embedder, settings) is None
    direct = Recording(embedder)
    OfflineRelevanceGrader(direct).grade("When do tomatoes need water?", [passage("gardening")], settings)
    assert known in direct.texts


def test_a_possessive_name_is_the_name_the_evidence_gives():
    from selfcrag.text.rules import names, rule_flags

    evidence = "After Mongke died, Kublai Khan and his brother Ariq Boke fought for the throne."
    # "Kublai Khan's" was read as the words kublai, khan and s, and "s" is in no evidence: a true answer flagged.
    assert rule_flags("The man who challenged Kublai Khan's claim was Ariq Boke [doc_1].", evidence) == []
    assert names("It was the Khans' army, then O'Brien's.") == ["Khans", "O'Brien"]
    assert rule_flags("The heir was Kublai Khan's son Zhenjin.", evidence) == ["name 'Zhenjin' not in the evidence"]


class _Leaning:
    """An embedder that finds the question most like any sentence without its identifier: the README's E1042
    answer led with such a sentence ("If an error keeps appearing ..."), which the index's vectors ranked first."""

    name, languages = "leaning", None

    def embed_documents(self, texts: list[str]) -> np.ndarray:
        return np.array([[1.0, 0.0] if "E1042" not in text or text.startswith("What") else [0.6, 0.8]
                         for text in texts], dtype=np.float32)

    def embed_query(self, text: str) -> np.ndarray:
        return self.embed_documents([text])[0]


def test_a_sentence_naming_the_asked_identifier_leads_the_answer(settings):
    evidence = strip("errors", "If an error keeps appearing, contact support and mention the code.\n\n- `E1042` — "
                     "Your payment was declined by your bank or card issuer.")
    draft = ExtractiveGenerator(_Leaning()).generate("What does error E1042 mean?", [evidence], settings)
    assert draft.answer.startswith("`E1042` — Your payment was declined"), draft.answer
