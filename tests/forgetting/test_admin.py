"""The admin: restore archived facts, edit the forget policy (through the service), read the runs; per tenant."""

import pytest
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Permission
from django.test import Client

from facts.models import Fact
from forgetting.models import ForgetPolicy, ForgetRun
from forgetting.services import forget_policy_apply, forget_policy_set
from tenancy.services import tenant_membership_add

from .conftest import add, age, status_of

pytestmark = pytest.mark.django_db


@pytest.fixture
def staff_of_acme(tenant):
    user = get_user_model().objects.create_user("reviewer", password="pw", is_staff=True)
    user.user_permissions.add(*Permission.objects.filter(content_type__app_label__in=["facts", "forgetting"]))
    tenant_membership_add(tenant=tenant, user=user)
    client = Client()
    client.force_login(user)
    return client


def test_the_restore_action_brings_archived_facts_back_and_reports_the_rest(staff_of_acme, tenant, now):
    archived, live = add(tenant, "Archived fact", "Live fact")
    age(archived, now, days=100)
    forget_policy_apply(tenant=tenant, now=now)

    response = staff_of_acme.post(
        "/admin/facts/fact/", {"action": "restore", "_selected_action": [archived.pk, live.pk]}, follow=True
    )

    assert status_of(archived) == "active"
    text = response.content.decode()
    assert "Restored 1 item(s)." in text
    assert f"#{live.pk}: Only an archived fact can be restored" in text
    assert Fact.objects.get(pk=archived.pk).archived_at is None


def test_a_new_policy_starts_from_the_defaults_and_is_saved_through_the_service(staff_of_acme, tenant, settings):
    settings.FORGET_MAX_UNUSED_DAYS = 45

    form = staff_of_acme.get("/admin/forgetting/forgetpolicy/add/")
    response = staff_of_acme.post(
        "/admin/forgetting/forgetpolicy/add/",
        {
            "tenant": tenant.pk,
            "enabled": "on",
            "max_unused_days": 60,
            "min_usage_count": 2,
            "max_facts_per_user": "",
            "archive_retention_days": 14,
            "exempt_categories": ["profile", "decision"],
        },
    )

    assert 'name="max_unused_days" value="45"' in form.content.decode()
    assert response.status_code == 302
    policy = ForgetPolicy.objects.get(tenant=tenant)
    assert (policy.max_unused_days, policy.max_facts_per_user, policy.exempt_categories) == (
        60,
        None,
        ["decision", "profile"],
    )


def test_a_bad_value_in_the_admin_form_is_shown_and_saves_nothing(staff_of_acme, tenant):
    response = staff_of_acme.post(
        "/admin/forgetting/forgetpolicy/add/",
        {"tenant": tenant.pk, "max_unused_days": 0, "min_usage_count": 2, "archive_retention_days": 14},
    )

    assert response.status_code == 200
    assert "max_unused_days" in response.context["adminform"].form.errors
    assert not ForgetPolicy.objects.exists()


def test_staff_see_only_their_tenants_policies_and_runs(staff_of_acme, tenant, other_tenant_and_key):
    other = other_tenant_and_key[0]
    forget_policy_set(tenant=tenant, max_unused_days=11)
    foreign = forget_policy_set(tenant=other, max_unused_days=22)
    forget_policy_apply(tenant=tenant, dry_run=True)
    forget_policy_apply(tenant=other, dry_run=True)

    policies = staff_of_acme.get("/admin/forgetting/forgetpolicy/")
    runs = staff_of_acme.get("/admin/forgetting/forgetrun/")

    assert [policy.tenant for policy in policies.context["cl"].result_list] == [tenant]
    assert [run.tenant for run in runs.context["cl"].result_list] == [tenant]
    assert staff_of_acme.get(f"/admin/forgetting/forgetpolicy/{foreign.pk}/change/").status_code == 302
    add_form = staff_of_acme.get("/admin/forgetting/forgetpolicy/add/").context["adminform"].form
    assert list(add_form.fields["tenant"].queryset) == [tenant]


def test_the_preview_action_counts_without_changing(staff_of_acme, tenant, now):
    policy = forget_policy_set(tenant=tenant, max_unused_days=30)
    [fact] = add(tenant, "Stale for a month")
    age(fact, now, days=40)

    response = staff_of_acme.post(
        "/admin/forgetting/forgetpolicy/", {"action": "preview", "_selected_action": [policy.pk]}, follow=True
    )

    assert "Dry run for acme: would archive 1 unused, evict 0 over the cap" in response.content.decode()
    assert status_of(fact) == "active"
    assert ForgetRun.objects.get().dry_run is True


def test_runs_are_read_only(staff_of_acme, tenant):
    run = ForgetRun.objects.get(pk=forget_policy_apply(tenant=tenant).run_id)

    assert staff_of_acme.get(f"/admin/forgetting/forgetrun/{run.pk}/change/").status_code == 200
    assert staff_of_acme.get("/admin/forgetting/forgetrun/add/").status_code == 403
    staff_of_acme.post(f"/admin/forgetting/forgetrun/{run.pk}/change/", {"archived": 99})
    run.refresh_from_db()
    assert run.archived == 0


def test_a_policy_is_changed_in_the_admin_but_not_moved_to_another_tenant(staff_of_acme, tenant, other_tenant_and_key):
    policy = forget_policy_set(tenant=tenant, max_unused_days=11)
    url = f"/admin/forgetting/forgetpolicy/{policy.pk}/change/"

    page = staff_of_acme.get(url)
    response = staff_of_acme.post(
        url,
        {
            "tenant": other_tenant_and_key[0].pk,  # read-only: ignored
            "max_unused_days": 12,
            "min_usage_count": 1,
            "max_facts_per_user": 5,
            "archive_retention_days": 3,
            "exempt_categories": ["profile"],
        },
    )

    assert (page.status_code, response.status_code) == (200, 302)
    policy.refresh_from_db()
    assert (policy.tenant, policy.enabled, policy.max_unused_days, policy.min_usage_count) == (tenant, False, 12, 1)
    assert (policy.max_facts_per_user, policy.archive_retention_days, policy.exempt_categories) == (5, 3, ["profile"])


def test_runs_are_not_deleted(staff_of_acme, tenant):
    run = ForgetRun.objects.get(pk=forget_policy_apply(tenant=tenant).run_id)

    single = staff_of_acme.post(f"/admin/forgetting/forgetrun/{run.pk}/delete/", {"post": "yes"})
    staff_of_acme.post(
        "/admin/forgetting/forgetrun/", {"action": "delete_selected", "_selected_action": [run.pk], "post": "yes"}
    )

    assert single.status_code == 403
    assert ForgetRun.objects.filter(pk=run.pk).exists()
