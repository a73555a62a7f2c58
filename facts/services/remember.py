"""fact_remember: store what was learned and keep the store clean (merge, supersede, or open a conflict)."""

import logging
from dataclasses import dataclass, field
from datetime import datetime

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from ai.chat import get_chat
from ai.errors import AIProviderError
from ai.services import active_embedding_model, embed_query
from core.locks import LockNamespace, xact_lock
from core.validation import validate_user_id
from tenancy.models import Tenant

from ..content import clean_content, normalised
from ..judging import Judgement, Relation, judge_by_rules, llm_judge
from ..models import Fact, FactEvent
from ..selectors import Neighbour, facts_nearest
from .history import SYSTEM, record_event, snapshot
from .transitions import FULL_CLEAN_EXCLUDE, conflict_open, fact_supersede

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class RememberResult:
    outcome: str  # created | merged | superseded | conflict
    fact: Fact  # the new fact, or the one the information was merged into
    superseded_ids: list[int] = field(default_factory=list)
    conflict_ids: list[int] = field(default_factory=list)


def fact_remember(
    *,
    tenant: Tenant,
    user_id: str,
    content: str,
    category: str = Fact.Category.OTHER,
    confidence: float = 1.0,
    source: str = Fact.Source.AGENT,
    pinned: bool = False,
    occurred_at: datetime | None = None,
    metadata: dict | None = None,
    agent_id: str = "",
    actor: str = SYSTEM,
    source_episode=None,
) -> RememberResult:
    """Store what was learned, keeping the store clean: merge duplicates, retire contradicted facts (or open a
    conflict for review when unsure), insert what is new."""
    fact = Fact(
        tenant=tenant,
        user_id=validate_user_id(user_id),
        agent_id=agent_id or "",
        content=clean_content(content),
        category=category,
        confidence=confidence,
        source=source,
        pinned=pinned,
        occurred_at=occurred_at,
        metadata=metadata or {},
        source_episode=source_episode,
        embedding_model=active_embedding_model(),
    )
    fact.full_clean(exclude=FULL_CLEAN_EXCLUDE, validate_constraints=False)
    fact.embedding = embed_query(fact.embedding_text())  # before the lock: a slow embedding call must not hold it

    with transaction.atomic():
        # Writes to one user's memory queue here until commit, so two identical saves cannot both insert.
        xact_lock(LockNamespace.USER_MEMORY, tenant.pk, fact.user_id)
        neighbours = facts_nearest(
            tenant=tenant, user_id=fact.user_id, vector=fact.embedding, limit=settings.FACTS_JUDGE_CANDIDATES
        )
        judged = list(zip(neighbours, _judge(fact.content, neighbours), strict=True))

        duplicates = [(n, j) for n, j in judged if j.relation == Relation.DUPLICATE]
        if duplicates:
            return _merge(duplicates[0][0].fact, fact, refined=False, actor=actor)
        contradictions = [(n, j) for n, j in judged if j.relation == Relation.CONTRADICTS]
        if contradictions:
            return _insert_contradicting(fact, contradictions, actor=actor)
        refinements = [(n, j) for n, j in judged if j.relation == Relation.REFINES]
        if refinements:
            return _merge(refinements[0][0].fact, fact, refined=True, actor=actor)
        _insert(fact, actor=actor)
        return RememberResult("created", fact)


def _judge(content: str, neighbours: list[Neighbour]) -> list[Judgement]:
    """How `content` relates to each neighbour: same words first, then the chat model if any, else rules."""
    chat = get_chat()
    answers: dict[int, Judgement] = {}
    if chat is not None:
        asked = [
            index
            for index, neighbour in enumerate(neighbours)
            if neighbour.similarity >= settings.FACTS_LLM_JUDGE_MIN_SIMILARITY
            and normalised(neighbour.fact.content) != normalised(content)
        ]
        try:
            if asked:
                labels = llm_judge(chat, new=content, existing=[neighbours[index].fact.content for index in asked])
                answers = dict(zip(asked, labels, strict=True))
        except AIProviderError as exc:
            # The rules are a real judge too: memory keeps working while the chat model is down.
            logger.warning("chat judge unavailable, judging by rules: %s", exc.message)
            chat = None
    judgements = []
    for index, neighbour in enumerate(neighbours):
        if normalised(neighbour.fact.content) == normalised(content):
            judgements.append(Judgement(Relation.DUPLICATE, 1.0, "same words"))
        elif index in answers:
            judgements.append(answers[index])
        elif chat is not None:
            judgements.append(Judgement(Relation.UNRELATED, 1.0, "not similar enough to ask the chat model"))
        else:
            judgements.append(judge_by_rules(content, neighbour.fact.content, similarity=neighbour.similarity))
    return judgements


def _initial_status(fact: Fact) -> str:
    if fact.source == Fact.Source.MANUAL:
        return Fact.Status.ACTIVE
    threshold = (
        settings.FACTS_EXTRACTED_AUTO_APPROVE_CONFIDENCE
        if fact.source == Fact.Source.EXTRACTED
        else settings.FACTS_AUTO_APPROVE_CONFIDENCE
    )
    return Fact.Status.ACTIVE if fact.confidence >= threshold else Fact.Status.PENDING


def _insert(fact: Fact, *, actor: str, status: str | None = None) -> None:
    fact.status = status or _initial_status(fact)
    fact.valid_from = fact.occurred_at or timezone.now()
    fact.save()
    record_event(fact, FactEvent.Action.CREATED, actor, after=snapshot(fact))


def _merge(existing: Fact, new: Fact, *, refined: bool, actor: str) -> RememberResult:
    """The information is already there: strengthen the existing fact instead of adding a twin."""
    existing = Fact.objects.select_for_update().get(pk=existing.pk)
    before = snapshot(existing)
    # Each independent confirmation closes half of the remaining doubt.
    existing.confidence = round(min(1.0, existing.confidence + (1 - existing.confidence) * new.confidence * 0.5), 4)
    existing.confidence = max(existing.confidence, new.confidence)
    existing.pinned = existing.pinned or new.pinned
    existing.metadata = {**existing.metadata, **new.metadata}
    existing.occurred_at = existing.occurred_at or new.occurred_at
    if refined:  # the new wording says more: keep it, with its vector
        existing.content, existing.embedding = new.content, new.embedding
        existing.embedding_model = new.embedding_model
    existing.save()
    after = {**snapshot(existing), "merged": new.content}
    record_event(existing, FactEvent.Action.MERGED, actor, before=before, after=after)
    return RememberResult("merged", existing)


def _insert_contradicting(fact: Fact, contradictions: list[tuple[Neighbour, Judgement]], *, actor: str):
    sure = [(n.fact, j) for n, j in contradictions if _safe_to_supersede(fact, n.fact, j)]
    unsure = [(n.fact, j) for n, j in contradictions if not _safe_to_supersede(fact, n.fact, j)]
    _insert(fact, actor=actor, status=Fact.Status.PENDING if unsure else None)
    superseded = [fact_supersede(old, fact, judgement.reason, actor=actor) for old, judgement in sure]
    conflicts = [conflict_open(old, fact, judgement.reason, actor=actor) for old, judgement in unsure]
    outcome = "conflict" if conflicts else "superseded"
    return RememberResult(outcome, fact, superseded_ids=superseded, conflict_ids=[c.pk for c in conflicts])


def _safe_to_supersede(new: Fact, old: Fact, judgement: Judgement) -> bool:
    reviewed = old.reviewed_at is not None or old.source == Fact.Source.MANUAL
    return (
        judgement.certainty >= settings.FACTS_SUPERSEDE_CERTAINTY
        and new.confidence >= settings.FACTS_SUPERSEDE_MIN_CONFIDENCE
        and not old.pinned
        and not (new.source == Fact.Source.EXTRACTED and reviewed)
    )
