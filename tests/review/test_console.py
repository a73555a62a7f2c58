"""The review console (/admin/review/): the queue with what a reviewer needs to decide in one look, decisions through
the services, conflicts side by side, a fact's story, the counts on the index; only the staff user's tenants."""

import pytest
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Permission
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.utils.html import escape

from episodes.extraction import episode_extract
from episodes.models import Episode
from episodes.services import episode_store
from facts.models import Fact, FactConflict, FactEvent
from facts.services import fact_remember
from tenancy.services import tenant_membership_add
from tests.factories import make_tenant

pytestmark = pytest.mark.django_db

NURSE = "Works as a nurse at Hospital La Paz"
HEAD_NURSE = "Works as a head nurse at Hospital La Fe"


def staff_client(tenant, *, decide: bool = True) -> tuple:
    user = get_user_model().objects.create_user(f"reviewer-{decide}", password="pw", is_staff=True)
    codenames = ["view_fact", "view_factconflict"] + (["change_fact", "change_factconflict"] if decide else [])
    user.user_permissions.add(*Permission.objects.filter(content_type__app_label="facts", codename__in=codenames))
    tenant_membership_add(tenant=tenant, user=user)
    client = Client()
    client.force_login(user)
    return user, client


@pytest.fixture
def staff(tenant):
    return staff_client(tenant)


def pending(tenant, content, user_id="u1", **fields):
    return fact_remember(
        tenant=tenant, user_id=user_id, content=content, source=Fact.Source.EXTRACTED, confidence=0.8, **fields
    ).fact


def conversation_fact(tenant):
    """A fact extracted from the fourth message of a session, waiting for review."""
    messages = [
        {"role": "user", "content": "Hi there, long shift today."},
        {"role": "assistant", "content": "Sorry to hear that. Where do you work?"},
        {"role": "assistant", "content": "Take your time."},
        {"role": "user", "content": "I work as a head nurse at Hospital La Fe."},
        {"role": "assistant", "content": "That sounds demanding."},
        {"role": "user", "content": "It is. Thanks for listening."},
        {"role": "assistant", "content": "Any time."},
    ]
    episode = episode_store(tenant=tenant, user_id="u1", session_id="s1", messages=messages).episode
    episode_extract(episode_id=episode.pk)
    return Fact.objects.get(source_episode=episode)


class TestQueue:
    def test_an_item_shows_its_proposal_conversation_and_nearest_facts(self, staff, tenant, settings):
        settings.FACTS_EXTRACTED_AUTO_APPROVE_CONFIDENCE = 0.99  # the extraction waits for review
        old = fact_remember(tenant=tenant, user_id="u1", content="Works as a nurse at Hospital La Paz").fact
        fact = conversation_fact(tenant)
        assert fact.status == "pending"
        assert fact.source_messages == [3]

        page = staff[1].get("/admin/review/").content.decode()

        assert f'data-fact="{fact.pk}"' in page
        assert f"#{old.pk} &#x27;{NURSE}&#x27;" in page  # "Approving would supersede #43 'Works as a nurse ...'"
        assert "would supersede" in page
        # The excerpt: the fact's message highlighted, two before and after it, not the whole session.
        assert '<div class="review-message review-source">' in page
        assert "I work as a head nurse at Hospital La Fe." in page
        assert "Where do you work?" in page
        assert "Thanks for listening." in page
        assert "Hi there, long shift today." not in page
        assert "Any time." not in page
        assert f"#{old.pk}</a> {NURSE}" in page  # among the nearest facts, with its similarity

    def test_the_queue_lists_only_the_staff_users_tenants_and_filters(self, staff, tenant):
        other, _ = make_tenant()
        mine = pending(tenant, "Prefers tea", user_id="alice")
        theirs = pending(other, "Prefers coffee", user_id="alice")
        bob = pending(tenant, "Prefers juice", user_id="bob")

        page = staff[1].get("/admin/review/").content.decode()
        filtered = staff[1].get("/admin/review/", {"user": "bob"}).content.decode()
        tenant_choices = staff[1].get("/admin/review/").context["tenants"]

        assert f'data-fact="{mine.pk}"' in page
        assert f'data-fact="{bob.pk}"' in page
        assert f'data-fact="{theirs.pk}"' not in page
        assert f'data-fact="{bob.pk}"' in filtered
        assert f'data-fact="{mine.pk}"' not in filtered
        assert list(tenant_choices) == [tenant]

    def test_a_page_costs_the_same_queries_with_2_or_20_items(self, staff, tenant):
        def queries() -> int:
            with CaptureQueriesContext(connection) as captured:
                assert staff[1].get("/admin/review/").status_code == 200
            return len(captured)

        for n in range(2):
            pending(tenant, f"Prefers colour number {n}", user_id=f"user-{n}")
        few = queries()
        for n in range(2, 20):
            pending(tenant, f"Prefers colour number {n}", user_id=f"user-{n % 5}")
        assert queries() == few


class TestDecisions:
    def test_approve_reject_and_edit_then_approve_go_through_the_services(self, staff, tenant):
        user, client = staff
        old = fact_remember(tenant=tenant, user_id="u1", content=NURSE).fact
        superseding = pending(tenant, HEAD_NURSE)
        rejected = pending(tenant, "Prefers the night shift")
        edited = pending(tenant, "Prefers tae")

        answers = [
            client.post("/admin/review/decide/", {"decision": "approve", "fact": superseding.pk},
                        headers={"Accept": "application/json"}),
            client.post("/admin/review/decide/", {"decision": "reject", "fact": rejected.pk},
                        headers={"Accept": "application/json"}),
            client.post("/admin/review/decide/", {"decision": "edit_approve", "fact": edited.pk,
                                                  "content": "Prefers tea"}, headers={"Accept": "application/json"}),
        ]  # fmt: skip

        assert [answer.json()["results"][str(fact.pk)]["ok"] for answer, fact in
                zip(answers, (superseding, rejected, edited), strict=True)] == [True, True, True]  # fmt: skip
        assert Fact.objects.get(pk=old.pk).superseded_by_id == superseding.pk  # the proposal was applied
        assert Fact.objects.get(pk=rejected.pk).status == "rejected"
        edited.refresh_from_db()
        assert (edited.content, edited.status) == ("Prefers tea", "active")
        actors = set(
            FactEvent.objects.filter(action__in=["approved", "rejected", "updated"]).values_list("actor", flat=True)
        )
        assert actors == {f"staff:{user.pk}"}

    def test_bulk_decisions_redirect_back_with_a_message_per_fact(self, staff, tenant):
        facts = [pending(tenant, f"Prefers colour number {n}", user_id=f"user-{n}") for n in range(3)]

        response = staff[1].post(
            "/admin/review/decide/", {"decision": "approve", "fact": [f.pk for f in facts]}, follow=True
        )

        assert response.redirect_chain[-1][0] == "/admin/review/"
        assert set(Fact.objects.filter(pk__in=[f.pk for f in facts]).values_list("status", flat=True)) == {"active"}
        assert sum("approved (active)" in str(message) for message in response.context["messages"]) == 3

    def test_another_tenants_fact_is_not_found_and_stays_as_it_was(self, staff, tenant):
        other, _ = make_tenant()
        theirs = pending(other, "Prefers coffee")

        answer = staff[1].post("/admin/review/decide/", {"decision": "approve", "fact": theirs.pk},
                               headers={"Accept": "application/json"})  # fmt: skip

        assert answer.json()["results"][str(theirs.pk)] == {"ok": False, "error": "Fact not found."}
        assert Fact.objects.get(pk=theirs.pk).status == "pending"
        assert staff[1].get(f"/admin/review/facts/{theirs.pk}/").status_code == 404

    def test_a_fact_in_conflict_is_refused_with_the_conflict_named(self, staff, tenant):
        fact_remember(tenant=tenant, user_id="u1", content="Lives in Berlin")
        result = fact_remember(tenant=tenant, user_id="u1", content="Lives in Paris", confidence=0.5)

        answer = staff[1].post("/admin/review/decide/", {"decision": "approve", "fact": result.fact.pk},
                               headers={"Accept": "application/json"})  # fmt: skip

        outcome = answer.json()["results"][str(result.fact.pk)]
        assert (outcome["ok"], outcome["code"]) == (False, "open_conflict")
        assert f"#{result.conflict_ids[0]}" in outcome["error"]

    def test_a_staff_user_who_may_only_view_cannot_decide(self, tenant):
        _, client = staff_client(tenant, decide=False)
        fact = pending(tenant, "Prefers tea")

        assert client.get("/admin/review/").status_code == 200
        assert client.post("/admin/review/decide/", {"decision": "approve", "fact": fact.pk}).status_code == 403
        assert Fact.objects.get(pk=fact.pk).status == "pending"


class TestConflicts:
    @pytest.fixture
    def conflict(self, tenant):
        fact_remember(tenant=tenant, user_id="u1", content="Lives in Berlin")
        result = fact_remember(tenant=tenant, user_id="u1", content="Lives in Paris", confidence=0.5)
        return FactConflict.objects.get(pk=result.conflict_ids[0])

    def test_both_facts_side_by_side_with_the_judges_reason(self, staff, conflict):
        page = staff[1].get("/admin/review/conflicts/").content.decode()

        assert f'id="conflict-{conflict.pk}"' in page
        assert "Lives in Berlin" in page
        assert "Lives in Paris" in page
        assert escape(conflict.reason) in page
        assert page.count('class="review-side review-') == 2

    @pytest.mark.parametrize(
        ("resolution", "content", "current"),
        [
            ("keep_new", "", ["Lives in Paris"]),
            ("keep_old", "", ["Lives in Berlin"]),
            ("keep_both", "", ["Lives in Berlin", "Lives in Paris"]),
            ("merge", "Lives in Berlin, moving to Paris", ["Lives in Berlin, moving to Paris"]),
        ],
    )
    def test_each_resolution_decides_through_the_service(self, staff, tenant, conflict, resolution, content, current):
        staff[1].post(f"/admin/review/conflicts/{conflict.pk}/resolve/", {"resolution": resolution, "content": content})

        assert FactConflict.objects.get(pk=conflict.pk).resolution == resolution
        live = Fact.objects.filter(tenant=tenant, status="active", valid_to__isnull=True)
        assert sorted(live.values_list("content", flat=True)) == current

    def test_another_tenants_conflict_is_not_found(self, staff):
        other, _ = make_tenant()
        fact_remember(tenant=other, user_id="u1", content="Lives in Berlin")
        result = fact_remember(tenant=other, user_id="u1", content="Lives in Paris", confidence=0.5)

        response = staff[1].post(
            f"/admin/review/conflicts/{result.conflict_ids[0]}/resolve/", {"resolution": "keep_new"}
        )

        assert response.status_code == 404
        assert FactConflict.objects.get(pk=result.conflict_ids[0]).status == "open"
        assert "Lives in Paris" not in staff[1].get("/admin/review/conflicts/").content.decode()


class TestFactPage:
    def test_the_story_timeline_chain_and_why_it_would_be_found(self, staff, tenant):
        old = fact_remember(tenant=tenant, user_id="u1", content="Lives in Berlin").fact
        new = fact_remember(tenant=tenant, user_id="u1", content="Moved to Paris").fact
        fact_remember(tenant=tenant, user_id="u1", content="Prefers green tea")

        page = staff[1].get(f"/admin/review/facts/{old.pk}/", {"q": "where does the user live?"})
        text = page.content.decode()

        assert f'replaced by <a href="/admin/review/facts/{new.pk}/">#{new.pk}</a> Moved to Paris' in text
        assert text.index("Superseded</strong>") < text.index("Created</strong>")  # newest first
        assert '<td class="review-before">—</td><td class="review-after">' in text  # the change a field went through
        story = page.context["story"]
        assert story.why.rank is None  # retired: out of the current facts a search ranks
        current = staff[1].get(f"/admin/review/facts/{new.pk}/", {"q": "Paris"}).context["story"]
        assert current.why.rank == 1
        assert current.why.keyword == 1.0


class TestIndex:
    def test_the_index_counts_what_waits_per_member_tenant(self, staff, tenant):
        other, _ = make_tenant()
        pending(tenant, "Prefers tea")
        pending(tenant, "Prefers juice", user_id="bob")
        pending(other, "Prefers coffee")
        fact_remember(tenant=tenant, user_id="u1", content="Lives in Berlin")
        fact_remember(tenant=tenant, user_id="u1", content="Lives in Paris", confidence=0.5)
        Episode.objects.create(tenant=tenant, user_id="u1", session_id="s9", extraction_status="failed")

        response = staff[1].get("/admin/")

        [row] = response.context["review_counts"]
        assert (row.tenant, row.pending_facts, row.open_conflicts, row.failed_extractions) == (tenant, 3, 1, 1)
        assert row.last_forget_run is None
        assert f'href="/admin/review/?tenant={tenant.pk}">3</a>' in response.content.decode()
