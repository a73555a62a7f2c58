"""Queueing the embedding of facts stored without their vector, once their rows are committed."""

import logging

from django.db import transaction
from django_q.tasks import async_task

logger = logging.getLogger(__name__)

EMBED_TASK = "facts.tasks.facts_embed"


def facts_embed_after_commit(fact_ids: list[int]) -> None:
    """Queue the embedding of `fact_ids` after commit. A broker that cannot take it fails nothing: the facts are
    stored, and the sweep (facts.tasks.facts_embed_sweep, every minute) embeds them when they are due."""
    if fact_ids:
        transaction.on_commit(lambda: _enqueue(list(fact_ids)), robust=True)


def _enqueue(fact_ids: list[int]) -> None:
    try:
        async_task(EMBED_TASK, fact_ids, group="facts-embed")
    except Exception as exc:  # noqa: BLE001 - whatever the broker (or an inline task) raises, the sweep catches up
        logger.warning("facts %s stored awaiting their vector, the embedding not queued: %s", fact_ids[:10], exc)
