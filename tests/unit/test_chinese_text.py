"""Chinese and mixed Chinese-English text: language, tokens, sentences, numbers, rule checks, coverage and
the offline components on Chinese evidence (with the real local embedder, which cannot read Chinese)."""

from __future__ import annotations

import pytest

from selfcrag.context import Context
from selfcrag.contract import Passage, Strip
from selfcrag.knowledge.embeddings import default_embedder, reads
from selfcrag.language import language_of
from selfcrag.offline.extractive import ExtractiveGenerator, key_terms
from selfcrag.offline.groundedness import OfflineGroundednessChecker
from selfcrag.offline.offline_grading import OfflineAnswerGrader, OfflineRelevanceGrader
from selfcrag.offline.rewrite import KeywordRewriter
from selfcrag.prompts import messages
from selfcrag.text.rules import rule_flags
from selfcrag.text.terms import answer_type, coverage, has_answer_type, question_terms
from selfcrag.text.text import (
    STOPWORDS,
    approx_tokens,
    chinese_number,
    content_words,
    keyword_tokens,
    numbers,
    segment_chinese,
    split_sentences,
    words,
)

RETURNS = ("退货政策", "大多数商品可在签收之日起 30 天内退货。电子产品（例如耳机和音箱）的退货期限较短，"
           "为签收后 15 天。标有“最终销售”的商品不能退货。")
ERRORS = ("错误代码", "- `E1042`：您的付款被银行或发卡机构拒绝。\n- `E2001`：您的收货地址无法验证。")


# --- language --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "language"),
    [
        ("退货期限是多少天？", "zh"),
        ("E1042 是什么意思？", "zh"),
        ("user_123 的订单在哪里查看？", "zh"),
        ("Plus 会员每个月多少钱？", "zh"),
        ("How many days do I have to return an item?", "en"),
        ("What does 会员 mean in the Chinese help center?", "en"),
        ("", "en"),
    ],
)
def test_language_weighs_chinese_characters_against_latin_words(text, language):
    assert language_of(text) == language


# --- tokens ----------------------------------------------------------------------------------------


def test_chinese_runs_become_character_pairs_after_function_words_are_cut_off():
    assert segment_chinese("退货期限是多少天") == ["退货", "货期", "期限", "是", "多少", "天"]
    assert words("退货期限是多少天？") == ["退货", "货期", "期限", "是", "多少", "天"]
    # 地 cuts no run (地址 stays a pair) and stands alone as a stop word only between two cuts
    assert "地址" in words("收货地址无法验证")


def test_identifiers_and_english_stay_whole_inside_chinese_text():
    tokens = words("user_123 的订单在 Account > Orders 里，错误 E1042 与 v2.3 有关")
    assert {"user_123", "e1042", "v2.3", "account", "orders", "订单"} <= set(tokens)


def test_full_width_letters_and_digits_read_as_ascii():
    assert words("Ｅ３００７ 错误") == ["e3007", "错误"]


def test_stop_words_of_both_languages_are_dropped():
    assert {"the", "的", "是", "我们", "多少"} <= STOPWORDS
    assert keyword_tokens("我们的退货期限是多少天") == ["退货", "货期", "期限", "天"]
    assert content_words("What is the return window?") == ["return", "window"]


# --- sentences -------------------------------------------------------------------------------------


def test_sentences_end_at_chinese_punctuation_but_not_inside_quotes():
    text = "大多数商品可以退货。电子产品呢？只有 15 天！请选择“我的包裹在哪里？”进行报告；我们会处理。See Refunds."
    assert split_sentences(text) == [
        "大多数商品可以退货。", "电子产品呢？", "只有 15 天！", "请选择“我的包裹在哪里？”进行报告；", "我们会处理。",
        "See Refunds.",
    ]


def test_english_sentences_split_as_before():
    assert split_sentences("You have 30 days. Dr. Smith agrees! Next.") == ["You have 30 days.", "Dr. Smith agrees!",
                                                                           "Next."]


def test_chinese_characters_count_as_tokens_for_budgets():
    assert approx_tokens("退货期限 is 30 天") == 7
    assert approx_tokens("thirty days to return") == 4


# --- numbers ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("numeral", "value"),
    [("三十", 30), ("十五", 15), ("二十一", 21), ("一百零五", 105), ("两万", 20000), ("三千五百", 3500),
     ("一二三", 123)],
)
def test_chinese_numerals(numeral, value):
    assert chinese_number(numeral) == value


def test_numbers_compare_by_value_across_scripts():
    assert numbers("三十天") == numbers("30天") == numbers("３０天") == numbers("30 days") == numbers("thirty days")
    assert numbers("百分之十的奖励") == {10.0} == numbers("10% 的奖励")
    assert numbers("3万元") == {30000.0}
    assert numbers("错误 E1042，用户 user_123") == set()


def test_words_written_with_numerals_are_no_numbers():
    assert numbers("我们一定会十分认真地处理，万一有问题") == set()


# --- rule checks -----------------------------------------------------------------------------------


def test_rule_checks_compare_chinese_numbers_by_value():
    evidence = "大多数商品可在签收之日起 30 天内退货。"
    assert rule_flags("商品可在签收后三十天内退货。", evidence) == []
    assert rule_flags("商品可在签收后３０天内退货。", evidence) == []
    assert rule_flags("商品可在签收后四十五天内退货。", evidence) == ["number 45 not in the evidence"]


def test_rule_checks_flag_chinese_absolute_words_the_evidence_does_not_use():
    evidence = "大多数商品可在签收之日起 30 天内退货。每个订单只收取一次运费。"
    assert rule_flags("所有商品总是可以在 30 天内退货。", evidence) == [
        "absolute word '总是' not in the evidence", "absolute word '所有' not in the evidence"]
    for word in ("从不", "必须", "一定"):
        assert rule_flags(f"您{word}在 30 天内退货。", evidence) == [f"absolute word {word!r} not in the evidence"]
    assert rule_flags("所有订单都需要签收。", "所有订单都需要签收。") == []


def test_a_lone_chinese_one_is_no_count():
    assert rule_flags("您可以一次退回多件商品。", "您可以退回多件商品。") == []
    assert rule_flags("退货期限为十一天。", "退货期限为 30 天。") == ["number 11 not in the evidence"]
    assert not has_answer_type("number", "每笔订单只收取一次运费。")  # no answer to "满多少钱免运费"
    assert has_answer_type("number", "订单金额满五十美元即可免运费。")


def test_identifiers_in_a_chinese_answer_are_checked():
    assert rule_flags("E1043 表示付款被拒绝。", "E1042：付款被拒绝。") == ["identifier E1043 not in the evidence"]


# --- question terms and coverage -------------------------------------------------------------------


def test_question_terms_drop_question_words_and_light_verbs():
    assert list(question_terms("E1042 是什么意思？")) == ["e1042"]
    assert list(question_terms("退货期限是多少天？")) == ["退货", "货期", "期限", "天"]


def test_coverage_finds_chinese_terms_in_text_cut_another_way():
    assert coverage(question_terms("退货期限是多少天？"), "大多数商品的退货期限为 30 天。") == (1.0, [])


def test_coverage_names_what_is_missing_as_asked_not_as_pairs():
    covered, missing = coverage(question_terms("客服电话号码是多少？"), "请在服务时间拨打客服电话 1-800-555-0188。")
    assert missing == ["号码"] and covered == pytest.approx(2 / 3)
    assert coverage(question_terms("你们能把包裹寄到南极吗？"), "包裹会在一个工作日内发货。")[1] == ["寄到南极"]


@pytest.mark.parametrize(
    ("question", "kind"),
    [
        ("退货期限是多少天？", "number"),
        ("耳机买了几天可以退？", "number"),
        ("周六客服几点开始服务？", "date"),
        ("退款什么时候到账？", "date"),
        ("首席执行官是谁？", "person"),
        ("user_123 的订单在哪里查看？", "place"),
        ("为什么我的付款被拒绝了？", "reason"),
        ("最终销售的商品能退吗？", "yesno"),
        ("E1042 是什么意思？", "generic"),
        ("结账时提示 E2001，是哪里出了问题？", "generic"),
    ],
)
def test_expected_answer_type_of_chinese_questions(question, kind):
    assert answer_type(question) == kind


def test_a_capitalised_word_anywhere_in_a_chinese_question_is_a_key_term():
    assert key_terms("Ultra 会员每个月多少钱？") == {"ultra": "ultra"}
    assert key_terms("Ultra plans cost how much?") == {}  # English capitalises its first word anyway


# --- messages --------------------------------------------------------------------------------------


def test_messages_follow_the_language():
    missing = messages.phrase("not_mentioned", "zh", messages.listing(["南极", "寄到"], "zh"))
    assert messages.abstain(missing, "zh") == (
        "我不知道：现有资料无法回答这个问题。缺少的信息：没有任何段落提到：南极、寄到。")
    assert messages.abstain("no passage mentions: antarctica") == (
        "I don't know: the available evidence does not answer this question. Missing: no passage mentions: antarctica.")
    assert messages.caveat(["有据程度 0.62", "回答中没有数字"], "zh") == (
        "请注意：这个回答可能不完整，或者只有部分内容有依据（有据程度 0.62；回答中没有数字）。")
    assert messages.answer_type("generic", "zh") == ""


def test_the_rewriter_reads_missing_chinese_terms_from_feedback():
    feedback = messages.phrase("not_in_answer", "zh", messages.listing(["退款", "银行卡"], "zh"))
    rewrite = KeywordRewriter().rewrite("退款多久到账？", "退款多久到账？", [], feedback, False, Context())
    assert "银行卡" in rewrite.query and "回答" not in rewrite.query
    web = KeywordRewriter().rewrite("退款多久到账？", "退款", [], "", True, Context())
    assert web.query == "退款多久到账？"


# --- components on Chinese evidence ------------------------------------------------------------------


@pytest.fixture(scope="module")
def embedder():
    return default_embedder()


def strip(doc: tuple[str, str], doc_id: str) -> Strip:
    return Strip(id=f"{doc_id}#0", doc_id=doc_id, title=doc[0], source=f"{doc_id}.md", text=doc[1], score=0.8)


def test_minilm_does_not_read_chinese_so_its_similarity_is_not_used(embedder):
    assert reads(embedder, "How long do refunds take?") and not reads(embedder, "退款需要多久？")
    passages = [Passage(id=f"{d}#0", doc_id=d, chunk_index=0, title=t, source=d, text=x, score=0.5, origin="kb")
                for d, (t, x) in {"returns": RETURNS, "errors": ERRORS}.items()]
    grades = OfflineRelevanceGrader(embedder).grade("电子产品的退货期限是多少天？", passages, Context()).grades
    assert [g["label"] for g in grades] == ["correct", "incorrect"]
    assert "(not used)" in grades[0]["reason"]


def test_extractive_answer_quotes_the_chinese_sentence_with_its_number(embedder):
    generator = ExtractiveGenerator(embedder)
    draft = generator.generate("耳机的退货期限是多少天？", [strip(RETURNS, "zh/returns")], Context())
    assert draft.answer.startswith("电子产品（例如耳机和音箱）的退货期限较短，为签收后 15 天。 [doc_1]")
    assert draft.citations[0]["doc_id"] == "zh/returns"


def test_extractive_generator_says_in_chinese_what_is_missing(embedder):
    draft = ExtractiveGenerator(embedder).generate("E9999 是什么意思？", [strip(ERRORS, "zh/errors")], Context())
    assert draft.answer == "" and draft.missing == "没有任何段落提到：e9999"


def test_groundedness_of_a_copied_chinese_sentence_and_of_a_changed_number(embedder):
    checker = OfflineGroundednessChecker(embedder)
    evidence = [strip(RETURNS, "zh/returns")]
    assert checker.check("大多数商品可在签收之日起 30 天内退货。 [doc_1]", evidence, Context()).grounded
    assert checker.check("大多数商品可在签收之日起三十天内退货。", evidence, Context()).grounded
    changed = checker.check("大多数商品可在签收之日起 45 天内退货。", evidence, Context())
    assert not changed.grounded and changed.flags == ["number 45 not in the evidence"]
    invented = checker.check("退货时需要提供购物小票和身份证复印件。", evidence, Context())
    assert not invented.grounded


def test_answer_grader_wants_a_number_for_a_how_many_question_and_says_so_in_chinese(embedder):
    grader = OfflineAnswerGrader(embedder)
    good = grader.grade("电子产品的退货期限是多少天？", "电子产品的退货期限较短，为签收后 15 天。 [doc_1]", Context())
    bad = grader.grade("电子产品的退货期限是多少天？", "电子产品的退货规则与其他商品不同。 [doc_1]", Context())
    assert good.useful and not bad.useful
    assert bad.missing.startswith("回答中没有数字")
