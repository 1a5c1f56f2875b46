"""Every setting in one place: LangGraph's `context_schema`, with the trust boundary between two kinds of setting.

- **Run settings** a caller may choose per run (`graph.invoke(..., context={...})`, a LangGraph server client's
  `context`): k, thresholds, domain and risk, bounds within the operator's caps, language-facing options.
- **Operator settings** only the deployment sets, through `SELFCRAG_<FIELD>` environment variables or
  `build_graph(settings=...)`: model endpoints and names, the index, the embeddings, deadlines, and the caps that
  bound every loop and size a run may ask for. A run that asks for a different value gets `SettingsError`; a run
  that repeats the operator's value (or the field's default, as a form that sends every field does) is accepted.

Each field declares its kind here; `trust_boundary.py` enforces it at run time.

Studio's forms list the settings a run or an assistant may set, each with its description, once (`config_schema`
is empty): run settings, the system prompts and any operator setting the deployment opened to runs. The other
operator settings are not published (`published_settings`). Defaults come from the environment when set, else
from the values below (tuned on the SQuAD 2.0 dev sample that shared/datasets allows).
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
from contextvars import ContextVar
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, ValidationInfo, field_validator, model_validator

from selfcrag.errors import SettingsError
from selfcrag.prompts.system import PROMPTS, template_problem
from selfcrag.quality.calibration import load
from selfcrag.quality.thresholds import Thresholds, thresholds_for
from selfcrag.setting_names import check_environment, no_such_setting

_PUBLISHING: ContextVar[bool] = ContextVar("selfcrag_publishing_context_schema", default=False)
ENV_PREFIX = "SELFCRAG_"  # of the environment variables that set defaults (`Context.from_env`)
OPERATOR_NOTE = "Operator setting (environment or build_graph; a run may not change it). "
ASSISTANT_NOTE = ("Operator setting, per assistant too (an assistant's context on a LangGraph server, the environment "
                  "or build_graph; a run may not change it). ")


def run(default: Any, description: str, *, cap: str = "", **limits: Any) -> Any:
    """A setting a caller may choose per run; `cap` names the operator setting that bounds it."""
    extra: dict[str, Any] = {"scope": "run", **({"cap": cap} if cap else {})}
    note = f" At most `{cap}` (operator)." if cap else ""
    return Field(default, description=description + note, json_schema_extra=extra, **limits)


def operator(default: Any, description: str, **limits: Any) -> Any:
    """A setting only the deployment sets: endpoints, names, paths, deadlines and caps. Not published to a
    LangGraph server's forms unless the deployment opens it to runs (`published_settings`)."""
    return Field(default, description=OPERATOR_NOTE + description, json_schema_extra={"scope": "operator"}, **limits)


def prompt(name: str) -> Any:
    """The system prompt of one model role (prompts/system.py): an operator setting that an assistant may set too,
    so that each assistant on a server answers with its own prompts. Its default is the shipped text."""
    shipped = PROMPTS[name]
    fills = ", ".join(f"{{{p}}}" + (" (needed)" if p in shipped.needs else "") for p in shipped.placeholders)
    description = (f"{ASSISTANT_NOTE}System prompt of {shipped.role}; default: the shipped {shipped.version}. "
                   + (f"Placeholders: {fills}; " if fills else "No placeholders; ") + "a literal brace is {{ or }}.")
    # Studio offers a prompt for editing on the nodes that send it (`langgraph_nodes`, `langgraph_type`).
    node = name.removesuffix("_yes_no").removesuffix("_web")
    nodes: list[Any] = [node, "first_draft"] if node == "generate" else [node]  # plain's draft: a generation too
    return Field(shipped.text, description=description,
                 json_schema_extra={"scope": "operator", "assistant": True, "langgraph_nodes": nodes,
                                    "langgraph_type": "prompt"})  # fmt: skip


UNIT: dict[str, Any] = {"ge": 0.0, "le": 1.0}
FACTORY = re.compile(r"[A-Za-z_]\w*(\.[A-Za-z_]\w*)*:[A-Za-z_]\w*")  # module.path:attribute
OVERRIDE: dict[str, Any] = {"ge": -1.0, "le": 1.0}  # a quality minimum, or negative for "from the preset"


class Context(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    def __init__(self, **values: Any) -> None:
        # One line per bad field, also when LangGraph builds the context from a server client's JSON.
        try:
            super().__init__(**values)
        except ValidationError as exc:
            problems = [no_such_setting(str(e["loc"][0]), Context.model_fields) if e["type"] == "extra_forbidden"
                        else f"{'.'.join(map(str, e['loc'])) or 'settings'}: {e['msg'].removeprefix('Value error, ')}"
                        for e in exc.errors()]  # fmt: skip
            raise SettingsError("invalid settings: " + "; ".join(problems)) from None

    # --- knowledge base -----------------------------------------------------------------------------
    index_dir: str = operator("", "Directory of an index built by `selfcrag ingest`, or the postgresql:// URL of a "
                              "knowledge base in PostgreSQL + pgvector; empty = the bundled sample.")
    retriever_factory: str = operator(
        "",
        "A LangChain VectorStore or retriever searched instead of the index, as `module:attribute` (a class or a "
        "function, e.g. `langchain_chroma:Chroma`), imported on first use and called once with `retriever_kwargs`; "
        "its `embedding_function`, `embedding` or `embeddings` parameter, left out of the kwargs, gets the "
        "`embeddings` setting as a LangChain Embeddings. A VectorStore is searched for the run's k with relevance "
        "scores, a BaseRetriever as it answers (knowledge/configured.py). Empty = `index_dir`.",
    )
    retriever_kwargs: dict[str, Any] = operator(
        {}, "Keyword arguments of `retriever_factory`, e.g. {\"collection_name\": \"docs\", \"persist_directory\": "
        "\"/srv/chroma\"}; a JSON object in the environment (SELFCRAG_RETRIEVER_KWARGS).",
    )
    k: int = run(5, "Passages retrieved per round.", cap="cap_k", ge=1)
    tenant: str = run(
        "",
        "Retrieve only documents whose metadata `tenant` is this value (a filter inside the search: k stays k); "
        "empty = every document. On a server whose identities carry a tenant, the caller's identity sets it and a "
        "run cannot choose another (docs/deployment.md).",
        max_length=200,
    )
    vector_weight: float = run(0.6, "Weight of the normalised FAISS (semantic) score in fusion.", **UNIT)
    keyword_weight: float = run(0.4, "Weight of the normalised BM25 (keyword) score in fusion.", **UNIT)
    agreement_bonus: float = run(0.1, "Added to a chunk's fused score when both retrievers find it.", **UNIT)
    min_similarity: float = run(
        0.2, "Quality gate: drop chunks whose cosine similarity to the query is below this.", **UNIT
    )
    # --- embeddings ---------------------------------------------------------------------------------
    embeddings: str = operator(
        "local",
        "`local`: all-MiniLM-L6-v2 on this machine (offline). `openai:<model>`: an OpenAI-compatible embeddings "
        "endpoint (OPENAI_BASE_URL, OPENAI_API_KEY). An index remembers the embeddings that built it and refuses "
        "others. An embedder passed to build_graph takes precedence.",
    )
    # --- CRAG evaluation ----------------------------------------------------------------------------
    upper_threshold: float = run(0.55, "Relevance at or above this grades a passage `correct`.", **UNIT)
    lower_threshold: float = run(0.35, "Relevance below this grades a passage `incorrect`.", **UNIT)
    crag_policy: Literal["any", "ratio"] = run(
        "any",
        "`any` (the paper): correct if any passage is correct, incorrect if all are. "
        "`ratio`: correct if >=60% correct, incorrect if >=80% incorrect, else ambiguous.",
    )
    # --- knowledge refinement ----------------------------------------------------------------------
    strip_sentences: int = run(2, "Sentences per knowledge strip.", ge=1, le=20)
    max_strips: int = run(6, "Most strips kept for generation.", cap="cap_strips", ge=1)
    strip_every_passage: bool = run(
        False,
        "Model backend: every passage the grader kept gives at least its best strip (within max_strips and the "
        "token budget), though it shares no word with the question: a second hop's passage names the answer, not "
        "the question's words.",
    )
    strip_window: int = run(
        0,
        "Model backend: strips on each side of a kept strip kept with it (within max_strips and the token budget), "
        "so a sentence that goes on from a kept one reaches generation though it shares no word with the question.",
        ge=0,
        le=5,
    )
    strip_token_budget: int = run(
        600, "Most (whitespace) tokens of strips kept for generation.", cap="cap_context_tokens", ge=1
    )
    # --- generation and checks ---------------------------------------------------------------------
    max_answer_sentences: int = run(2, "Offline generator: most evidence sentences in an answer.", ge=1, le=20)
    # --- quality bar: domain preset, risk, per-threshold overrides (quality/thresholds.py) ------------
    domain: Literal["general", "customer_service", "financial", "medical", "legal"] = run(
        "general",
        "Preset of minimum context relevance / groundedness / answer relevance and the cost of a wrong answer "
        "(data/presets.json): general .70/.75/.70, cost 0.75; customer_service .75/.80/.75, cost 1.5; financial "
        ".85/.85/.80, cost 2; medical and legal .90/.90/.85, cost 3.",
    )
    wrong_answer_cost: float = run(
        -1.0,
        "Override: what a wrong answer shown costs, counted in right answers (negative = the domain preset's). "
        "An answer is shown only when its confidence p (the probability it is right) makes p - cost*(1-p) >= 0, "
        "i.e. p >= cost/(1+cost): cost 1 -> 0.5, 3 -> 0.75; within `caveat_band` above that, with a caveat.",
        ge=-1.0,
        le=4.0,
    )
    risk: Literal["low", "normal", "critical"] = run("normal", "Moves every preset minimum by -0.05 / 0 / +0.05.")
    min_context_relevance: float = run(
        -1.0,
        "Override: minimum relevance of the evidence used (negative = from the preset); weaker evidence is "
        "corrected before generating.",
        **OVERRIDE,
    )
    min_groundedness: float = run(
        -1.0,
        "Override: minimum groundedness (negative = from the preset); below it the answer is regenerated, and "
        "never shown (with a calibration that scores ungrounded drafts: shown with a caveat at most).",
        **OVERRIDE,
    )
    min_answer_relevance: float = run(
        -1.0,
        "Override: minimum answer relevance (negative = from the preset); below it the query is rewritten.",
        **OVERRIDE,
    )
    min_confidence: float = run(
        -1.0,
        "Override: minimum confidence (probability the answer is right) for a plain answer (negative = the cost's "
        "floor plus `caveat_band`).",
        **OVERRIDE,
    )
    caveat_band: float = run(
        0.15,
        "Confidence up to this far below its minimum still answers, with a caveat saying what is uncertain; "
        "further below, abstain (or human review). With the minimum from the cost, the band lies above the cost's "
        "floor, so it never shows an answer the cost would withhold. Evidence this far below the minimum context "
        "relevance is corrected before generating.",
        **UNIT,
    )
    # --- bounds (the graph's own counters; never LangGraph's recursion limit) -----------------------
    max_retrieval_rounds: int = run(3, "Most retrieval rounds per run.", cap="cap_retrieval_rounds", ge=1)
    max_generations: int = run(
        2, "Most generations on the same evidence (1 = no regeneration).", cap="cap_generations", ge=1
    )
    max_llm_calls: int = run(
        20, "Model-call budget per run, retries included; no call is made past it.", cap="cap_llm_calls", ge=0
    )
    # --- optional steps -----------------------------------------------------------------------------
    web_search: bool = run(True, "Use web search (Tavily) when TAVILY_API_KEY is set.")
    web_results: int = run(5, "Web results per search.", cap="cap_web_results", ge=1)
    human_review: bool = run(
        False, "Low-confidence answers pause for a person (interrupt) instead of abstaining."
    )
    # --- models -------------------------------------------------------------------------------------
    backend: Literal["auto", "offline", "model"] = operator(
        "auto",
        "Components of the default graph: `auto` = models when OPENAI_API_KEY or OPENAI_BASE_URL is set, else "
        "offline; `offline`; `model`. A graph built with its own components or models ignores it.",
    )
    generator_model: str = operator(
        "openai:gpt-4o-mini", "Chat model that writes answers, as provider:model (e.g. openai:gpt-4o-mini)."
    )
    grader_model: str = operator(
        "", "Chat model of the graders, refiner and rewriter, as provider:model; empty = the generator's model."
    )
    temperature: float = run(0.0, "Generator temperature (graders always run at 0).", ge=0.0, le=2.0)
    base_url: str = operator(
        "",
        "OpenAI-compatible server (vLLM, Ollama, llama.cpp server, LM Studio), e.g. http://localhost:11434/v1; "
        "empty = OPENAI_BASE_URL, else OpenAI. OPENAI_API_KEY is sent only to OPENAI_BASE_URL (or OpenAI); "
        "another server gets SELFCRAG_API_KEY, or no key.",
    )
    verifier: str = operator(
        "",
        "Local verifier (off when empty): a chat model, as provider:model, asked once per shown draft whether the "
        "passage it cites answers the question; its P(yes), calibrated, feeds the confidence. Served at "
        "`verifier_url` (e.g. `python -m selfcrag.llm.local_server --model qwen2.5-coder-1.5b --port 8090`).",
    )
    verifier_url: str = operator(
        "", "OpenAI-compatible server of the `verifier` model, e.g. http://127.0.0.1:8090/v1; empty = OPENAI_BASE_URL, "
        "else OpenAI. It gets SELFCRAG_API_KEY (or no key) unless it is OPENAI_BASE_URL.",
    )
    injection_screen: bool = operator(
        False,
        "Model backend: ask the grader model of every retrieved passage (once per text, kept in the cache) whether "
        "it tells a reader or an AI what to say or do, and remove the sentences it says yes to (llm/screen.py), "
        "beside the detector that needs no model. Off by default: the bundled 0.5B model scores planted and "
        "ordinary sentences alike (docs/quality.md); turn it on with a model that tells them apart.",
    )
    llm_timeout: float = operator(
        30.0, "Seconds one model call may take in all (a deadline, not a read timeout).", gt=0.0
    )
    structured_output: Literal["auto", "json_schema", "function_calling", "json_mode", "prompt"] = operator(
        "auto",
        "How graders get JSON: `auto` tries json_schema, then function calling, then JSON mode, then a plain "
        "prompt, and remembers what the server accepted.",
    )
    grading: Literal["batch", "parallel", "yes_no"] = operator(
        "batch",
        "Model CRAG evaluator: all passages in one call, or one concurrent call each; `yes_no` = one concurrent "
        "call each answered Yes or No, scored P(yes) from the token probabilities where the server gives them "
        "(the label from `upper_threshold` and `lower_threshold`).",
    )
    answer_grading: Literal["json", "yes_no"] = operator(
        "json",
        "Model answer grader: `json` = a score, what the answer leaves out (fed to the query rewrite) and a reason; "
        "`yes_no` = one call answered Yes or No, scored P(yes) from the token probabilities where the server gives "
        "them (useful at the minimum answer relevance), with only the rule checks' findings as what is missing.",
    )
    groundedness_checking: Literal["json", "yes_no"] = operator(
        "json",
        "Model hallucination check: `json` = a verdict for each statement of the answer (the unsupported ones are "
        "fed to the next draft); `yes_no` = one call answered Yes or No, scored P(yes) from the token probabilities "
        "where the server gives them (grounded at the minimum groundedness), with only the rule checks' sentences "
        "named as unsupported. Both fail closed and both yield to the rule checks.",
    )
    question_terms: Literal["checked", "backed", "given"] = operator(
        "checked",
        "Rule checks of the hallucination check: `checked` = every name, number and identifier an answer states "
        "must be in the evidence it cites, the question's own too; `backed` = the question's may be repeated where a "
        "retrieved passage of the run also holds them (a premise only the question states may be false); `given` = "
        "the question's may always be repeated, so an answer restating its premise is left to the checker's verdict "
        "and the confidence. Absolute words are checked either way.",
    )
    contested_check: bool = operator(
        True,
        "Veto a draft that another sentence of the draft, or of a passage it cites, answers differently "
        "(quality/contested.py: what an obeyed planted instruction does to an answer). On tuning data it vetoed "
        "none of the right drafts (benchmarks/results/contested_false_alarms.json). Off for a corpus whose documents "
        "rightly give one question several answers (an abstention then says its evidence answers otherwise).",
    )
    refine_with: Literal["scores", "llm"] = operator(
        "scores",
        "Model backend's knowledge refinement: `scores` = each strip by its passage's retrieval score and its "
        "question terms (no model call), `llm` = the grader model picks the strips.",
    )
    # --- the model roles' system prompts (prompts/system.py): per deployment, or per assistant on a server -----
    route_question_prompt: str = prompt("route_question")
    contextualize_prompt: str = prompt("contextualize")
    grade_documents_prompt: str = prompt("grade_documents")
    grade_documents_yes_no_prompt: str = prompt("grade_documents_yes_no")
    refine_prompt: str = prompt("refine")
    generate_prompt: str = prompt("generate")
    check_hallucination_prompt: str = prompt("check_hallucination")
    check_hallucination_yes_no_prompt: str = prompt("check_hallucination_yes_no")
    grade_answer_prompt: str = prompt("grade_answer")
    grade_answer_yes_no_prompt: str = prompt("grade_answer_yes_no")
    rewrite_query_prompt: str = prompt("rewrite_query")
    rewrite_query_web_prompt: str = prompt("rewrite_query_web")
    verify_prompt: str = prompt("verify")
    task: Literal["auto", "qa", "summarize", "compare", "code"] = run(
        "auto", "Generator task prompt; `auto` picks it from the question."
    )
    answer_mode: Literal["auto", "local", "global"] = run(
        "auto",
        "`local`: answer one specific point from the best evidence; `global`: synthesise across documents; `auto` "
        "picks from the question.",
    )
    few_shot: bool = run(False, "Show the generator short examples of cited answers (small models copy them: a 0.5B "
                         "model answered \"Missing: <the question>\" with them, and the answer without).")
    history_turns: int = run(
        3, "Earlier chat turns (user + assistant) from `messages` the generator sees.", cap="cap_history_turns", ge=0
    )
    context_tokens: int = run(
        1200,
        "Token budget (tiktoken) of the evidence in the generator prompt; the highest-scoring strips are kept.",
        cap="cap_context_tokens",
        ge=1,
    )
    # --- the trust boundary: caps on what a run may ask for, and operator settings opened to runs ------
    cap_k: int = operator(20, "Most passages a run may ask for (k).", ge=1)
    cap_strips: int = operator(20, "Most knowledge strips a run may ask for (max_strips).", ge=1)
    cap_context_tokens: int = operator(
        8000, "Most evidence tokens a run may ask for (strip_token_budget, context_tokens).", ge=1
    )
    cap_retrieval_rounds: int = operator(5, "Most retrieval rounds a run may ask for.", ge=1)
    cap_generations: int = operator(4, "Most generations on the same evidence a run may ask for.", ge=1)
    cap_llm_calls: int = operator(40, "Largest model-call budget a run may ask for (max_llm_calls).", ge=0)
    cap_web_results: int = operator(10, "Most web results a run may ask for.", ge=1)
    cap_history_turns: int = operator(20, "Most earlier chat turns a run may ask the generator to see.", ge=0)
    allow_per_run: tuple[str, ...] = operator(
        (),
        "Operator settings a run may choose after all, e.g. `index_dir` for a server that serves several indexes "
        "(comma-separated in the environment). Model endpoints, names, deadlines and caps can never be opened.",
    )
    max_question_chars: int = operator(
        4000,
        "Longest question accepted, in characters as sent (before control characters are removed); a longer one "
        "fails the run with a one-line error.",
        ge=1,
    )
    max_turn_chars: int = operator(
        4000,
        "Most characters of one earlier chat message a run reads, as sent; a longer one is cut to its first "
        "characters, marked with an ellipsis.",
        ge=1,
    )
    max_history_chars: int = operator(
        16000,
        "Most characters of the conversation (`messages`, the question's own included) a run reads in all: the "
        "newest messages first, each within `max_turn_chars`, the one that passes this cut to what is left; older "
        "ones are left out. Every prompt that shows the conversation "
        "(contextualize, generate), the offline follow-up rewriting and the contradiction check read only these.",
        ge=1,
    )
    # --- bounded calls (llm/calls.py) ---------------------------------------------------------
    run_timeout: float = operator(
        120.0,
        "Seconds one run may take: every model call and web search ends by then, counted from the run's start; "
        "once it is spent, the remaining steps degrade without calling out.",
        gt=0.0,
    )
    web_timeout: float = operator(15.0, "Seconds one web search may take in all (never past the run's deadline).",
                                  gt=0.0)  # fmt: skip

    # --- review queue (selfcrag.store) ---------------------------------------------------------------
    review_band: float = run(
        0.05,
        "With human_review on: an answer whose confidence is within this distance of the minimum confidence "
        "(above or below) goes to a person; 0 = only exact ties.",
        **UNIT,
    )
    review_spread: float = run(
        0.3,
        "With human_review on: an answer whose three triad scores differ by more than this goes to a person; "
        "1 = never for this reason.",
        **UNIT,
    )

    # --- ingestion on the server (indexer.py) ---------------------------------------------------------------
    allow_ingest: bool = operator(
        False,
        "Let runs of the server's `indexer` graph add documents to `index_dir` (SELFCRAG_ALLOW_INGEST=1); off, the "
        "indexer refuses every run and writes nothing. Never opened to runs.",
    )
    # --- size bounds on what ingest reads (knowledge/loaders.py); a file beyond one is skipped with a line ---
    max_ingest_file_bytes: int = operator(
        50_000_000, "Largest file ingest reads, in bytes (checked before reading); a larger one is skipped.", ge=1
    )
    max_ingest_document_chars: int = operator(
        10_000_000, "Longest document text ingest keeps, in characters (read in a stream, stopped past it); a longer "
        "one is skipped.", ge=1,
    )
    max_ingest_unpacked_bytes: int = operator(
        200_000_000, "Most bytes a DOCX may unpack to, and one PDF stream may decompress to; more is skipped as a "
        "decompression bomb.", ge=1,
    )

    # --- search: the FAISS index type (knowledge/vector_index.py) ---------------------------------
    vector_index: Literal["auto", "flat", "hnsw"] = operator(
        "auto",
        "FAISS index `selfcrag ingest` builds for the chunk vectors: `flat` (exact; its cost grows with the corpus), "
        "`hnsw` (approximate neighbour graph, about a millisecond a query at any size), `auto` = flat below "
        "250,000 chunks, else hnsw. Recorded in the index's manifest; loading follows the manifest.",
    )
    exact_search_below: int = operator(
        20_000, "PostgreSQL knowledge base: exact vector search below this many chunks, its HNSW index from it "
        "(pg_index.py; vector_index flat or hnsw forces one).", ge=0,
    )
    # pgvector's HNSW parameters (pg_index.py). Recall@10 on synthetic clustered chunks (pg_retrieval_scale.py) for
    # queries near a chunk: ~1.0 up to 100k chunks; at 1M 0.99 with ef_search 128 or 256, 0.95 at 100 (too near
    # 0.95 for a sample of 100), at 3.5 against 9.8 ms of server CPU for 256. Queries far from every chunk need more.
    pg_hnsw_m: int = operator(
        32, "PostgreSQL knowledge base: links per vector in the HNSW index (pgvector's m), read when an ingest builds "
        "the index: more = better recall and a bigger, slower-to-build index. An index already built keeps its "
        "own; drop selfcrag_kb_chunks_hnsw and ingest to rebuild.", ge=2, le=100,
    )
    pg_hnsw_ef_construction: int = operator(
        64, "PostgreSQL knowledge base: candidates kept while the HNSW index is built (ef_construction, at least "
        "2 x pg_hnsw_m): more = a better graph, a slower build.", ge=4, le=1000,
    )
    pg_hnsw_ef_search: int = operator(
        128, "PostgreSQL knowledge base: candidates an HNSW search keeps (hnsw.ef_search, at least the passages it "
        "asks for): more = recall closer to exact search for queries far from every chunk, at more CPU a query.",
        ge=1, le=1000,
    )

    # --- confidence calibration (quality/calibration.py) ----------------------------------------------
    calibration: str = operator(
        "",
        "Calibration file (from `selfcrag calibrate`) that turns the run's signals into confidence, the "
        "probability that the answer is right; empty = the one shipped for the backend.",
    )

    # --- embedding at ingest (knowledge/minilm.py) -----------------------------------------------
    embed_threads: int = operator(
        0,
        "Threads the local embedding model uses, read when it loads; 0 = the CPUs this process may run on "
        "(its affinity), at most 4.",
        ge=0,
    )
    embed_concurrency: int = operator(
        4, "Requests a remote embeddings endpoint (`openai:<model>`, a LangChain Embeddings) gets at once.", ge=1
    )

    def thresholds(self) -> Thresholds:
        """The run's active minimums: domain preset, moved by risk, then the overrides."""
        return thresholds_for(self)

    @field_validator(*(p.setting for p in PROMPTS.values()))
    @classmethod
    def _serves_its_role(cls, text: str, info: ValidationInfo) -> str:
        """A template that cannot serve its role is refused when the settings are made, not mid-run."""
        if problem := template_problem(str(info.field_name).removesuffix("_prompt"), text):
            raise ValueError(problem)
        return text

    @model_validator(mode="after")
    def _consistent(self) -> Context:
        if self.lower_threshold > self.upper_threshold:
            raise ValueError("need lower_threshold <= upper_threshold")
        spec = self.embeddings.strip()
        if spec != "local" and not (spec.startswith("openai:") and spec.removeprefix("openai:").strip()):
            raise ValueError(f"embeddings must be 'local' or 'openai:<model>', got {self.embeddings!r}")
        if self.retriever_factory and not FACTORY.fullmatch(self.retriever_factory):
            raise ValueError(f"retriever_factory must be module:attribute (e.g. langchain_chroma:Chroma), got "
                             f"{self.retriever_factory!r}")
        if self.retriever_factory and self.index_dir:
            raise ValueError("set index_dir or retriever_factory, not both: each names what the graph searches")
        if self.retriever_kwargs and not self.retriever_factory:
            raise ValueError("retriever_kwargs without retriever_factory: name the factory they are for")
        if unknown := [name for name in self.allow_per_run if name not in OPERATOR_SETTINGS]:
            raise ValueError(f"allow_per_run names no operator setting: {', '.join(unknown)}")
        if never := [name for name in self.allow_per_run if name in NEVER_PER_RUN]:
            raise ValueError(f"allow_per_run cannot open {', '.join(never)}: endpoints, keys and caps stay the "
                             "operator's")
        return self

    @classmethod
    def model_json_schema(cls, *args: Any, **kwargs: Any) -> dict[str, Any]:
        """The settings a run or an assistant may set, with their descriptions: LangGraph publishes this as the
        graph's `context_schema`, and Studio's forms list what it lists (`published_settings`)."""
        token = _PUBLISHING.set(True)
        try:
            schema = super().model_json_schema(*args, **kwargs)
        finally:
            _PUBLISHING.reset(token)
        shown = published_settings()
        schema["properties"] = {n: f for n, f in schema.get("properties", {}).items() if n in shown}
        if "required" in schema:
            schema["required"] = [n for n in schema["required"] if n in shown]
        return schema

    @classmethod
    def __get_pydantic_json_schema__(cls, core_schema: Any, handler: Any) -> Any:
        """By any other road than `model_json_schema`, an empty object: LangGraph's server builds the graph's
        `config_schema` (from `config["configurable"]`) with a TypeAdapter, and would repeat every setting there,
        where selfcrag reads none."""
        if _PUBLISHING.get():
            return handler(core_schema)
        return {"title": "Context", "type": "object", "properties": {},
                "description": "selfcrag reads no settings from config['configurable']: send them as context"}

    @classmethod
    def from_env(cls, **overrides: Any) -> Context:
        """Defaults from SELFCRAG_<FIELD> environment variables, then `overrides` (None = not given). A SELFCRAG_
        variable that names nothing (a misspelling) is said once, with the nearest name."""
        check_environment(cls.model_fields)
        values: dict[str, Any] = {}
        for name in cls.model_fields:
            raw = os.environ.get(f"{ENV_PREFIX}{name.upper()}")
            if raw is not None and raw.strip() != "":
                values[name] = _from_text(name, raw)
        from_environment = dict(values)
        values.update({k: v for k, v in overrides.items() if v is not None})
        try:
            settings = cls(**values)
            settings.check_files()
            return settings.within_caps()
        except SettingsError as exc:  # say which variables the refused values came from
            named = [f"SELFCRAG_{n.upper()}={_shown(v)}" for n, v in from_environment.items()
                     if re.search(rf"(?<!\w){n}(?!\w)", str(exc))]  # fmt: skip
            raise SettingsError(f"{exc}" + (f" (from the environment: {', '.join(named)})" if named else "")) from None

    def within_caps(self) -> Context:
        """The operator's settings with every run setting they left at its default brought within its cap: a
        deployment that sets `cap_llm_calls=10` means runs make at most 10 calls, also those that ask for nothing
        (the default budget is 20). A value the operator set above its own cap is a contradiction, refused."""
        lowered = {}
        for name in Context.model_fields:
            if (cap := field_tag(name, "cap")) and getattr(self, name) > getattr(self, cap):
                if name in self.model_fields_set:
                    raise SettingsError(f"{name}={getattr(self, name)} is above its cap, {cap}={getattr(self, cap)}, "
                                        "in the same settings: lower it or raise the cap")
                lowered[name] = getattr(self, cap)
        return self.model_copy(update=lowered) if lowered else self

    def check_files(self) -> None:
        """The operator's files that a run reads later, checked now, so a file that cannot serve is refused when the
        operator's settings are made, never mid-run. Only here: validators do no I/O, because a client's `context`
        is validated too (LangGraph coerces it into Context before the trust check in `resolve` refuses it), and
        opening a path a client named would let it block the server on a FIFO, fill memory from /dev/zero, or
        learn which files exist."""
        if self.retriever_factory:  # installed, without importing it (a store's package may take seconds)
            module = self.retriever_factory.partition(":")[0]
            try:
                found = importlib.util.find_spec(module) is not None
            except (ImportError, ValueError):  # a parent package missing
                found = False
            if not found:
                raise SettingsError(f"retriever_factory {self.retriever_factory}: no module {module} is installed "
                                    "(install the package that provides it)")
        if self.calibration:
            from selfcrag.errors import CalibrationError
            try:
                load(self.calibration)
            except CalibrationError as exc:
                raise SettingsError(f"calibration: {exc}") from None


def _shown(value: Any, most: int = 80) -> str:
    """A value as an error line quotes it: a prompt of a thousand characters is named by its start."""
    text = repr(value)
    return text if len(text) <= most else text[: most - 3] + "..."


def _from_text(name: str, raw: str) -> Any:
    """An environment value as the field expects it (pydantic parses numbers and booleans from text)."""
    if name == "allow_per_run":
        return tuple(part.strip() for part in raw.split(",") if part.strip())
    if name == "retriever_kwargs":
        try:
            value = json.loads(raw)
        except json.JSONDecodeError as exc:
            raise SettingsError(f"SELFCRAG_RETRIEVER_KWARGS is not JSON ({exc})") from None
        if not isinstance(value, dict):
            raise SettingsError("SELFCRAG_RETRIEVER_KWARGS must be a JSON object of keyword arguments")
        return value
    return raw.strip()


def field_tag(name: str, key: str) -> str:
    """The run/operator scope or the cap recorded on a field (see `run` and `operator`)."""
    extra = Context.model_fields[name].json_schema_extra
    return str(extra.get(key, "")) if isinstance(extra, dict) else ""


OPERATOR_SETTINGS = frozenset(name for name in Context.model_fields if field_tag(name, "scope") == "operator")
# Operator settings an assistant on a LangGraph server may set in its context (the operator writes assistants):
# selfcrag/auth.py refuses a run whose own context changes one, and trust_boundary.resolve takes them from a run
# that passed that check.
ASSISTANT_SETTINGS = frozenset(name for name in Context.model_fields if field_tag(name, "assistant"))


def published_settings() -> frozenset[str]:
    """The settings a LangGraph server publishes in the graph's `context_schema`: run settings, assistant settings
    (the system prompts, for an assistant's form) and the operator settings this deployment opened to runs
    (`allow_per_run`, read from the environment). The other operator settings are left out: a form listing sixty
    fields a run is refused for is noise. The server drops a run's context keys its schema does not list, so
    selfcrag/auth.py refuses a run that sends one with a value of its own (`refuse_unpublished`) before the
    server would drop it: the client still gets the trust boundary's one line, never silence."""
    try:
        opened = set(Context.from_env().allow_per_run)
    except SettingsError:  # the deployment's settings are broken: every run fails on them, publish the fewest
        opened = set()
    return frozenset(n for n in Context.model_fields if n not in OPERATOR_SETTINGS or n in ASSISTANT_SETTINGS
                     or n in opened)  # fmt: skip


# Never opened to runs whatever the operator allows: where keys go, what a run may spend, what it may open.
NEVER_PER_RUN = frozenset({"base_url", "backend", "generator_model", "grader_model", "verifier", "verifier_url",
                           "llm_timeout", "allow_per_run",
                           "run_timeout", "web_timeout", "allow_ingest", "max_question_chars", "max_turn_chars",
                           "max_history_chars", "retriever_factory", "retriever_kwargs", *ASSISTANT_SETTINGS,
                           *(n for n in OPERATOR_SETTINGS if n.startswith("cap_"))})
