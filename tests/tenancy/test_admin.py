"""Staff see only their own tenants' data in the admin."""

import pytest
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Permission
from django.test import Client

from tenancy.services import tenant_membership_add
from tests.factories import make_fact

pytestmark = pytest.mark.django_db


@pytest.fixture
def staff_of_acme(tenant):
    user = get_user_model().objects.create_user("reviewer", password="pw", is_staff=True)
    user.user_permissions.add(*Permission.objects.filter(content_type__app_label__in=["facts", "tenancy"]))
    tenant_membership_add(tenant=tenant, user=user)
    client = Client()
    client.force_login(user)
    return client


def test_staff_see_only_facts_of_their_tenants(staff_of_acme, tenant, other_tenant_and_key):
    other_tenant, _ = other_tenant_and_key
    mine = make_fact(tenant=tenant, content="acme fact")
    foreign = make_fact(tenant=other_tenant, content="globex fact")

    listing = staff_of_acme.get("/admin/facts/fact/")

    assert listing.status_code == 200
    assert "acme fact" in listing.content.decode()
    assert "globex fact" not in listing.content.decode()
    assert staff_of_acme.get(f"/admin/facts/fact/{mine.pk}/change/").status_code == 200
    # Another tenant's row behaves as if it did not exist (the admin redirects to its index).
    assert staff_of_acme.get(f"/admin/facts/fact/{foreign.pk}/change/").status_code == 302


def test_every_model_has_an_admin_page(admin_client):
    for url in [
        "/admin/tenancy/tenant/",
        "/admin/tenancy/apikey/",
        "/admin/tenancy/tenantmembership/",
        "/admin/facts/fact/",
        "/admin/facts/factevent/",
        "/admin/facts/factconflict/",
        "/admin/episodes/episode/",
        "/admin/kb/document/",
        "/admin/kb/kbchunk/",
    ]:
        assert admin_client.get(url).status_code == 200, url
