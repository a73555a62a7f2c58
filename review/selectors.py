"""Reads of the review console, scoped to the tenants the staff user is a member of: the queue of pending facts with
what a reviewer needs to decide each in one look, the open conflicts side by side, one fact's story, the counts."""

from dataclasses import dataclass, field
from datetime import datetime

from django.db.models import Count, OuterRef, Q, QuerySet, Subquery

from episodes.models import Episode, EpisodeMessage
from facts.models import Fact, FactConflict, FactEvent
from facts.selectors import Neighbour, facts_neighbours_of, facts_search
from forgetting.models import ForgetRun
from tenancy.models import Tenant
from tenancy.selectors import tenants_visible_to

QUEUE_PAGE = 25
EXCERPT_AROUND = 2  # messages shown before and after the ones a fact came from
NEIGHBOURS = 3
WHY_FOUND_DEPTH = 50  # "why would this be found" ranks the fact among this many hits


@dataclass(frozen=True)
class Excerpt:
    """Messages of the episode a fact came from: its own messages highlighted, with a few around them."""

    episode_id: int
    session_id: str
    messages: list[dict]  # {"index", "role", "content", "timestamp", "source": bool}
    more_before: bool
    more_after: bool


@dataclass
class QueueItem:
    fact: Fact
    excerpt: Excerpt | None = None
    neighbours: list[Neighbour] = field(default_factory=list)

    @property
    def proposal_lines(self) -> list[str]:
        return proposal_lines(self.fact.proposal)


def proposal_lines(proposal: dict | None) -> list[str]:
    """What approving would do, in sentences: "Approving would supersede #43 'Works as a nurse at Hospital La Paz'
    (...)", and the conflicts that must be resolved first."""
    if not proposal:
        return []
    verbs = {"merge": "would merge it into", "refine": "would put its wording in place of",
             "supersede": "would supersede"}  # fmt: skip
    lines = [
        f"Approving {verbs[proposal['action']]} #{target['fact']} '{target['content']}' ({target['reason']}, "
        f"certainty {target['certainty']:.2f})"
        for target in proposal.get("targets", [])
        if proposal["action"] in verbs
    ]
    lines += [
        f"In conflict #{item['conflict']} with #{item['fact']} '{item['content']}' ({item['reason']}): resolve the "
        "conflict to decide it"
        for item in proposal.get("conflicts", [])
        if item.get("conflict")
    ]
    return lines


def visible_tenants(*, user) -> QuerySet[Tenant]:
    return tenants_visible_to(user=user).order_by("name")


def review_queue(
    *,
    user,
    tenant_id: int | None = None,
    user_id: str = "",
    source: str = "",
    category: str = "",
    page: int = 1,
) -> tuple[list[QueueItem], int]:
    """One page of pending facts, oldest first, each with its conversation excerpt and nearest active facts; and
    how many are pending under these filters. A fixed number of queries however long the page is."""
    pending = Fact.objects.filter(tenant__in=visible_tenants(user=user), status=Fact.Status.PENDING)
    pending = _filtered(pending, tenant_id=tenant_id, user_id=user_id, source=source, category=category)
    total = pending.count()
    ordered = pending.select_related("tenant").defer("embedding", "search_text", "search_vector")
    facts = _page(ordered, page)
    items = [QueueItem(fact) for fact in facts]
    excerpts = _excerpts(facts)
    neighbours = facts_neighbours_of(fact_ids=[fact.pk for fact in facts], limit=NEIGHBOURS)
    for item in items:
        item.excerpt = excerpts.get(item.fact.pk)
        item.neighbours = neighbours.get(item.fact.pk, [])
    return items, total


def _filtered(queryset: QuerySet, **filters) -> QuerySet:
    """The queryset narrowed by the filters that are set (tenant_id, user_id, source, category)."""
    return queryset.filter(**{name: value for name, value in filters.items() if value})


def _page(queryset: QuerySet, page: int) -> list:
    """One page of QUEUE_PAGE rows, oldest first."""
    start = (max(page, 1) - 1) * QUEUE_PAGE
    return list(queryset.order_by("created_at", "id")[start : start + QUEUE_PAGE])


def _excerpts(facts: list[Fact]) -> dict[int, Excerpt]:
    """The excerpt of every fact that came from an episode: the episodes, then only the messages shown, one query
    each."""
    episode_ids = {fact.source_episode_id for fact in facts if fact.source_episode_id}
    tenants = {fact.tenant_id for fact in facts}
    episodes = Episode.objects.filter(tenant_id__in=tenants, pk__in=episode_ids)
    episodes = episodes.only("id", "tenant_id", "session_id", "message_count").in_bulk()
    windows = {
        fact.pk: (fact, episodes[fact.source_episode_id], *excerpt_window(episodes[fact.source_episode_id], fact))
        for fact in facts
        if fact.source_episode_id in episodes
    }
    if not windows:
        return {}
    shown = Q()
    for _, episode, first, last in windows.values():
        shown |= Q(tenant_id=episode.tenant_id, episode_id=episode.pk, position__range=(first, last))
    rows = EpisodeMessage.objects.filter(shown).only("episode", "position", "role", "content", "timestamp")
    messages = {(row.episode_id, row.position): row.as_dict() for row in rows}
    excerpts = {}
    for fact_id, (fact, episode, first, last) in windows.items():
        shown_messages = [
            {**messages[episode.pk, index], "index": index, "source": index in fact.source_messages}
            for index in range(first, last + 1)
            if (episode.pk, index) in messages
        ]
        excerpts[fact_id] = Excerpt(
            episode.pk, episode.session_id, shown_messages, first > 0, last < episode.message_count - 1
        )
    return excerpts


def excerpt_window(episode: Episode, fact: Fact) -> tuple[int, int]:
    """The first and last message shown around the messages a fact came from."""
    sources, count = fact.source_messages, episode.message_count
    if sources:
        return max(min(sources) - EXCERPT_AROUND, 0), min(max(sources) + EXCERPT_AROUND, count - 1)
    return max(count - 1 - 2 * EXCERPT_AROUND, 0), count - 1  # extracted before provenance was kept: the end


@dataclass
class ConflictItem:
    conflict: FactConflict
    existing_excerpt: Excerpt | None = None
    new_excerpt: Excerpt | None = None

    @property
    def sides(self) -> list[tuple[str, Fact, Excerpt | None]]:
        return [
            ("existing", self.conflict.existing_fact, self.existing_excerpt),
            ("new", self.conflict.new_fact, self.new_excerpt),
        ]


def review_conflicts(
    *, user, tenant_id: int | None = None, user_id: str = "", page: int = 1
) -> tuple[list[ConflictItem], int]:
    """One page of open conflicts, oldest first, both facts with their provenance, and how many are open under
    these filters: a fixed number of queries."""
    conflicts = FactConflict.objects.filter(
        tenant__in=visible_tenants(user=user), status=FactConflict.Status.OPEN
    ).select_related("tenant", "existing_fact", "new_fact")
    conflicts = _filtered(conflicts, tenant_id=tenant_id, user_id=user_id)
    total = conflicts.count()
    heavy = ("existing_fact__embedding", "new_fact__embedding", "existing_fact__search_text", "new_fact__search_text")
    conflicts = _page(conflicts.defer(*heavy), page)
    excerpts = _excerpts([fact for conflict in conflicts for fact in (conflict.existing_fact, conflict.new_fact)])
    items = [
        ConflictItem(conflict, excerpts.get(conflict.existing_fact_id), excerpts.get(conflict.new_fact_id))
        for conflict in conflicts
    ]
    return items, total


@dataclass(frozen=True)
class WhyFound:
    query: str
    rank: int | None  # 1-based among the first WHY_FOUND_DEPTH hits; None when not among them
    score: float = 0.0
    vector: float = 0.0
    keyword: float = 0.0
    decay: float = 1.0
    top: list = field(default_factory=list)  # the hits ranked above it (ScoredFact), for comparison


@dataclass(frozen=True)
class EventLine:
    """One event of a fact's history, with the fields it changed: (name, before, after)."""

    event: FactEvent
    changes: list[tuple[str, object, object]]


def event_line(event: FactEvent) -> EventLine:
    before, after = event.before or {}, event.after or {}
    names = [name for name in dict.fromkeys([*after, *before]) if before.get(name) != after.get(name)]
    return EventLine(event, [(name, before.get(name), after.get(name)) for name in names])


@dataclass
class FactStory:
    fact: Fact
    events: list[EventLine]
    supersedes: list[Fact]  # facts it retired or took in
    superseded_by: list[Fact]  # the chain of facts that replaced it, nearest first
    excerpt: Excerpt | None
    conflicts: list[FactConflict]
    why: WhyFound | None = None


def review_fact(*, user, fact_id: int, query: str = "") -> FactStory | None:
    """One fact of a visible tenant with its whole story (None for any other fact): events newest first with
    before/after, what it superseded and what superseded it, its conversation, its conflicts, and where a query
    would rank it."""
    fact = (
        Fact.objects.filter(tenant__in=visible_tenants(user=user), pk=fact_id)
        .select_related("tenant", "source_episode", "superseded_by")
        .first()
    )
    if fact is None:
        return None
    events = [
        event_line(event)
        for event in FactEvent.objects.filter(tenant=fact.tenant, fact_id=fact.pk).order_by("-created_at", "-id")
    ]
    supersedes = list(Fact.objects.filter(tenant=fact.tenant, superseded_by=fact).order_by("id"))
    chain, seen, cursor = [], {fact.pk}, fact.superseded_by
    while cursor is not None and cursor.pk not in seen and len(chain) < 20:
        chain.append(cursor)
        seen.add(cursor.pk)
        cursor = cursor.superseded_by
    excerpt = _excerpts([fact]).get(fact.pk)
    conflicts = list(
        FactConflict.objects.filter(tenant=fact.tenant)
        .filter(Q(existing_fact=fact) | Q(new_fact=fact))
        .select_related("existing_fact", "new_fact")
        .order_by("-created_at")
    )
    story = FactStory(fact, events, supersedes, chain, excerpt, conflicts)
    if query.strip():
        story.why = _why_found(fact, query.strip())
    return story


def _why_found(fact: Fact, query: str) -> WhyFound:
    hits = facts_search(
        tenant=fact.tenant,
        user_id=fact.user_id,
        query=query,
        limit=WHY_FOUND_DEPTH,
        include_pending=True,
        mmr_lambda=1.0,  # the plain ranking: diversity re-ranking would move the fact for reasons of its peers
    )
    for rank, hit in enumerate(hits, start=1):
        if hit.fact.pk == fact.pk:
            return WhyFound(query, rank, hit.score, hit.vector, hit.keyword, hit.decay, hits[: rank - 1][:5])
    return WhyFound(query, None, top=hits[:5])


@dataclass(frozen=True)
class TenantCounts:
    tenant: Tenant
    pending_facts: int
    open_conflicts: int
    failed_extractions: int
    last_forget_run: datetime | None
    last_forget_status: str


def review_counts(*, user) -> list[TenantCounts]:
    """Per visible tenant, what waits for a person: one query for all tenants."""

    def count(queryset) -> Subquery:
        return Subquery(
            queryset.filter(tenant=OuterRef("pk")).order_by().values("tenant").annotate(n=Count("pk")).values("n")
        )

    runs = ForgetRun.objects.filter(tenant=OuterRef("pk"), dry_run=False).order_by("-started_at", "-id")
    tenants = visible_tenants(user=user).annotate(
        pending_facts=count(Fact.objects.filter(status=Fact.Status.PENDING)),
        open_conflicts=count(FactConflict.objects.filter(status=FactConflict.Status.OPEN)),
        failed_extractions=count(Episode.objects.filter(extraction_status=Episode.ExtractionStatus.FAILED)),
        last_forget_run=Subquery(runs.values("started_at")[:1]),
        last_forget_status=Subquery(runs.values("status")[:1]),
    )
    return [
        TenantCounts(
            tenant,
            tenant.pending_facts or 0,
            tenant.open_conflicts or 0,
            tenant.failed_extractions or 0,
            tenant.last_forget_run,
            tenant.last_forget_status or "",
        )
        for tenant in tenants
    ]
