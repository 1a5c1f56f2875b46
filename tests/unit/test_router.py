"""The offline router (offline/router.py): conversation is read from what the text does, coverage from the
index's vocabulary, and everything in doubt retrieves."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from selfcrag.offline.router import (
    content_to_look_up,
    direct_reply,
    nothing_to_look_up,
    route_offline,
    unknown_key_terms,
)
from selfcrag.text.text import keyword_tokens

CONVERSATION = [json.loads(line)["question"] for line in (Path(__file__).parents[1] / "data" /
                "route_conversation.jsonl").read_text(encoding="utf-8").splitlines() if line.strip()]  # fmt: skip


class Index:
    """An index that knows the words of its texts and has these titles."""

    def __init__(self, *texts: str, titles: tuple[str, ...] = ()) -> None:
        self.vocabulary = {t for text in texts for t in keyword_tokens(text)}
        self._titles = list(titles)

    def knows(self, token: str) -> bool:
        return token in self.vocabulary

    def titles(self, limit: int) -> list[str]:
        return self._titles[:limit]


SHOP = Index("Returns are accepted within 30 days. Express shipping costs $15. The Plus plan costs $9 a month.",
             "退货期限为签收之日起 30 天。", titles=("Returns policy", "Shipping rates", "退货政策"))  # fmt: skip


@pytest.mark.parametrize("text", ["Hello!", "Thanks!", "Who are you?", "What is your name?", "What can you do?", "你好",
                                  "谢谢", "你是谁？", "你叫什么名字？", "你能帮我吗？", "早上好", "很高兴认识你"])
def test_conversation_has_nothing_to_look_up(text):
    assert nothing_to_look_up(text) and content_to_look_up(text) == []
    assert route_offline(text, SHOP, web=True).route == "direct"


@pytest.mark.parametrize("text", [
    "How many days do I have to return an item?", "Hello, what is your refund policy?", "What is your return window?",
    "Thanks! And how much is express shipping?", "Hello world program", "What is Zorblax?", "退货期限是多少天？",
    "你好，退货期限是多少天？", "手机多少钱？", "Can you tell me about Antarctica?"])  # fmt: skip
def test_anything_with_content_to_look_up_is_not_conversation(text):
    assert not nothing_to_look_up(text) and content_to_look_up(text)
    assert route_offline(text, SHOP, web=False).route == "retrieve"


def test_a_text_that_cannot_be_read_or_is_long_is_not_routed_direct():
    assert not nothing_to_look_up("???")  # the graph's own path says it has no letters to look up
    assert not nothing_to_look_up("مرحبا")  # another script: the graph says the index does not read it
    assert not nothing_to_look_up("so what do you think about all of this when you can and if you would, then?")


def test_the_conversation_set_is_direct_but_for_what_it_names():
    missed = [text for text in CONVERSATION if not nothing_to_look_up(text)]
    assert missed == ["How are you doing today?"]  # "today" is a content word: it retrieves, and abstains


def test_web_search_only_for_a_name_the_index_never_mentions_in_a_question_it_mostly_does_not_know():
    question = "Who founded Zorblax Industries in Paris?"
    assert unknown_key_terms(question, SHOP.knows) == ["zorblax", "industries", "paris"]
    assert route_offline(question, SHOP, web=True).route == "web_search"
    assert route_offline(question, SHOP, web=False).route == "retrieve"  # no web search: the knowledge base
    # One unknown name in a question whose words the index knows: within its coverage (a typo, another spelling).
    assert unknown_key_terms("Does express shipping to Zorblax cost $15?", SHOP.knows) == []
    assert route_offline("How much is the Plus plan a month?", SHOP, web=True).route == "retrieve"


def test_an_index_without_a_vocabulary_never_routes_to_the_web():
    assert route_offline("Who founded Zorblax Industries in Paris?", object(), web=True).route == "retrieve"
    assert route_offline("Hello!", object(), web=True).route == "direct"


def test_the_direct_reply_names_the_topics_in_the_question_language_and_claims_nothing():
    english, chinese = direct_reply("Hello!", SHOP), direct_reply("你好", SHOP)
    assert "Returns policy, Shipping rates" in english and "退货政策" not in english
    assert "退货政策" in chinese and chinese.startswith("你好")
    assert "[doc_" not in english and "I don't know" not in english
    assert direct_reply("Hello!", None).startswith("Hello! I answer questions from my knowledge base")
