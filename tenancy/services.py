import secrets
from dataclasses import dataclass

from django.contrib.auth import get_user_model
from django.db import transaction
from django.utils import timezone

from core.errors import ApplicationError

from .keys import KEY_PREFIX, api_key_generate, api_key_hash
from .models import ApiKey, Tenant, TenantMembership
from .scopes import all_scopes, scopes_parse
from .selectors import api_key_find_active


@dataclass(frozen=True)
class IssuedKey:
    api_key: ApiKey
    key: str  # the only time the clear key exists; it is never stored


def tenant_create(*, name: str) -> tuple[Tenant, IssuedKey]:
    """Create a tenant and its first API key."""
    name = name.strip()
    with transaction.atomic():
        if Tenant.objects.filter(name=name).exists():
            raise ApplicationError(f"A tenant named {name!r} already exists.", code="tenant_exists")
        tenant = Tenant(name=name)
        tenant.full_clean()
        tenant.save()
        issued = api_key_create(tenant=tenant, name="default", scopes=all_scopes())
    return tenant, issued


def tenant_update(*, tenant: Tenant, name: str | None = None, is_active: bool | None = None) -> Tenant:
    """Rename a tenant, or switch it off (its API keys stop working) and on again."""
    with transaction.atomic():
        tenant = Tenant.objects.select_for_update().get(pk=tenant.pk)
        if name is not None:
            name = name.strip()
            if Tenant.objects.filter(name=name).exclude(pk=tenant.pk).exists():
                raise ApplicationError(f"A tenant named {name!r} already exists.", code="tenant_exists")
            tenant.name = name
        if is_active is not None:
            tenant.is_active = is_active
        tenant.full_clean()
        tenant.save()
    return tenant


def api_key_create(*, tenant: Tenant, name: str = "", scopes: str | list[str] | None = None) -> IssuedKey:
    """A new key of `tenant` with these scopes (tenancy.scopes; memory:read and memory:write when none are given)."""
    key = api_key_generate()
    api_key = ApiKey(
        tenant=tenant,
        name=name,
        prefix=key[: len(KEY_PREFIX) + 8],
        key_hash=api_key_hash(key),
        scopes=scopes_parse(scopes),
    )
    api_key.full_clean()
    with transaction.atomic():
        api_key.save()
    return IssuedKey(api_key=api_key, key=key)


def api_key_scopes_set(*, api_key: ApiKey, scopes: str | list[str]) -> ApiKey:
    """Change what a key may do; takes effect on its next request."""
    with transaction.atomic():
        api_key = ApiKey.objects.select_for_update().get(pk=api_key.pk)
        api_key.scopes = scopes_parse(scopes)
        api_key.full_clean()
        api_key.save(update_fields=["scopes"])
    return api_key


def api_key_revoke(*, api_key: ApiKey) -> ApiKey:
    with transaction.atomic():
        ApiKey.objects.filter(pk=api_key.pk, revoked_at__isnull=True).update(revoked_at=timezone.now())
        api_key.refresh_from_db()
    return api_key


def tenant_membership_add(*, tenant: Tenant, user) -> TenantMembership:
    with transaction.atomic():
        membership, _ = TenantMembership.objects.get_or_create(tenant=tenant, user=user)
    return membership


def tenant_membership_remove(*, tenant: Tenant, user) -> None:
    with transaction.atomic():
        TenantMembership.objects.filter(tenant=tenant, user=user).delete()


@dataclass(frozen=True)
class DemoAccess:
    tenant: Tenant
    api_key: str
    admin_username: str
    admin_password: str | None  # None when the admin already existed with a password we never saw


def demo_access_ensure(
    *, tenant_name: str, admin_username: str, admin_password: str | None, saved: dict
) -> tuple[DemoAccess, dict]:
    """Make sure a demo tenant, a working API key and an admin user exist; return them and what to save.

    `saved` is what an earlier run returned (the clear key and password live only there), so re-runs
    reuse them instead of issuing new ones.
    """
    with transaction.atomic():
        tenant = Tenant.objects.filter(name=tenant_name).first()
        if tenant is None:
            tenant, issued = tenant_create(name=tenant_name)
            api_key = issued.key
        elif saved.get("api_key") and api_key_find_active(key=saved["api_key"]):
            api_key = saved["api_key"]
        else:
            api_key = api_key_create(tenant=tenant, name="demo", scopes=all_scopes()).key

        user_model = get_user_model()
        admin = user_model.objects.filter(username=admin_username).first()
        if admin is None:
            admin_password = admin_password or secrets.token_urlsafe(12)
            admin = user_model.objects.create_superuser(username=admin_username, password=admin_password)
        elif not admin_password:
            admin_password = saved.get("admin_password") if saved.get("admin_username") == admin_username else None
        tenant_membership_add(tenant=tenant, user=admin)

    access = DemoAccess(tenant, api_key, admin_username, admin_password)
    return access, {"api_key": api_key, "admin_username": admin_username, "admin_password": admin_password}
