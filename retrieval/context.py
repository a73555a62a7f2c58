"""context_build: what an agent calls before every LLM turn — the few facts and passages that matter now,
as prompt-ready text with citations, within a token budget."""

from dataclasses import dataclass, field

from django.conf import settings

from ai.services import active_embedding_model, degraded_without, query_vector_or_none
from core.metrics import CONTEXT_BUILD_SECONDS, timed
from core.quoting import DOCUMENTS_NOTE, DOCUMENTS_TAG, MEMORY_NOTE, MEMORY_TAG, block, block_overhead, neutralised
from core.text import estimate_tokens
from facts.models import Fact
from facts.selectors import ScoredFact, facts_active_count, facts_search
from facts.services import facts_record_usage
from kb.selectors import DocumentHit
from search.filters import Node as FilterNode
from tenancy.models import Tenant

from .sources import DOCUMENT_SOURCES

COLD_START_FACTS = 3
COLD_START_HINT = (
    "You know little about this user yet. Learn their preferences, goals and constraints naturally as you talk, "
    "and save what will matter next time."
)
FACTS_HEADING = "## What you know about this user"
DOCUMENTS_HEADING = "## Relevant documents"
# The relevance floors (facts, documents) measured per embedding model by bench/relevance_floor.py: the highest
# cosine floors that keep LoCoMo recall@10 of /context within 0.005 of none. all-MiniLM-L6-v2, 0.23 both: facts
# 0.708 -> 0.706 while off-topic questions to a LoCoMo user get 0.70 facts instead of 9.98 (English; 86% get none)
# and 0.96 instead of 10 (Chinese; 68%); documents 0.704 -> 0.701, no off-topic English chunk (5 before). A model
# not listed has no floor until measured (a cosine means something else in each model); the settings
# CONTEXT_FACTS_MIN_SIMILARITY / CONTEXT_DOCUMENTS_MIN_SIMILARITY override. Its int8 graph (onnxruntime-int8), 0.25
# both: facts 0.713 -> 0.710, off-topic English facts 9.98 -> 0.42; documents 0.700 -> 0.697, off-topic chunks 0.
MEASURED_FLOORS = {"all-MiniLM-L6-v2": (0.23, 0.23), "all-MiniLM-L6-v2-int8": (0.25, 0.25)}


@dataclass(frozen=True)
class Context:
    text: str
    facts: list[ScoredFact] = field(default_factory=list)  # the facts that made it into `text`
    documents: list[DocumentHit] = field(default_factory=list)  # the passages that made it into `text`
    token_count: int = 0
    cold_start: bool = False
    degraded: list[str] = field(default_factory=list)  # ["embeddings"]: the query had no vector, keywords alone


def fact_citation(fact: Fact) -> str:
    when = fact.occurred_at or fact.valid_from
    return f"fact:{fact.pk}, {when:%Y-%m-%d}" if when else f"fact:{fact.pk}"


@timed(CONTEXT_BUILD_SECONDS)
def context_build(
    *,
    tenant: Tenant,
    user_id: str,
    query: str,
    max_tokens: int | None = None,
    include_documents: bool = True,
    fact_limit: int = 10,
    document_limit: int = 5,
    categories: list[str] | None = None,
    agent_id: str | None = None,
    filters: FilterNode | None = None,
    min_fact_similarity: float | None = None,
    min_document_similarity: float | None = None,
) -> Context:
    """Search facts (and documents) with one query embedding, drop what is not similar enough to the query to be
    worth a line of the prompt (the relevance floor), pack the best into `max_tokens`, and count a use for every
    fact that was injected — and only those. While the query cannot be embedded, both searches rank by keywords
    alone (only what shares a term with the query), there is no similarity to hold against a floor, and the
    context says so (`degraded`).

    categories, agent_id, filters (the filter language's tree): which facts may come back; documents are not
    narrowed by them.
    min_fact_similarity / min_document_similarity: the floors, cosine between the query and the fact or passage
    (relevance_floors() by default; 0 switches a floor off, since cosines can be negative)."""
    max_tokens = max_tokens or settings.CONTEXT_MAX_TOKENS
    fact_floor, document_floor = relevance_floors()
    fact_floor = fact_floor if min_fact_similarity is None else min_fact_similarity
    document_floor = document_floor if min_document_similarity is None else min_document_similarity
    vector = query_vector_or_none(query, tenant=tenant, user_id=user_id)
    keyword_only = vector is None
    facts = facts_search(
        tenant=tenant,
        user_id=user_id,
        query=query,
        limit=fact_limit,
        vector=vector,
        keyword_only=keyword_only,
        categories=categories,
        agent_id=agent_id,
        filters=filters,
    )
    # The hits are active facts of the user: as many as COLD_START_FACTS of them answer without a count's round trip.
    cold_start = len(facts) < COLD_START_FACTS and facts_active_count(tenant=tenant, user_id=user_id) < COLD_START_FACTS
    if fact_floor > 0 and not keyword_only:
        facts = [hit for hit in facts if _fact_above_floor(hit, fact_floor)]
    documents = []
    if include_documents:
        for source in DOCUMENT_SOURCES:
            documents += source(
                tenant=tenant, query=query, vector=vector, keyword_only=keyword_only, limit=document_limit
            )
        if document_floor > 0 and not keyword_only:
            documents = [hit for hit in documents if hit.vector >= document_floor]
        documents.sort(key=lambda hit: -hit.score)

    budget = _Budget(max_tokens)
    lines: list[str] = []
    injected_facts = [hit for hit in facts if budget.take(_fact_line(hit))]
    if injected_facts or cold_start:
        lines.append(FACTS_HEADING)
        if injected_facts:
            lines += block(MEMORY_TAG, MEMORY_NOTE, [_fact_line(hit) for hit in injected_facts])
        if cold_start and budget.take(COLD_START_HINT):
            lines.append(COLD_START_HINT)
    injected_documents = [hit for hit in documents[:document_limit] if budget.take(_document_line(hit))]
    if injected_documents:
        lines += ["", DOCUMENTS_HEADING]
        lines += block(DOCUMENTS_TAG, DOCUMENTS_NOTE, [_document_line(hit) for hit in injected_documents])

    facts_record_usage(tenant=tenant, fact_ids=[hit.fact.pk for hit in injected_facts])
    text = "\n".join(lines)
    return Context(
        text, injected_facts, injected_documents, estimate_tokens(text), cold_start, degraded_without(vector)
    )


def relevance_floors() -> tuple[float, float]:
    """The cosine floors (facts, documents) of /context: the settings where set, else what was measured for the
    active embedding model, else none."""
    measured_facts, measured_documents = MEASURED_FLOORS.get(active_embedding_model(), (0.0, 0.0))
    facts, documents = settings.CONTEXT_FACTS_MIN_SIMILARITY, settings.CONTEXT_DOCUMENTS_MIN_SIMILARITY
    return (measured_facts if facts is None else facts, measured_documents if documents is None else documents)


def _fact_above_floor(hit: ScoredFact, floor: float) -> bool:
    """The floor holds the cosine, not the ranking score: the keyword part of that is scaled to the query's best
    keyword hit (an off-topic question sharing one word with a fact makes it a "full" keyword match), and
    confidence and recency say how much to trust a fact, not whether it answers the question. A fact still awaiting
    its vector (embedding provider down when it was stored) has no cosine: it passes when it shares a term with the
    query, as in a keyword-only search."""
    if hit.fact.embedding is None:
        return hit.keyword > 0
    return hit.vector >= floor


def _fact_line(hit: ScoredFact) -> str:
    return f"- {neutralised(hit.fact.content)} [{fact_citation(hit.fact)}]"


def _document_line(hit: DocumentHit) -> str:
    text = neutralised(hit.text.strip(), keep_headings=True, reserved_headings=(FACTS_HEADING, DOCUMENTS_HEADING))
    return f"- [{hit.citation}]\n{text}"


class _Budget:
    """Hands out tokens in rank order; the section headings' cost is reserved up front."""

    def __init__(self, max_tokens: int):
        headings = estimate_tokens(FACTS_HEADING) + estimate_tokens(DOCUMENTS_HEADING) + 2
        blocks = estimate_tokens(
            block_overhead(MEMORY_TAG, MEMORY_NOTE) + block_overhead(DOCUMENTS_TAG, DOCUMENTS_NOTE)
        )
        self.left = max_tokens - headings - blocks

    def take(self, line: str) -> bool:
        cost = estimate_tokens(line) + 1  # +1 for the line break
        if cost > self.left:
            return False
        self.left -= cost
        return True
