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
from .proposals import Decision, decision_of
from .transitions import FULL_CLEAN_EXCLUDE, conflict_open, fact_merge_into, fact_supersede

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class RememberResult:
    outcome: str  # created | merged | superseded | pending (a proposal waits for review) | conflict
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
    source_messages: list[int] | None = None,
) -> RememberResult:
    """Store what was learned, keeping the store clean: merge duplicates, retire contradicted facts (or open a
    conflict for review when unsure), insert what is new. A fact that is not active (below its auto-approve
    confidence, or in conflict) changes no other fact: what it would do waits on it as a proposal."""
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
        source_messages=source_messages or [],
        embedding_model=active_embedding_model(),
    )
    fact.full_clean(exclude=FULL_CLEAN_EXCLUDE, validate_constraints=False)
    # Before the lock: a slow embedding call must not hold it.
    fact.embedding = embed_query(fact.embedding_text(), tenant=tenant, user_id=fact.user_id)

    with transaction.atomic():
        # Writes to one user's memory queue here until commit, so two identical saves cannot both insert.
        xact_lock(LockNamespace.USER_MEMORY, tenant.pk, fact.user_id)
        fact.status = _initial_status(fact)
        # A pending fact is judged against pending facts too, so its proposal can name a twin waiting for review.
        statuses = (
            [Fact.Status.ACTIVE] if fact.status == Fact.Status.ACTIVE else [Fact.Status.ACTIVE, Fact.Status.PENDING]
        )
        neighbours = facts_nearest(
            tenant=tenant,
            user_id=fact.user_id,
            vector=fact.embedding,
            limit=settings.FACTS_JUDGE_CANDIDATES,
            statuses=statuses,
        )
        decision = decision_of(fact, list(zip(neighbours, judge_neighbours(fact.content, neighbours), strict=True)))
        if fact.status == Fact.Status.ACTIVE and not decision.conflicts:
            return _apply_now(fact, decision, actor=actor)
        return _hold_for_review(fact, decision, actor=actor)


def judge_neighbours(content: str, neighbours: list[Neighbour]) -> list[Judgement]:
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


def _insert(fact: Fact, *, actor: str, proposal: dict | None = None) -> None:
    fact.valid_from = fact.occurred_at or timezone.now()
    fact.proposal = proposal
    fact.save()
    record_event(fact, FactEvent.Action.CREATED, actor, after=snapshot(fact))


def _apply_now(fact: Fact, decision: Decision, *, actor: str) -> RememberResult:
    """An active fact's decision takes effect at once: merged into its twin, or stored (retiring what it supersedes)."""
    if decision.action in ("merge", "refine"):
        target = decision.targets[0].fact
        merged = fact_merge_into(target, fact, refined=decision.action == "refine", actor=actor)
        return RememberResult("merged", merged)
    _insert(fact, actor=actor)
    superseded = [fact_supersede(t.fact, fact, t.judgement.reason, actor=actor) for t in decision.targets]
    return RememberResult("superseded" if superseded else "created", fact, superseded_ids=superseded)


def _hold_for_review(fact: Fact, decision: Decision, *, actor: str) -> RememberResult:
    """A fact that is not active changes no other fact: it is stored pending with its decision as a proposal, and the
    contradictions the judge is unsure of open conflicts, which only a person resolves."""
    fact.status = Fact.Status.PENDING
    _insert(fact, actor=actor, proposal=decision.as_proposal())
    conflicts = [conflict_open(t.fact, fact, t.judgement.reason, actor=actor) for t in decision.conflicts]
    if conflicts:
        fact.proposal = decision.as_proposal(conflict_ids=[conflict.pk for conflict in conflicts])
        fact.save(update_fields=["proposal", "updated_at"])
        return RememberResult("conflict", fact, conflict_ids=[conflict.pk for conflict in conflicts])
    return RememberResult("created" if decision.action == "create" else "pending", fact)
