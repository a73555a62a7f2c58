"""Facts stored while the embedder failed get their vector later: one embedding call per batch, exponential backoff
between failed attempts, and each fact that arrived without its vector judged then as a new fact would have been
(the same steps as fact_remember: facts.services.remember)."""

import itertools
import logging
from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from django.conf import settings
from django.db.models import Q
from django.utils import timezone

from ai.errors import AIProviderError
from ai.services import active_embedding_model, embed_texts
from core.backoff import retry_delay
from core.errors import ApplicationError

from ..models import Fact
from .history import SYSTEM
from .remember import fact_judged, fact_written, judged_then_written

logger = logging.getLogger(__name__)

_SKIPPED = "skipped"  # edited, deleted or embedded meanwhile: nothing to do with this vector


@dataclass
class EmbedRun:
    embedded: int = 0  # facts that got their vector
    failed: int = 0  # facts whose attempt failed: tried again after their backoff
    outcomes: Counter = field(default_factory=Counter)  # what the facts judged on arrival did (created, merged, ...)

    def __str__(self) -> str:
        judged = ", ".join(f"{count} {outcome}" for outcome, count in sorted(self.outcomes.items()))
        return f"{self.embedded} embedded, {self.failed} failed" + (f" ({judged})" if judged else "")


def facts_embed_pending(*, fact_ids: list[int]) -> EmbedRun:
    """Embed those of `fact_ids` still awaiting their vector, whenever their next attempt is due (the task queued
    after they were stored makes the first attempt)."""
    run = EmbedRun()
    awaiting = (
        Fact.objects.filter(pk__in=list(fact_ids))
        .exclude(embedding_pending=Fact.EmbeddingPending.NO)
        .select_related("tenant")
        .order_by("pk")
    )
    facts = list(awaiting)
    for start in range(0, len(facts), settings.FACTS_EMBED_BATCH_SIZE):
        _embed_batch(facts[start : start + settings.FACTS_EMBED_BATCH_SIZE], run)
    return run


def facts_embed_due(*, now: datetime | None = None) -> EmbedRun:
    """The sweep: every fact of every tenant awaiting its vector whose next attempt is due, FACTS_EMBED_BATCH_SIZE
    at a time (one embedding call per tenant in a batch). Catches what the queued task missed (the broker was down,
    a worker died) and the retries after backoff. Stops at the first failed call: the provider is still down, and
    the next run (a minute later) tries again."""
    now = now or timezone.now()
    run, after = EmbedRun(), None
    while True:
        due = Fact.objects.filter(embedding_next_attempt_at__lte=now).exclude(
            embedding_pending=Fact.EmbeddingPending.NO  # the partial index fact_embedding_pending
        )
        if after is not None:  # past the batches already tried (a fact skipped this time stays due)
            due = due.filter(
                Q(embedding_next_attempt_at__gt=after[0]) | Q(embedding_next_attempt_at=after[0], pk__gt=after[1])
            )
        batch = list(
            due.select_related("tenant").order_by("embedding_next_attempt_at", "pk")[: settings.FACTS_EMBED_BATCH_SIZE]
        )
        if not batch:
            return run
        after = (batch[-1].embedding_next_attempt_at, batch[-1].pk)
        failed = run.failed
        _embed_batch(batch, run)
        if run.failed > failed:
            return run


def _embed_batch(facts: list[Fact], run: EmbedRun) -> None:
    facts = sorted(facts, key=lambda fact: (fact.tenant_id, fact.pk))
    for _, group in itertools.groupby(facts, key=lambda fact: fact.tenant_id):
        group = list(group)
        try:
            vectors = embed_texts(
                [fact.embedding_text() for fact in group], tenant=group[0].tenant, user_id=[f.user_id for f in group]
            )
        except AIProviderError as exc:
            logger.warning("embedding of %d facts failed, tried again later: %s", len(group), exc.message)
            _postpone(group)
            run.failed += len(group)
            continue
        for fact, vector in zip(group, vectors, strict=True):
            if fact.embedding_pending == Fact.EmbeddingPending.EMBED:
                outcome = _embedded_only(fact, vector)
            else:
                outcome = _judged_on_arrival(fact, vector)
            if outcome != _SKIPPED:
                run.embedded += 1
                if fact.embedding_pending == Fact.EmbeddingPending.JUDGE:
                    run.outcomes[outcome] += 1


def embedding_retry_delay(attempts: int) -> timedelta:
    """How long after its `attempts`-th failed attempt a fact is tried again: doubling from the base, capped."""
    return retry_delay(
        attempts,
        base_seconds=settings.FACTS_EMBED_RETRY_BASE_SECONDS,
        max_seconds=settings.FACTS_EMBED_RETRY_MAX_SECONDS,
    )


def _postpone(facts: list[Fact]) -> None:
    now = timezone.now()
    for fact in facts:
        fact.embedding_attempts += 1
        fact.embedding_next_attempt_at = now + embedding_retry_delay(fact.embedding_attempts)
    # Not an edit of the fact: updated_at stays (bulk_update leaves auto_now fields alone).
    Fact.objects.bulk_update(facts, ["embedding_attempts", "embedding_next_attempt_at"])


def _embedded_only(fact: Fact, vector) -> str:
    """An edited or imported fact takes its vector; judging is for arrivals only. Unless it changed meanwhile."""
    updated = Fact.objects.filter(
        pk=fact.pk, embedding_pending=Fact.EmbeddingPending.EMBED, updated_at=fact.updated_at
    ).update(
        embedding=vector,
        embedding_model=active_embedding_model(),
        embedding_pending=Fact.EmbeddingPending.NO,
        embedding_attempts=0,
        embedding_next_attempt_at=None,
    )
    return "embedded" if updated else _SKIPPED


def _judged_on_arrival(fact: Fact, vector) -> str:
    """Judged as fact_remember would have judged it when it arrived: merged into a twin (kept as history there),
    superseding, held for review with a proposal or a conflict, or simply staying."""
    text = fact.embedding_text()

    def judge():
        current = Fact.objects.filter(pk=fact.pk, embedding_pending=Fact.EmbeddingPending.JUDGE).first()
        if current is None or current.embedding_text() != text:
            return _SKIPPED  # gone, judged by another run, or edited: the vector is not for it
        current.embedding = vector
        return fact_judged(current)

    def write(judged):
        return judged if judged == _SKIPPED else fact_written(judged, actor=SYSTEM)

    try:
        result = judged_then_written(tenant=fact.tenant, user_id=fact.user_id, judge=judge, write=write)
    except ApplicationError as exc:  # its neighbours kept changing: the next sweep tries again
        logger.warning("fact %s embedded but not judged: %s", fact.pk, exc.message)
        _postpone([fact])
        return _SKIPPED
    return result if result == _SKIPPED else result.outcome
