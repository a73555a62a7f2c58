"""Erasure of everything a tenant holds about one of its users, across every domain, in one transaction."""

import logging
from dataclasses import dataclass

from django.db import transaction

from ai.services import embedding_cache_erase_user
from core.admin import admin_log_entries
from core.locks import LockNamespace, xact_lock
from core.validation import validate_user_id
from episodes.models import Episode
from episodes.services import episodes_erase_user
from facts.models import Fact, FactConflict, FactEvent
from facts.services import facts_erase_user
from tenancy.models import Tenant

logger = logging.getLogger(__name__)

_BATCH = 10000  # ids per statement


@dataclass(frozen=True)
class ErasureReport:
    facts: int
    fact_events: int
    fact_conflicts: int
    episodes: int
    admin_log_entries: int
    embedding_cache_rows: int
    task_records: int


def user_erase(*, tenant: Tenant, user_id: str, actor: str) -> ErasureReport:
    """Remove everything `tenant` holds about `user_id`: facts (with their vectors), their whole audit trail,
    conflicts, episodes with the records of their extraction tasks, the cached vectors of everything the user said
    or was searched for, and the admin's log lines about those rows (facts deleted before included). Nothing that
    names the user is kept, not even a record of the erasure (the log line carries the tenant and the counts only).

    The tenant's knowledge base stays: documents belong to the tenant, not to one of its users."""
    validate_user_id(user_id)
    with transaction.atomic():
        xact_lock(LockNamespace.USER_MEMORY, tenant.pk, user_id)  # no fact of this user is written half-way through
        facts = facts_erase_user(tenant=tenant, user_id=user_id)
        episodes = episodes_erase_user(tenant=tenant, user_id=user_id)
        cached = embedding_cache_erase_user(tenant=tenant, user_id=user_id)
        log_entries = 0
        for model, ids in [
            (Fact, [*facts.fact_ids, *facts.earlier_fact_ids]),
            (FactConflict, facts.conflict_ids),
            (Episode, episodes.episode_ids),
            (FactEvent, facts.event_ids),
        ]:
            for start in range(0, len(ids), _BATCH):
                log_entries += admin_log_entries(model, ids[start : start + _BATCH]).delete()[0]
    report = ErasureReport(
        facts=len(facts.fact_ids),
        fact_events=len(facts.event_ids),
        fact_conflicts=len(facts.conflict_ids),
        episodes=len(episodes.episode_ids),
        admin_log_entries=log_entries,
        embedding_cache_rows=cached,
        task_records=episodes.task_records,
    )
    logger.info("user erased from tenant %s by %s: %s", tenant.pk, actor, report)
    return report
