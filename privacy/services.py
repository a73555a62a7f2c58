"""Erasure of everything a tenant holds about one of its users, across every domain, in one transaction."""

import logging
from dataclasses import dataclass

from django.db import transaction

from core.admin import admin_log_entries
from core.locks import LockNamespace, xact_lock
from core.validation import validate_user_id
from episodes.models import Episode
from episodes.services import episodes_erase_user
from facts.models import Fact, FactConflict, FactEvent
from facts.services import facts_erase_user
from tenancy.models import Tenant

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class ErasureReport:
    facts: int
    fact_events: int
    fact_conflicts: int
    episodes: int
    admin_log_entries: int


def user_erase(*, tenant: Tenant, user_id: str, actor: str) -> ErasureReport:
    """Remove everything `tenant` holds about `user_id`: facts (with their vectors), their whole audit trail,
    conflicts, episodes, and the admin's log lines about those rows. Nothing that names the user is kept, not
    even a record of the erasure (the log line carries the tenant and the counts only)."""
    validate_user_id(user_id)
    with transaction.atomic():
        xact_lock(LockNamespace.USER_MEMORY, tenant.pk, user_id)  # no fact of this user is written half-way through
        facts = facts_erase_user(tenant=tenant, user_id=user_id)
        episode_ids = episodes_erase_user(tenant=tenant, user_id=user_id)
        log_entries = 0
        for model, ids in [
            (Fact, facts.fact_ids),
            (FactConflict, facts.conflict_ids),
            (Episode, episode_ids),
            (FactEvent, facts.event_ids),
        ]:
            for start in range(0, len(ids), 10000):
                log_entries += admin_log_entries(model, ids[start : start + 10000]).delete()[0]
    report = ErasureReport(
        facts=len(facts.fact_ids),
        fact_events=len(facts.event_ids),
        fact_conflicts=len(facts.conflict_ids),
        episodes=len(episode_ids),
        admin_log_entries=log_entries,
    )
    logger.info("user erased from tenant %s by %s: %s", tenant.pk, actor, report)
    return report
