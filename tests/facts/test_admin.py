"""The facts admin writes through the fact services (remember, update, review, resolve, delete), each with an
event naming the staff user; it shows and links only the staff user's tenants' rows; the history is read only."""

import json

import pytest
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Permission
from django.db import connection
from django.test import Client

from ai.services import active_embedding_model
from core.validation import IDENTIFIER_MESSAGE
from episodes.models import Episode
from facts.models import Fact, FactConflict, FactEvent
from facts.services import UPDATABLE_FIELDS, edits, fact_approve, fact_remember, fact_update, remember
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


def form_data(fact=None, **overrides) -> dict:
    """What the fact form posts: its fields as they are (or a new fact's defaults), with overrides. Status, source and
    valid_from were fields of the form too before it was read only: posting them shows they are ignored."""
    data = {
        "tenant": fact.tenant_id if fact else "",
        "user_id": fact.user_id if fact else "",
        "status": fact.status if fact else "active",
        "source": fact.source if fact else "manual",
        "valid_from_0": f"{fact.valid_from:%Y-%m-%d}" if fact else "2026-01-01",
        "valid_from_1": f"{fact.valid_from:%H:%M:%S}" if fact else "00:00:00",
        "content": fact.content if fact else "",
        "category": fact.category if fact else "other",
        "confidence": fact.confidence if fact else 1.0,
        "occurred_at_0": "",
        "occurred_at_1": "",
        "agent_id": fact.agent_id if fact else "",
        "metadata": json.dumps(fact.metadata if fact else {}),
        "initial-metadata": json.dumps(fact.metadata if fact else {}),  # as the form renders it (callable default)
    }
    if fact and fact.pinned:
        data["pinned"] = "on"
    data.update(overrides)
    return data


def events(fact_id) -> list[tuple[str, str]]:
    return list(FactEvent.objects.filter(fact_id=fact_id).order_by("id").values_list("action", "actor"))


def action_names(response) -> list[str]:
    form = response.context["action_form"]
    return [] if form is None else [name for name, _ in form.fields["action"].choices if name]


@pytest.mark.django_db(transaction=True)
def test_adding_and_editing_in_the_admin_embed_outside_any_transaction(monkeypatch):
    tenant, _ = make_tenant()
    user = get_user_model().objects.create_superuser("root", password="pw")
    tenant_membership_add(tenant=tenant, user=user)
    client = Client()
    client.force_login(user)
    in_transaction = []

    def spy(real):
        def embed(*args, **kwargs):
            in_transaction.append(connection.in_atomic_block)
            return real(*args, **kwargs)

        return embed

    monkeypatch.setattr(remember, "embed_query", spy(remember.embed_query))
    monkeypatch.setattr(edits, "embed_query", spy(edits.embed_query))

    client.post("/admin/facts/fact/add/", form_data(tenant=tenant.pk, user_id="u1", content="Prefers green tea"))
    fact = Fact.objects.get(tenant=tenant)
    client.post(f"/admin/facts/fact/{fact.pk}/change/", form_data(fact, content="Prefers jasmine tea"))

    assert Fact.objects.get(pk=fact.pk).content == "Prefers jasmine tea"
    assert in_transaction == [False, False]


class TestAdd:
    def test_a_fact_added_in_the_admin_is_remembered_embedded_and_in_its_history(self, staff, tenant):
        user, client = staff

        response = client.post(
            "/admin/facts/fact/add/",
            form_data(tenant=tenant.pk, user_id="u1", content="Prefers green tea", category="preference"),
        )

        assert response.status_code == 302
        fact = Fact.objects.get(tenant=tenant)
        assert fact.embedding is not None  # search and deduplication see it
        assert fact.embedding_model == active_embedding_model()
        assert (fact.content, fact.category, fact.source, fact.status) == (
            "Prefers green tea",
            "preference",
            "manual",
            "active",
        )
        assert events(fact.pk) == [("created", f"staff:{user.pk}")]

    def test_a_duplicate_merges_into_the_fact_it_repeats_and_the_admin_shows_that_fact(self, staff, tenant):
        user, client = staff
        known = fact_remember(tenant=tenant, user_id="u1", content="Prefers green tea", confidence=0.8).fact

        response = client.post(
            "/admin/facts/fact/add/", form_data(tenant=tenant.pk, user_id="u1", content="prefers green tea.")
        )

        assert response.status_code == 302
        assert response["Location"] == f"/admin/facts/fact/{known.pk}/change/"
        page = client.get(response["Location"]).content.decode()
        assert f'Already known: merged into fact <a href="/admin/facts/fact/{known.pk}/change/">#{known.pk}</a>' in page
        assert list(Fact.objects.filter(tenant=tenant).values_list("pk", flat=True)) == [known.pk]
        assert events(known.pk) == [("created", "system"), ("merged", f"staff:{user.pk}")]
        assert Fact.objects.get(pk=known.pk).confidence == 1.0

    def test_what_the_service_refuses_is_shown_on_the_form_and_nothing_is_saved(self, staff, tenant):
        _, client = staff
        other, _ = make_tenant()

        bad_user = client.post("/admin/facts/fact/add/", form_data(tenant=tenant.pk, user_id="two words", content="x"))
        foreign = client.post("/admin/facts/fact/add/", form_data(tenant=other.pk, user_id="u1", content="x"))

        assert bad_user.status_code == 200
        assert bad_user.context["adminform"].form.errors["user_id"] == [IDENTIFIER_MESSAGE]
        assert foreign.status_code == 200
        assert "tenant" in foreign.context["adminform"].form.errors
        assert not Fact.objects.exists()
        assert not FactEvent.objects.exists()


class TestChange:
    def test_an_edit_goes_through_fact_update_re_embedded_and_in_its_history(self, staff, tenant):
        user, client = staff
        fact = fact_remember(tenant=tenant, user_id="u1", content="Lives in Porto").fact
        old_vector = list(fact.embedding)

        response = client.post(
            f"/admin/facts/fact/{fact.pk}/change/", form_data(fact, content="Lives in Lisbon", pinned="on")
        )

        assert response.status_code == 302
        edited = Fact.objects.get(pk=fact.pk)
        assert (edited.content, edited.pinned) == ("Lives in Lisbon", True)
        assert list(edited.embedding) != old_vector
        assert edited.embedding_model == active_embedding_model()
        assert events(fact.pk) == [("created", "system"), ("updated", f"staff:{user.pk}")]
        updated = FactEvent.objects.get(fact_id=fact.pk, action="updated")
        assert (updated.before["content"], updated.after["content"]) == ("Lives in Porto", "Lives in Lisbon")

    def test_an_edit_the_service_refuses_is_shown_on_the_form_and_nothing_is_saved(self, staff, tenant, settings):
        _, client = staff
        fact = fact_remember(tenant=tenant, user_id="u1", content="Lives in Porto").fact
        settings.FACTS_MAX_CONTENT_CHARS = 20

        response = client.post(
            f"/admin/facts/fact/{fact.pk}/change/", form_data(fact, content="Lives in a very long street name")
        )

        assert response.status_code == 200
        assert response.context["adminform"].form.errors["content"] == ["Must be at most 20 characters."]
        assert Fact.objects.get(pk=fact.pk).content == "Lives in Porto"
        assert events(fact.pk) == [("created", "system")]

    def test_status_tenant_user_and_the_services_bookkeeping_are_read_only(self, staff, tenant):
        user, client = staff
        other, _ = make_tenant()
        tenant_membership_add(tenant=other, user=user)
        pending = fact_remember(tenant=tenant, user_id="u1", content="Works at Acme", confidence=0.5).fact
        newer = fact_remember(tenant=tenant, user_id="u1", content="Plays chess").fact
        url = f"/admin/facts/fact/{pending.pk}/change/"

        page = client.get(url).content.decode()
        response = client.post(
            url,
            form_data(
                pending,
                status="active",
                tenant=other.pk,
                user_id="u2",
                source="manual",
                superseded_by=newer.pk,
                embedding_model="forged",
                usage_count=99,
                valid_to_0="2026-01-01",
                valid_to_1="00:00:00",
                reviewed_at_0="2026-01-01",
                reviewed_at_1="00:00:00",
            ),
        )

        assert response.status_code == 302
        for name in ["status", "tenant", "user_id", "source", "superseded_by", "source_episode", "embedding_model"]:
            assert f'name="{name}"' not in page, name
        assert 'name="content"' in page
        fact = Fact.objects.get(pk=pending.pk)
        assert (fact.status, fact.tenant, fact.user_id, fact.source) == ("pending", tenant, "u1", "agent")
        assert (fact.superseded_by, fact.valid_to, fact.reviewed_at, fact.usage_count) == (None, None, None, 0)
        assert fact.embedding_model == active_embedding_model()
        assert events(pending.pk) == [("created", "system")]  # nothing changed: no approval, no update

    def test_the_add_form_offers_tenant_and_user(self, staff):
        _, client = staff

        form = client.get("/admin/facts/fact/add/").context["adminform"].form

        assert list(form.fields) == ["tenant", "user_id", *UPDATABLE_FIELDS]


class TestTenants:
    def test_another_tenants_fact_or_episode_cannot_be_linked_nor_read(self, staff, tenant, api):
        _, client = staff
        other, _ = make_tenant()
        secret = fact_remember(tenant=other, user_id="u1", content="Globex merger plans").fact
        episode = Episode.objects.create(tenant=other, user_id="u1", session_id="globex-session")
        mine = fact_remember(tenant=tenant, user_id="u1", content="Lives in Berlin").fact
        conflict = FactConflict.objects.get(
            pk=fact_remember(tenant=tenant, user_id="u1", content="Lives in Paris", confidence=0.5).conflict_ids[0]
        )

        client.post(
            f"/admin/facts/fact/{mine.pk}/change/",
            form_data(mine, superseded_by=secret.pk, source_episode=episode.pk),
        )
        conflict_form = client.post(
            f"/admin/facts/factconflict/{conflict.pk}/change/",
            {
                "tenant": tenant.pk,
                "user_id": "u1",
                "existing_fact": secret.pk,
                "new_fact": conflict.new_fact_id,
                "reason": conflict.reason,
                "status": "open",
            },
        )

        assert Fact.objects.get(pk=mine.pk).superseded_by_id is None
        assert Fact.objects.get(pk=mine.pk).source_episode_id is None
        assert conflict_form.status_code == 403
        assert FactConflict.objects.get(pk=conflict.pk).existing_fact_id == mine.pk
        assert "Globex merger plans" not in client.get(f"/admin/facts/fact/{mine.pk}/change/").content.decode()
        assert "Globex merger plans" not in api.get("/api/v1/conflicts").content.decode()


class TestConflicts:
    @pytest.fixture
    def conflict(self, tenant):
        fact_remember(tenant=tenant, user_id="u1", content="Lives in Berlin")
        result = fact_remember(tenant=tenant, user_id="u1", content="Lives in Paris", confidence=0.5)
        return FactConflict.objects.get(pk=result.conflict_ids[0])

    def test_a_conflict_is_read_in_the_admin_and_resolved_only_by_its_actions(self, staff, tenant, conflict):
        user, client = staff
        url = f"/admin/facts/factconflict/{conflict.pk}/change/"

        page = client.get(url)
        form = client.post(
            url,
            {
                "tenant": tenant.pk,
                "user_id": "u1",
                "existing_fact": conflict.existing_fact_id,
                "new_fact": conflict.new_fact_id,
                "reason": conflict.reason,
                "status": "resolved",
                "resolution": "keep_new",
                "resolved_by": "me",
            },
        )

        assert page.status_code == 200
        assert 'name="status"' not in page.content.decode()
        assert "Lives in Paris" in page.content.decode()
        assert form.status_code == 403
        assert client.get("/admin/facts/factconflict/add/").status_code == 403
        assert client.post(f"/admin/facts/factconflict/{conflict.pk}/delete/", {"post": "yes"}).status_code == 403
        assert FactConflict.objects.get(pk=conflict.pk).status == "open"
        assert Fact.objects.get(pk=conflict.new_fact_id).status == "pending"

        listing = client.get("/admin/facts/factconflict/")
        client.post("/admin/facts/factconflict/", {"action": "keep_new", "_selected_action": [conflict.pk]})

        assert action_names(listing) == ["keep_new", "keep_old", "keep_both"]
        resolved = FactConflict.objects.get(pk=conflict.pk)
        assert (resolved.status, resolved.resolution, resolved.resolved_by) == (
            "resolved",
            "keep_new",
            f"staff:{user.pk}",
        )
        assert Fact.objects.get(pk=conflict.existing_fact_id).superseded_by_id == conflict.new_fact_id

        # It goes with its facts: deleting one of them needs no permission on conflicts.
        confirm = client.get(f"/admin/facts/fact/{conflict.new_fact_id}/delete/")
        client.post(f"/admin/facts/fact/{conflict.new_fact_id}/delete/", {"post": "yes"})

        assert confirm.context["perms_lacking"] == set()
        assert not FactConflict.objects.exists()
        assert not Fact.objects.filter(pk=conflict.new_fact_id).exists()


class TestEvents:
    @pytest.fixture
    def history(self, tenant):
        fact = fact_remember(tenant=tenant, user_id="u1", content="Works at Acme", confidence=0.5).fact
        fact_approve(tenant=tenant, fact_id=fact.pk, actor="staff:1")
        fact_update(tenant=tenant, fact_id=fact.pk, actor="staff:1", pinned=True)
        return list(FactEvent.objects.filter(fact_id=fact.pk).order_by("id"))

    @pytest.mark.parametrize("who", ["staff", "superuser"])
    def test_the_history_is_read_newest_first_and_never_changed(self, request, staff, admin_client, history, who):
        client = staff[1] if who == "staff" else admin_client
        created = history[0]

        listing = client.get("/admin/facts/factevent/")
        client.post(
            "/admin/facts/factevent/", {"action": "delete_selected", "_selected_action": [created.pk], "post": "yes"}
        )
        deleted = client.post(f"/admin/facts/factevent/{created.pk}/delete/", {"post": "yes"})
        changed = client.post(f"/admin/facts/factevent/{created.pk}/change/", {"action": "deleted", "actor": "x"})

        assert [event.action for event in listing.context["cl"].result_list] == ["updated", "approved", "created"]
        assert "delete_selected" not in action_names(listing)
        assert (deleted.status_code, changed.status_code) == (403, 403)
        assert client.get("/admin/facts/factevent/add/").status_code == 403
        assert list(FactEvent.objects.order_by("id")) == history
        assert FactEvent.objects.get(pk=created.pk).actor == "system"


def test_staff_who_may_only_look_cannot_review(tenant):
    user = get_user_model().objects.create_user("reader", password="pw", is_staff=True)
    user.user_permissions.add(*Permission.objects.filter(codename__in=["view_fact", "view_factconflict"]))
    tenant_membership_add(tenant=tenant, user=user)
    client = Client()
    client.force_login(user)
    pending = fact_remember(tenant=tenant, user_id="u1", content="Works at Acme", confidence=0.5).fact

    listing = client.get("/admin/facts/fact/")
    client.post("/admin/facts/fact/", {"action": "approve", "_selected_action": [pending.pk]})

    assert listing.status_code == 200
    assert action_names(listing) == []
    assert Fact.objects.get(pk=pending.pk).status == "pending"
