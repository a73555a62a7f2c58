"""The facts admin deletes through the one deletion service: an event names the staff user, scoped per tenant."""

import pytest
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Permission
from django.test import Client

from facts.models import Fact, FactEvent
from facts.services import fact_remember
from tenancy.services import tenant_membership_add
from tests.factories import make_tenant

pytestmark = pytest.mark.django_db


@pytest.fixture
def staff(tenant):
    user = get_user_model().objects.create_user("reviewer", password="pw", is_staff=True)
    user.user_permissions.add(*Permission.objects.filter(content_type__app_label="facts"))
    tenant_membership_add(tenant=tenant, user=user)
    client = Client()
    client.force_login(user)
    return user, client


def test_deleting_facts_in_the_admin_writes_their_deleted_events(staff, tenant):
    user, client = staff
    first = fact_remember(tenant=tenant, user_id="u1", content="Prefers tea").fact
    second = fact_remember(tenant=tenant, user_id="u1", content="Lives in Porto").fact
    third = fact_remember(tenant=tenant, user_id="u1", content="Works at Acme").fact

    client.post(f"/admin/facts/fact/{first.pk}/delete/", {"post": "yes"})
    client.post("/admin/facts/fact/", {"action": "delete_selected", "_selected_action": [second.pk], "post": "yes"})

    assert list(Fact.objects.filter(tenant=tenant).values_list("pk", flat=True)) == [third.pk]
    events = FactEvent.objects.filter(action="deleted").order_by("fact_id")
    assert [(event.fact_id, event.actor, event.before["content"]) for event in events] == [
        (first.pk, f"staff:{user.pk}", "Prefers tea"),
        (second.pk, f"staff:{user.pk}", "Lives in Porto"),
    ]


def test_the_admin_cannot_delete_another_tenants_fact(staff, tenant):
    _, client = staff
    other, _ = make_tenant()
    foreign = fact_remember(tenant=other, user_id="u1", content="Prefers coffee").fact

    client.post("/admin/facts/fact/", {"action": "delete_selected", "_selected_action": [foreign.pk], "post": "yes"})
    client.post(f"/admin/facts/fact/{foreign.pk}/delete/", {"post": "yes"})

    assert Fact.objects.filter(pk=foreign.pk).exists()
    assert not FactEvent.objects.filter(action="deleted").exists()
