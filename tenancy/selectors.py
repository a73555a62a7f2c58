from django.db.models import QuerySet
from django.shortcuts import get_object_or_404

from .keys import KEY_PREFIX, api_key_hash
from .models import ApiKey, Tenant


def api_key_find_active(*, key: str) -> ApiKey | None:
    """The live key matching `key`, with its tenant; None for unknown, revoked or inactive-tenant keys."""
    if not key.startswith(KEY_PREFIX):
        return None
    return (
        ApiKey.objects.select_related("tenant")
        .filter(key_hash=api_key_hash(key), revoked_at__isnull=True, tenant__is_active=True)
        .first()
    )


def tenant_get_by_name(*, name: str) -> Tenant | None:
    return Tenant.objects.filter(name=name).first()


def tenants_visible_to(*, user) -> QuerySet[Tenant]:
    """Superusers see every tenant; other staff see the tenants they are members of."""
    if user.is_superuser:
        return Tenant.objects.all()
    return Tenant.objects.filter(memberships__user=user)


def tenants_active() -> QuerySet[Tenant]:
    """Every active tenant, by id: what maintenance jobs (the daily forgetting sweep) visit, one tenant at a time."""
    return Tenant.objects.filter(is_active=True).order_by("pk")


def tenant_get(*, tenant_id: int) -> Tenant | None:
    return Tenant.objects.filter(pk=tenant_id).first()


def api_keys_list(*, tenant: Tenant) -> QuerySet[ApiKey]:
    return ApiKey.objects.filter(tenant=tenant)


def api_key_get(*, tenant: Tenant, key_id: int) -> ApiKey:
    """One key of `tenant`; Http404 for a key of another tenant, as for one that does not exist."""
    return get_object_or_404(api_keys_list(tenant=tenant), pk=key_id)
