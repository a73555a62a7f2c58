"""Small builders for test data; they go through the services where one exists."""

import itertools

from rest_framework.test import APIClient

from facts.models import Fact
from tenancy.models import Tenant
from tenancy.services import tenant_create

_names = itertools.count(1)


def make_tenant(name: str | None = None) -> tuple[Tenant, str]:
    """A tenant and its clear API key."""
    tenant, issued = tenant_create(name=name or f"tenant-{next(_names)}")
    return tenant, issued.key


def make_fact(*, tenant: Tenant, user_id: str = "user-1", content: str = "prefers PostgreSQL", **fields) -> Fact:
    return Fact.objects.create(tenant=tenant, user_id=user_id, content=content, **fields)


def client_with_key(key: str) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {key}")
    return client
