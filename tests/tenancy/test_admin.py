"""Staff see (and filter by) only their own tenants' data in the admin; tenants, keys and memberships change through
the tenancy services."""

import pytest
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Permission
from django.test import Client

from tenancy.models import ApiKey, Tenant, TenantMembership
from tenancy.services import tenant_membership_add
from tests.factories import make_fact, make_tenant

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


@pytest.fixture
def staff_of_acme_everywhere(tenant):
    user = get_user_model().objects.create_user("operator", password="pw", is_staff=True)
    apps = ["facts", "episodes", "kb", "forgetting", "tenancy"]
    user.user_permissions.add(*Permission.objects.filter(content_type__app_label__in=apps))
    tenant_membership_add(tenant=tenant, user=user)
    client = Client()
    client.force_login(user)
    return client


LISTS_FILTERED_BY_TENANT = [
    "/admin/facts/fact/",
    "/admin/facts/factevent/",
    "/admin/facts/factconflict/",
    "/admin/episodes/episode/",
    "/admin/kb/document/",
    "/admin/kb/kbchunk/",
    "/admin/forgetting/forgetrun/",
    "/admin/tenancy/apikey/",
    "/admin/tenancy/tenantmembership/",
]


def tenant_choices(response) -> list[str]:
    [spec] = [spec for spec in response.context["cl"].filter_specs if spec.title == "tenant"]
    return [str(label) for _, label in spec.lookup_choices]


@pytest.mark.parametrize("url", LISTS_FILTERED_BY_TENANT)
def test_the_tenant_filter_offers_only_the_staff_members_tenants(staff_of_acme_everywhere, admin_client, tenant, url):
    globex, _ = make_tenant("globex")
    make_fact(tenant=tenant, content="acme fact")
    make_fact(tenant=globex, content="globex fact")

    filtered = admin_client.get(f"{url}?tenant={globex.pk}")

    assert tenant_choices(staff_of_acme_everywhere.get(url)) == ["acme"]
    assert tenant_choices(admin_client.get(url)) == ["acme", "globex"]
    assert filtered.status_code == 200
    assert {row.tenant_id for row in filtered.context["cl"].result_list} <= {globex.pk}
    if url == "/admin/facts/fact/":
        assert [fact.content for fact in filtered.context["cl"].result_list] == ["globex fact"]


def test_a_tenant_is_created_through_the_service_by_superusers_only(staff_of_acme, admin_client):
    response = admin_client.post("/admin/tenancy/tenant/add/", {"name": "initech"}, follow=True)

    tenant = Tenant.objects.get(name="initech")
    [key] = ApiKey.objects.filter(tenant=tenant)
    assert f'<code class="issued-key">{key.prefix}' in response.content.decode()
    assert key.prefix not in str(response.cookies)  # shown in the page, never carried in the messages cookie
    assert staff_of_acme.get("/admin/tenancy/tenant/add/").status_code == 403
    staff_of_acme.post("/admin/tenancy/tenant/add/", {"name": "hooli"})
    assert not Tenant.objects.filter(name="hooli").exists()


def test_a_tenant_is_switched_off_not_deleted(staff_of_acme, admin_client, tenant):
    response = staff_of_acme.post(f"/admin/tenancy/tenant/{tenant.pk}/change/", {"name": "acme"})  # unticked

    assert response.status_code == 302
    assert Tenant.objects.get(pk=tenant.pk).is_active is False
    assert admin_client.post(f"/admin/tenancy/tenant/{tenant.pk}/delete/", {"post": "yes"}).status_code == 403
    assert Tenant.objects.filter(pk=tenant.pk).exists()


def test_api_keys_are_revoked_not_renamed_or_deleted(staff_of_acme, tenant):
    key = ApiKey.objects.get(tenant=tenant)

    staff_of_acme.post(f"/admin/tenancy/apikey/{key.pk}/change/", {"name": "renamed", "scopes": ["memory:read"]})
    deleted = staff_of_acme.post(f"/admin/tenancy/apikey/{key.pk}/delete/", {"post": "yes"})
    staff_of_acme.post("/admin/tenancy/apikey/", {"action": "revoke", "_selected_action": [key.pk]})

    assert deleted.status_code == 403
    key.refresh_from_db()
    assert (key.name, key.scopes, key.is_revoked) == ("default", ["memory:read"], True)  # only the scopes change


def test_the_issue_action_asks_for_scopes_then_shows_the_key_in_the_page_only(admin_client, tenant):
    action = {"action": "issue_api_key", "_selected_action": [tenant.pk]}

    asked = admin_client.post("/admin/tenancy/tenant/", action)
    assert 'value="memory:read"' in asked.content.decode()
    assert ApiKey.objects.filter(tenant=tenant).count() == 1

    issued = admin_client.post("/admin/tenancy/tenant/", action | {"issue": "yes", "scopes": ["review"], "name": "r"})

    key = ApiKey.objects.get(tenant=tenant, name="r")
    assert key.scopes == ["review"]
    page = issued.content.decode()
    assert f'<code class="issued-key">{key.prefix}' in page
    assert key.prefix not in str(issued.cookies)
    assert "no-store" in issued["Cache-Control"]
    assert admin_client.get("/admin/tenancy/apikey/").status_code == 200


def test_a_membership_is_given_or_taken_back_never_moved(admin_client, tenant, other_tenant_and_key):
    user = get_user_model().objects.create_user("reviewer", password="pw", is_staff=True)

    admin_client.post("/admin/tenancy/tenantmembership/add/", {"tenant": tenant.pk, "user": user.pk})
    membership = TenantMembership.objects.get(user=user)
    moved = admin_client.post(
        f"/admin/tenancy/tenantmembership/{membership.pk}/change/",
        {"tenant": other_tenant_and_key[0].pk, "user": user.pk},
    )

    assert moved.status_code == 403
    assert TenantMembership.objects.get(pk=membership.pk).tenant == tenant
    admin_client.post(f"/admin/tenancy/tenantmembership/{membership.pk}/delete/", {"post": "yes"})
    assert not TenantMembership.objects.filter(user=user).exists()
