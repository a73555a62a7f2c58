"""Reads of the Mem0-compatible API, through the facts selectors: a Mem0 memory is a current, active fact."""

from dataclasses import dataclass

from django.http import Http404

from core.errors import ApplicationError
from facts import selectors as facts_selectors
from facts.models import Fact
from facts.selectors import ScoredFact
from tenancy.models import Tenant

from .translation import EventRow, Scope, history_entries

MAX_ID = 2**63 - 1  # a bigint: a longer id cannot name a fact (and must not reach the database)


def memory_not_found() -> ApplicationError:
    return ApplicationError("Memory not found.", code="not_found", status_code=404)


def memory_id_of(memory_id: str) -> int:
    """Our fact id from a Mem0 memory id (its decimal text); anything else names no memory (404)."""
    if not memory_id.isascii() or not memory_id.isdigit() or int(memory_id) > MAX_ID:
        raise memory_not_found()
    return int(memory_id)


def is_memory(fact: Fact) -> bool:
    return fact.status == Fact.Status.ACTIVE and fact.valid_to is None


def memory_get(*, tenant: Tenant, memory_id: str) -> Fact:
    """One memory of `tenant`: a fact of another tenant, or one that is no memory (pending, superseded...), is 404."""
    try:
        fact = facts_selectors.fact_get(tenant=tenant, fact_id=memory_id_of(memory_id))
    except Http404:
        raise memory_not_found() from None
    if not is_memory(fact):
        raise memory_not_found()
    return fact


@dataclass(frozen=True)
class MemoriesPage:
    count: int
    facts: list[Fact]


def memories_page(*, tenant: Tenant, scope: Scope, page: int, page_size: int) -> MemoriesPage:
    """One page (1-based) of the scope's memories, newest first, with how many there are in all."""
    memories = facts_selectors.facts_list(
        tenant=tenant,
        user_id=scope.user_id,
        statuses=[Fact.Status.ACTIVE],
        categories=list(scope.categories) if scope.categories else None,
        agent_id=scope.agent_id,
        validity="current",
        filters=scope.filters,
    ).defer("embedding", "search_text")
    start = (page - 1) * page_size
    return MemoriesPage(count=memories.count(), facts=list(memories[start : start + page_size]))


def memories_search(*, tenant: Tenant, scope: Scope, query: str, limit: int) -> list[ScoredFact]:
    """The scope's memories that best answer `query` (the facts' hybrid search; pending facts left out)."""
    return facts_selectors.facts_search(
        tenant=tenant,
        user_id=scope.user_id,
        query=query,
        limit=limit,
        categories=list(scope.categories) if scope.categories else None,
        agent_id=scope.agent_id,
        filters=scope.filters,
    )


def memory_history(*, tenant: Tenant, memory_id: str) -> list[dict]:
    """A memory's history in Mem0's shape, from the fact's events (which outlive a deleted fact). 404 when the
    tenant has no events for that id."""
    fact_id = memory_id_of(memory_id)
    events = [
        EventRow(event.pk, event.fact_id, event.user_id, event.action, event.before, event.after, event.created_at)
        for event in facts_selectors.fact_events(tenant=tenant, fact_id=fact_id)
    ]
    if not events:
        raise memory_not_found()
    try:
        current = facts_selectors.fact_get(tenant=tenant, fact_id=fact_id).content
    except Http404:
        current = None  # deleted: its events say what it was
    return history_entries(events, current_content=current)


def memory_superseded_ids(*, tenant: Tenant, fact_id: int) -> list[int]:
    """The facts `fact_id` replaced (superseded or merged into it), and the ones they replaced, to the oldest."""
    found: list[int] = []
    frontier = [fact_id]
    while frontier:
        frontier = list(
            Fact.objects.filter(tenant=tenant, superseded_by_id__in=frontier)
            .exclude(pk__in=[fact_id, *found])
            .values_list("pk", flat=True)
        )
        found.extend(frontier)
    return found
