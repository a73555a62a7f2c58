"""The facts admin in a real browser: log in, review a tenant's pending facts, resolve a conflict.

What the admin did is read back through the REST API of the same live server, with the tenant's API key.
"""

import pytest
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Permission
from selenium.webdriver.common.by import By

from facts.services import fact_remember
from tenancy.services import tenant_membership_add
from tests.browser.pages import api_get, changelist_rows, click_and_wait, run_action
from tests.factories import make_tenant

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

PASSWORD = "correct horse battery staple"


@pytest.fixture
def acme(transactional_db):
    """Tenant A and its clear API key."""
    return make_tenant("acme")


@pytest.fixture
def reviewer(acme):
    """A staff user, member of tenant A only, with the facts app's permissions."""
    user = get_user_model().objects.create_user("reviewer", password=PASSWORD, is_staff=True)
    user.user_permissions.add(*Permission.objects.filter(content_type__app_label="facts"))
    tenant_membership_add(tenant=acme[0], user=user)
    return user


def test_a_staff_user_logs_in_and_sees_the_styled_admin_index(page, live_server, reviewer, admin_login, screenshot):
    admin_login("reviewer", PASSWORD)
    screenshot("index")

    assert page.current_url == live_server.url + "/admin/"
    assert "reviewer" in page.find_element(By.ID, "user-tools").text.lower()
    assert "Facts" in page.find_element(By.ID, "content-main").text
    # The admin's CSS came from the live server's static files: the header has its dark background, not the default.
    assert page.find_element(By.ID, "header").value_of_css_property("background-color") != "rgba(0, 0, 0, 0)"


def test_the_facts_list_shows_the_tenants_pending_facts_and_not_another_tenants(
    page, acme, reviewer, admin_login, screenshot
):
    other, _ = make_tenant("globex")
    active = fact_remember(tenant=acme[0], user_id="u1", content="Prefers green tea").fact
    mine = fact_remember(tenant=acme[0], user_id="u1", content="Might be moving to Lisbon", confidence=0.5).fact
    foreign = fact_remember(tenant=other, user_id="u1", content="Might be moving to Oslo", confidence=0.5).fact
    admin_login("reviewer", PASSWORD)

    click_and_wait(page, page.find_element(By.CSS_SELECTOR, "#content-main").find_element(By.LINK_TEXT, "Facts"))
    screenshot("facts")
    assert sorted(changelist_rows(page)) == [active.pk, mine.pk]
    click_and_wait(page, page.find_element(By.ID, "changelist-filter").find_element(By.LINK_TEXT, "Pending"))
    screenshot("pending-facts")

    rows = changelist_rows(page)
    assert list(rows) == [mine.pk]
    assert "Might be moving to Lisbon" in rows[mine.pk]
    assert "Oslo" not in page.find_element(By.ID, "result_list").text
    assert foreign.pk not in rows


def test_approving_two_pending_facts_makes_them_active_in_the_api(
    page, live_server, acme, reviewer, admin_login, screenshot
):
    tenant, key = acme
    first = fact_remember(tenant=tenant, user_id="u1", content="Might be moving to Lisbon", confidence=0.5).fact
    second = fact_remember(tenant=tenant, user_id="u1", content="Perhaps learning Portuguese", confidence=0.5).fact
    assert api_get(live_server.url, key, f"/api/v1/facts/{first.pk}")["status"] == "pending"
    admin_login("reviewer", PASSWORD)
    page.get(live_server.url + "/admin/facts/fact/?status__exact=pending")
    screenshot("pending-facts")

    messages = run_action(page, [first.pk, second.pk], "Approve selected facts")
    screenshot("approved")

    assert "Approved 2 item(s)." in messages
    statuses = {
        fact.pk: api_get(live_server.url, key, f"/api/v1/facts/{fact.pk}")["status"] for fact in (first, second)
    }
    assert statuses == {first.pk: "active", second.pk: "active"}


def test_keeping_the_new_fact_of_a_conflict_supersedes_the_old_in_the_api(
    page, live_server, acme, reviewer, admin_login, screenshot
):
    tenant, key = acme
    old = fact_remember(tenant=tenant, user_id="u1", content="Lives in Berlin").fact
    result = fact_remember(tenant=tenant, user_id="u1", content="Lives in Paris", confidence=0.5)
    assert result.outcome == "conflict"
    admin_login("reviewer", PASSWORD)
    page.get(live_server.url + "/admin/facts/factconflict/")
    screenshot("conflicts")
    assert f"#{old.pk} Lives in Berlin" in changelist_rows(page)[result.conflict_ids[0]]

    messages = run_action(page, result.conflict_ids, "Resolve: keep the new fact (supersede the old)")
    screenshot("resolved")

    assert "Resolved (keep_new) 1 item(s)." in messages
    retired = api_get(live_server.url, key, f"/api/v1/facts/{old.pk}")
    assert (retired["superseded_by"], retired["valid_to"] is not None) == (result.fact.pk, True)
    assert api_get(live_server.url, key, f"/api/v1/facts/{result.fact.pk}")["status"] == "active"
