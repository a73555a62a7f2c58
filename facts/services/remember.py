"""fact_remember: store what was learned and keep the store clean (merge, supersede, or open a conflict).

In two steps, so no slow call runs under a lock or in a transaction: fact_judged (find the neighbours, judge: outside
any transaction when a chat model judges) then fact_written (under the user's memory lock, in the caller's
transaction: re-read the neighbours and write, or answer None when they changed since, to be judged again).
judged_then_written runs the two, judging again when needed; facts_extract and the embedding sweep use the same
steps. Without a chat model the judgement takes milliseconds (one read and the rules), so it is made under the lock,
and nothing needs re-reading."""

import logging
from collections.abc import Callable
from contextvars import ContextVar
from dataclasses import dataclass, field
from datetime import datetime
from typing import TypeVar

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from ai.chat import get_chat
from ai.errors import AIProviderError
from ai.services import active_embedding_model, embed_query
from core.errors import ApplicationError
from core.locks import LockNamespace, xact_lock
from core.validation import validate_metadata, validate_user_id
from tenancy.models import Tenant

from ..content import clean_content, hold_reason, normalised
from ..judging import Judgement, Relation, judge_by_rules, llm_judge
from ..models import Fact, FactEvent
from ..selectors import Neighbour, facts_nearest
from .embed_queue import facts_embed_after_commit
from .history import SYSTEM, record_event, snapshot
from .proposals import Decision, decision_of
from .transitions import FULL_CLEAN_EXCLUDE, conflict_open, fact_merge_into, fact_retire_into, fact_supersede

logger = logging.getLogger(__name__)

JUDGE_ATTEMPTS = 3  # judged again when the facts judged against change before the write, at most this often

Judged_ = TypeVar("Judged_")
Written = TypeVar("Written")


@dataclass(frozen=True)
class RememberResult:
    outcome: str  # created | merged | superseded | pending (a proposal waits for review) | conflict
    fact: Fact  # the new fact, or the one the information was merged into
    superseded_ids: list[int] = field(default_factory=list)
    conflict_ids: list[int] = field(default_factory=list)


@dataclass(frozen=True)
class Judged:
    """A fact with what the judge decided, from reads made outside any transaction."""

    fact: Fact  # unsaved (a new fact), or stored while its vector was missing and now embedded
    decision: Decision | None  # None: no vector (the embedder failed), stored awaiting it and judged when it comes
    seen: tuple[tuple[int, datetime], ...] = ()  # the neighbours judged against (id, updated_at): changed = stale
    under_lock: bool = False  # judged under the memory lock its write holds: nothing can have changed since


# Set while judged_then_written judges under the user's memory lock (no chat model: the judgement is quick).
_JUDGING_UNDER_LOCK = ContextVar("judging_under_lock", default=False)


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
    confidence, or in conflict) changes no other fact: what it would do waits on it as a proposal. While the
    embedder fails the fact is stored without a vector (embedding_pending), found by keywords, and judged when its
    vector arrives (facts.services.embedding)."""
    fact = fact_new(
        tenant=tenant,
        user_id=user_id,
        content=content,
        category=category,
        confidence=confidence,
        source=source,
        pinned=pinned,
        occurred_at=occurred_at,
        metadata=metadata,
        agent_id=agent_id,
        source_episode=source_episode,
        source_messages=source_messages,
    )
    try:
        fact.embedding = embed_query(fact.embedding_text(), tenant=tenant, user_id=fact.user_id)
    except AIProviderError as exc:
        logger.warning("embedding unavailable, fact stored awaiting its vector: %s", exc.message)
    return judged_then_written(
        tenant=tenant,
        user_id=fact.user_id,
        judge=lambda: fact_judged(fact),
        write=lambda judged: fact_written(judged, actor=actor),
    )


def fact_new(
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
    source_episode=None,
    source_messages: list[int] | None = None,
) -> Fact:
    """The unsaved, validated fact with the status it arrives with (active when confident enough), not embedded."""
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
        metadata=validate_metadata(metadata),
        source_episode=source_episode,
        source_messages=source_messages or [],
        embedding_model=active_embedding_model(),
    )
    fact.full_clean(exclude=FULL_CLEAN_EXCLUDE, validate_constraints=False)
    fact.hold_reason = hold_reason(fact.content)
    fact.status = Fact.Status.PENDING if fact.hold_reason else _initial_status(fact)
    return fact


def judged_then_written(
    *,
    tenant: Tenant,
    user_id: str,
    judge: Callable[[], Judged_],
    write: Callable[[Judged_], Written | None],
    attempts: int = JUDGE_ATTEMPTS,
) -> Written:
    """`judge()` outside any transaction (a chat model judges: slow), then `write(judged)` in a transaction holding
    the user's memory lock. `write` answers None, before writing anything, when what was judged changed meanwhile:
    judged again, at most `attempts` times, then 409. Without a chat model `judge()` runs under the lock too."""
    quick = get_chat() is None
    for _ in range(attempts):
        judged = None if quick else judge()
        with transaction.atomic():
            # Writes to one user's memory queue here until commit, so two identical saves cannot both insert.
            xact_lock(LockNamespace.USER_MEMORY, tenant.pk, user_id)
            if quick:
                token = _JUDGING_UNDER_LOCK.set(True)
                try:
                    judged = judge()
                finally:
                    _JUDGING_UNDER_LOCK.reset(token)
            written = write(judged)
        if written is not None:
            return written
    raise ApplicationError(
        "The user's facts kept changing while this fact was judged; try again.", code="conflict", status_code=409
    )


def fact_judged(fact: Fact) -> Judged:
    """What `fact` (with its vector, or without when the embedder failed) would do to the user's facts: the slow
    half of remembering (neighbours, the chat judge), outside any transaction unless no chat model judges."""
    if fact.embedding is None:
        return Judged(fact, None)
    neighbours = _neighbours(fact)
    decision = decision_of(fact, list(zip(neighbours, judge_neighbours(fact.content, neighbours), strict=True)))
    return Judged(fact, decision, _versions(neighbours), under_lock=_JUDGING_UNDER_LOCK.get())


def fact_written(judged: Judged, *, actor: str, written: set[int] | None = None) -> RememberResult | None:
    """Write what was judged: the caller holds the user's memory lock in a transaction. None when the neighbours
    changed since the judgement (judge again). `written` collects the ids a batch of judgements wrote, so a later
    fact of the same batch is checked against the facts as they were when it was judged."""
    fact, decision = judged.fact, judged.decision
    written = set() if written is None else written
    if decision is None:
        return _store_awaiting_vector(fact, actor=actor)
    if not _unchanged(judged, written):
        return None
    if fact.pk is not None:
        stored = Fact.objects.select_for_update().filter(pk=fact.pk).values_list("updated_at", "embedding_pending")
        if stored.first() != (fact.updated_at, Fact.EmbeddingPending.JUDGE):
            return None  # edited, deleted or judged meanwhile: the caller reloads it
        fact.embedding_model = active_embedding_model()
        fact.embedding_pending, fact.embedding_attempts, fact.embedding_next_attempt_at = "", 0, None
    if fact.status == Fact.Status.ACTIVE and not decision.conflicts:
        result = _apply_now(fact, decision, actor=actor)
    else:
        result = _hold_for_review(fact, decision, actor=actor)
    written.update(pk for pk in (result.fact.pk, fact.pk, *(t.fact.pk for t in decision.targets)) if pk is not None)
    return result


def _unchanged(judged: Judged, written: set[int]) -> bool:
    """Whether the neighbours `judged` was judged against are still as they were (read under the lock), leaving out
    the facts this batch wrote itself (a twin it merged into, a fact it inserted)."""
    if judged.under_lock:
        return True
    seen = [version for version in judged.seen if version[0] not in written]
    now = list(_versions(_neighbours(judged.fact, excluding=written)))
    full = len(judged.seen) >= settings.FACTS_JUDGE_CANDIDATES  # else a newcomer past the last one counts too
    return now[: len(seen)] == seen and (full or len(now) == len(seen))


def _neighbours(fact: Fact, *, excluding: set[int] = frozenset()) -> list[Neighbour]:
    # A pending fact is judged against pending facts too, so its proposal can name a twin waiting for review.
    statuses = [Fact.Status.ACTIVE] if fact.status == Fact.Status.ACTIVE else [Fact.Status.ACTIVE, Fact.Status.PENDING]
    skipped = excluding | ({fact.pk} if fact.pk else set())
    neighbours = facts_nearest(
        tenant=fact.tenant,
        user_id=fact.user_id,
        vector=fact.embedding,
        limit=settings.FACTS_JUDGE_CANDIDATES + len(skipped),
        statuses=statuses,
        agent_id=fact.agent_id,
    )
    return [neighbour for neighbour in neighbours if neighbour.fact.pk not in skipped][
        : settings.FACTS_JUDGE_CANDIDATES
    ]


def _versions(neighbours: list[Neighbour]) -> tuple[tuple[int, datetime], ...]:
    return tuple((neighbour.fact.pk, neighbour.fact.updated_at) for neighbour in neighbours)


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


def _store_awaiting_vector(fact: Fact, *, actor: str) -> RememberResult:
    """No vector, so no judgement yet: stored with the status it arrives with (found by keywords meanwhile), changing
    no other fact, and embedded then judged by the task queued after commit (or the sweep, if the queue is down)."""
    fact.embedding, fact.embedding_model = None, ""
    fact.embedding_pending = Fact.EmbeddingPending.JUDGE
    fact.embedding_next_attempt_at = timezone.now()
    _insert(fact, actor=actor)
    facts_embed_after_commit([fact.pk])
    return RememberResult("created", fact)


def _insert(fact: Fact, *, actor: str, proposal: dict | None = None) -> None:
    fact.valid_from = fact.occurred_at or timezone.now()
    fact.proposal = proposal
    fact.save()
    record_event(fact, FactEvent.Action.CREATED, actor, after=snapshot(fact))


def _store(fact: Fact, *, actor: str, proposal: dict | None = None) -> None:
    """A new fact is inserted; one stored awaiting its vector takes it (and any proposal, and the status it ends
    with: an event when that changed)."""
    if fact.pk is None:
        _insert(fact, actor=actor, proposal=proposal)
        return
    before = Fact.objects.get(pk=fact.pk)
    fact.proposal = proposal
    fact.save()
    if before.status != fact.status or proposal:
        record_event(fact, FactEvent.Action.UPDATED, actor, before=snapshot(before), after=snapshot(fact))


def _apply_now(fact: Fact, decision: Decision, *, actor: str) -> RememberResult:
    """An active fact's decision takes effect at once: merged into its twin, or stored (retiring what it supersedes).
    A stored fact merged into its twin is kept as history pointing at it."""
    if decision.action in ("merge", "refine"):
        target = decision.targets[0].fact
        if fact.pk is not None:
            fact.save()  # its vector, as the twin may take it (refine)
        merged = fact_merge_into(target, fact, refined=decision.action == "refine", actor=actor)
        if fact.pk is not None:
            fact_retire_into(fact, merged, actor=actor)
        return RememberResult("merged", merged)
    _store(fact, actor=actor)
    superseded = [fact_supersede(t.fact, fact, t.judgement.reason, actor=actor) for t in decision.targets]
    return RememberResult("superseded" if superseded else "created", fact, superseded_ids=superseded)


def _hold_for_review(fact: Fact, decision: Decision, *, actor: str) -> RememberResult:
    """A fact that is not active changes no other fact: it is stored pending with its decision as a proposal, and the
    contradictions the judge is unsure of open conflicts, which only a person resolves."""
    fact.status = Fact.Status.PENDING
    _store(fact, actor=actor, proposal=decision.as_proposal())
    conflicts = [conflict_open(t.fact, fact, t.judgement.reason, actor=actor) for t in decision.conflicts]
    if conflicts:
        fact.proposal = decision.as_proposal(conflict_ids=[conflict.pk for conflict in conflicts])
        fact.save(update_fields=["proposal", "updated_at"])
        return RememberResult("conflict", fact, conflict_ids=[conflict.pk for conflict in conflicts])
    held = decision.action != "create" or fact.hold_reason  # a proposal, or text that must be read first
    return RememberResult("pending" if held else "created", fact)
