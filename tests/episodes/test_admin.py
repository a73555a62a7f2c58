"""A reviewer reads the conversation beside the facts extracted from it, and re-queues failed extractions."""

import pytest
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Permission
from django.test import Client

from episodes.models import Episode
from tenancy.services import tenant_membership_add
from tests.episodes.factories import TURN_1, conversation
from tests.factories import client_with_key

pytestmark = pytest.mark.django_db


@pytest.fixture
def staff_of_acme(tenant):
    user = get_user_model().objects.create_user("reviewer", password="pw", is_staff=True)
    user.user_permissions.add(*Permission.objects.filter(content_type__app_label__in=["episodes", "facts"]))
    tenant_membership_add(tenant=tenant, user=user)
    client = Client()
    client.force_login(user)
    return client


def test_the_episode_page_shows_what_was_said_and_the_facts_it_produced(staff_of_acme, post_episode):
    episode_id = post_episode(conversation()).json()["id"]

    page = staff_of_acme.get(f"/admin/episodes/episode/{episode_id}/change/").content.decode()

    assert TURN_1[0]["content"] in page
    assert "Lives in Berlin" in page
    assert "Prefers PostgreSQL for new projects" in page


def test_the_episode_page_shows_why_the_run_extracted_offline_read_only(staff_of_acme, post_episode):
    episode_id = post_episode(conversation()).json()["id"]
    reason = "The chat model failed, so the facts were extracted offline: the endpoint answered 503"
    Episode.objects.filter(pk=episode_id).update(extraction_fallback_reason=reason)

    page = staff_of_acme.get(f"/admin/episodes/episode/{episode_id}/change/").content.decode()

    assert reason in page
    assert 'name="extraction_fallback_reason"' not in page  # shown, not editable


def test_staff_see_only_their_tenants_episodes(staff_of_acme, other_tenant_and_key, post_episode):
    post_episode(conversation(session_id="acme-session"))
    their_client = client_with_key(other_tenant_and_key[1])
    theirs = post_episode(conversation(session_id="globex-session"), client=their_client).json()["id"]

    listing = staff_of_acme.get("/admin/episodes/episode/").content.decode()

    assert "acme-session" in listing
    assert "globex-session" not in listing
    assert staff_of_acme.get(f"/admin/episodes/episode/{theirs}/change/").status_code == 302


def test_the_retry_action_requeues_failed_episodes_through_the_service(staff_of_acme, post_episode):
    failed = post_episode(conversation(session_id="a")).json()["id"]
    done = post_episode(conversation(session_id="b")).json()["id"]
    Episode.objects.filter(pk=failed).update(extraction_status="failed", extraction_error="boom")

    response = staff_of_acme.post(
        "/admin/episodes/episode/",
        {"action": "retry_extraction", "_selected_action": [failed, done]},
        follow=True,
    )

    assert response.status_code == 200
    assert Episode.objects.get(pk=failed).extraction_status == "pending"
    assert Episode.objects.get(pk=done).extraction_status == "done"
    assert "Only a failed or stalled extraction can be retried" in response.content.decode()


def test_an_episode_is_only_read_in_the_admin(staff_of_acme, post_episode):
    episode_id = post_episode(conversation()).json()["id"]
    before = Episode.objects.get(pk=episode_id)

    changed = staff_of_acme.post(f"/admin/episodes/episode/{episode_id}/change/", {"summary": "rewritten"})
    deleted = staff_of_acme.post(f"/admin/episodes/episode/{episode_id}/delete/", {"post": "yes"})

    assert (changed.status_code, deleted.status_code) == (403, 403)
    after = Episode.objects.get(pk=episode_id)
    assert (after.summary, after.updated_at) == (before.summary, before.updated_at)
