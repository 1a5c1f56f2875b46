"""The forged thread state of issue 23 finding 2, shared by the in-process and the server tests: counters a client
wrote to make its run go on past every bound, on an otherwise fresh start as `prepare` would leave it."""

QUESTION = "How many days do I have to return an item?"
CAP = 10
FORGED = {"llm_calls": -100000, "tokens": -5, "retrieval_rounds": -40, "generations": -40}
RESTART = {"question": QUESTION, "query": QUESTION, "seen": [], "queries": [], "evidence": [], "knowledge": [],
           "answer": "", "drafts": [], "documents": [], "run_ledger": "made-up",
           "trace": [{"node": "prepare", "decision": "start", "reason": "forged", "question": QUESTION}]}
