"""Shared builders for the forgetting tests: facts of a chosen age and use, and a fixed clock."""

from datetime import timedelta

import pytest
from django.utils import timezone

from facts.models import Fact
from facts.services import facts_import


@pytest.fixture
def now():
    """The moment the tests measure ages from; sweeps get `now + days` instead of sleeping. A minute ahead of the
    wall clock, so that everything a test writes happened before it, as in real life."""
    return timezone.now() + timedelta(minutes=1)


@pytest.fixture(autouse=True)
def policy_settings(settings):
    """A known default policy, whatever the environment says."""
    settings.FORGET_ENABLED = True
    settings.FORGET_MAX_UNUSED_DAYS = 90
    settings.FORGET_MIN_USAGE_COUNT = 3
    settings.FORGET_MAX_FACTS_PER_USER = 1000
    settings.FORGET_ARCHIVE_RETENTION_DAYS = 30
    settings.FORGET_EXEMPT_CATEGORIES = []
    settings.FORGET_BATCH_SIZE = 10000
    settings.FORGET_THROTTLE = 0.0
    return settings


def add(tenant, *contents: str, user_id: str = "u1", **fields) -> list[Fact]:
    """Store facts as given (no merging), embedded, one per content."""
    return facts_import(
        tenant=tenant, facts=[{"user_id": user_id, "content": content, **fields} for content in contents], actor="test"
    )


def age(fact: Fact, now, *, days: float, used: int = 0, used_days_ago: float | None = None) -> Fact:
    """Make `fact` look written `days` before `now`, used `used` times, last `used_days_ago` days before `now`."""
    written = now - timedelta(days=days)
    Fact.objects.filter(pk=fact.pk).update(
        created_at=written,
        updated_at=written,
        usage_count=used,
        last_used_at=None if used_days_ago is None else now - timedelta(days=used_days_ago),
    )
    fact.refresh_from_db()
    return fact


def status_of(fact: Fact) -> str | None:
    """The fact's status now, or None once it is purged."""
    return Fact.objects.filter(pk=fact.pk).values_list("status", flat=True).first()
