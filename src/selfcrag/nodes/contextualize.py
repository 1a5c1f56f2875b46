"""Makes a follow-up question stand alone before retrieval: "And how long does it take to arrive?" after a
question about express shipping becomes a question about express shipping.

Only a question that leans on the conversation is rewritten (offline/contextualize.py says which: it
continues the last one, or names no subject of its own); a first question or one that stands alone passes
untouched, with no model call. The rewriter's `contextualize` does it — one model call on the model backend,
the earlier turns' subject terms carried in offline; a rewriter without one gets the offline way. The
standalone question becomes `question` and `query`, so every later step retrieves, grades and answers it; the
user's words stay in `messages` and in `asked`, and the trace step shows both."""

from __future__ import annotations

from typing import Any

from langgraph.runtime import Runtime

from selfcrag.backend import Components
from selfcrag.context import Context
from selfcrag.nodes import model_notes, spent
from selfcrag.nodes.prepare import history_from
from selfcrag.offline.contextualize import carry_subject, depends_on_thread
from selfcrag.progress import emit
from selfcrag.state import NodeFunction, State
from selfcrag.text.sanitize import clean_text
from selfcrag.trust_boundary import settings_of


def make(components: Components) -> NodeFunction:
    def contextualize(state: State, runtime: Runtime[Context]) -> dict[str, Any]:
        settings = settings_of(runtime.context)
        question = state["question"]
        history = history_from(state, settings)
        why = depends_on_thread(question, history)
        if not why:
            reason = "it stands alone" if history else "the first question of the conversation"
            return {"asked": "", "trace": [{"node": "contextualize", "decision": "as asked", "reason": reason}]}
        rewrite = getattr(components.rewriter, "contextualize", None)
        result = rewrite(question, history, settings) if rewrite else carry_subject(question, history)
        standalone = clean_text(result.query)[: settings.max_question_chars]
        changed = bool(standalone) and standalone != question
        update: dict[str, Any] = spent(result)
        if changed:
            emit("contextualize", f"asked as: {standalone!r}", question=standalone, asked=question)
            update |= {"question": standalone, "query": standalone, "asked": question}
        else:
            update["asked"] = ""
        update["trace"] = [
            {
                "node": "contextualize",
                "decision": "standalone question" if changed else "as asked",
                "reason": f"{why}; {result.reason}",
                "asked": question,
                "question": standalone if changed else question,
                **model_notes(result),
            }
        ]
        return update

    return contextualize
