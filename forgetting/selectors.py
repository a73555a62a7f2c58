"""Reads for forgetting: the policy in force for a tenant and its recorded runs."""

from django.conf import settings
from django.db.models import QuerySet
from django.shortcuts import get_object_or_404

from tenancy.models import Tenant

from .models import ForgetPolicy, ForgetRun

POLICY_FIELDS = (
    "enabled",
    "max_unused_days",
    "min_usage_count",
    "max_facts_per_user",
    "archive_retention_days",
    "exempt_categories",
)


def forget_policy_defaults() -> dict:
    """The policy of every tenant without its own, from the FORGET_* settings (0 days / 0 facts = rule off)."""
    return {
        "enabled": settings.FORGET_ENABLED,
        "max_unused_days": settings.FORGET_MAX_UNUSED_DAYS or None,
        "min_usage_count": settings.FORGET_MIN_USAGE_COUNT,
        "max_facts_per_user": settings.FORGET_MAX_FACTS_PER_USER or None,
        "archive_retention_days": settings.FORGET_ARCHIVE_RETENTION_DAYS,
        "exempt_categories": sorted(set(settings.FORGET_EXEMPT_CATEGORIES)),
    }


def forget_policy_get(*, tenant: Tenant) -> ForgetPolicy:
    """The tenant's own policy, or an unsaved one (pk None) holding the defaults from settings."""
    policy = ForgetPolicy.objects.filter(tenant=tenant).first()
    return policy if policy is not None else ForgetPolicy(tenant=tenant, **forget_policy_defaults())


def forget_runs_list(*, tenant: Tenant, dry_run: bool | None = None) -> QuerySet[ForgetRun]:
    queryset = ForgetRun.objects.filter(tenant=tenant)
    if dry_run is not None:
        queryset = queryset.filter(dry_run=dry_run)
    return queryset.order_by("-id")


def forget_run_get(*, tenant: Tenant, run_id: int) -> ForgetRun:
    return get_object_or_404(ForgetRun.objects.filter(tenant=tenant), pk=run_id)
