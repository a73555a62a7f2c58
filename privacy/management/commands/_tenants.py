from django.core.management.base import CommandError

from tenancy.models import Tenant
from tenancy.selectors import tenant_get, tenant_get_by_name


def tenant_named(value: str) -> Tenant:
    """The tenant of this name, else of this id (a name wins: a tenant may be named "42")."""
    tenant = tenant_get_by_name(name=value) or (tenant_get(tenant_id=int(value)) if value.isdigit() else None)
    if tenant is None:
        raise CommandError(f"No tenant named or numbered {value!r}.")
    return tenant
