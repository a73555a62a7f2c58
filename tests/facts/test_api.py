"""The facts API over HTTP: outcomes, filters, pagination, review, import, errors, tenant isolation."""

import pytest

from facts.models import Fact, FactConflict
from facts.services import fact_remember
from tests.factories import client_with_key

pytestmark = pytest.mark.django_db


def create(api, content, **fields):
    return api.post("/api/v1/facts", {"user_id": "u1", "content": content, **fields}, format="json")


def test_create_returns_the_outcome_and_the_fact(api):
    response = create(api, "Prefers dark mode", category="preference", metadata={"from": "settings page"})

    assert response.status_code == 201
    body = response.json()
    assert body["outcome"] == "created"
    assert body["fact"]["content"] == "Prefers dark mode"
    assert body["fact"]["category"] == "preference"
    assert body["fact"]["source"] == "agent"
    assert body["fact"]["metadata"] == {"from": "settings page"}


def test_saving_the_same_fact_twice_merges_with_200(api):
    first = create(api, "Prefers dark mode").json()["fact"]["id"]

    response = create(api, "prefers dark mode.")

    assert response.status_code == 200
    assert response.json()["outcome"] == "merged"
    assert response.json()["fact"]["id"] == first


def test_a_contradiction_reports_the_superseded_ids(api):
    old = create(api, "Lives in Berlin").json()["fact"]["id"]

    body = create(api, "Lives in Paris").json()

    assert body["outcome"] == "superseded"
    assert body["superseded_ids"] == [old]


@pytest.mark.parametrize(
    ("payload", "field"),
    [
        ({"user_id": "u1", "content": ""}, "content"),
        ({"user_id": "u1", "content": "x" * 2001}, "content"),
        ({"user_id": "u1", "content": "ok", "category": "gossip"}, "category"),
        ({"user_id": "u1", "content": "ok", "confidence": 1.5}, "confidence"),
        ({"user_id": "u1", "content": "ok", "confidence": -0.1}, "confidence"),
        ({"content": "ok"}, "user_id"),
        ({"user_id": "two words", "content": "ok"}, "user_id"),
    ],
)
def test_bad_input_is_400_naming_the_field_and_stores_nothing(api, payload, field):
    response = api.post("/api/v1/facts", payload, format="json")

    assert response.status_code == 400
    error = response.json()["error"]
    assert error["code"] == "validation_error"
    assert field in error["details"]
    assert error["message"].startswith(f"{field}:")
    assert not Fact.objects.exists()


def test_list_filters_and_paginates_with_a_cursor(api, tenant):
    for n in range(5):
        fact_remember(tenant=tenant, user_id="u1", content=f"Fact number {n} about topic {n * 7}", category="project")
    fact_remember(tenant=tenant, user_id="u1", content="Prefers tea", category="preference")
    fact_remember(tenant=tenant, user_id="u2", content="Someone else entirely")

    first = api.get("/api/v1/facts", {"user_id": "u1", "category": "project", "limit": 3}).json()
    second = api.get(first["next"]).json()

    contents = [fact["content"] for fact in first["results"] + second["results"]]
    assert len(first["results"]) == 3
    assert sorted(contents) == sorted(f"Fact number {n} about topic {n * 7}" for n in range(5))
    assert second["next"] is None


def test_list_requires_a_user_and_rejects_unknown_filter_values(api):
    assert api.get("/api/v1/facts").json()["error"]["details"].keys() == {"user_id"}
    assert api.get("/api/v1/facts", {"user_id": "u1", "status": "sleeping"}).status_code == 400


def test_list_shows_superseded_facts_only_when_asked(api):
    create(api, "Lives in Berlin")
    create(api, "Lives in Paris")

    current = api.get("/api/v1/facts", {"user_id": "u1"}).json()["results"]
    superseded = api.get("/api/v1/facts", {"user_id": "u1", "validity": "superseded"}).json()["results"]

    assert [fact["content"] for fact in current] == ["Lives in Paris"]
    assert [fact["content"] for fact in superseded] == ["Lives in Berlin"]
    assert superseded[0]["superseded_by"] == current[0]["id"]


def test_review_flow_over_http(api):
    fact_id = create(api, "Might switch to Rust", confidence=0.3).json()["fact"]["id"]

    assert api.get(f"/api/v1/facts/{fact_id}").json()["status"] == "pending"
    assert api.post(f"/api/v1/facts/{fact_id}/approve").json()["status"] == "active"
    patched = api.patch(f"/api/v1/facts/{fact_id}", {"content": "Switching to Rust", "pinned": True}, format="json")
    assert patched.json()["content"] == "Switching to Rust"
    assert api.post(f"/api/v1/facts/{fact_id}/reject").json()["status"] == "rejected"
    assert api.delete(f"/api/v1/facts/{fact_id}").status_code == 204
    assert api.get(f"/api/v1/facts/{fact_id}").status_code == 404

    history = api.get(f"/api/v1/facts/{fact_id}/history").json()
    assert [event["action"] for event in history] == ["created", "approved", "updated", "rejected", "deleted"]
    assert all(event["actor"].startswith("api_key:") for event in history)


def test_patch_with_bad_values_is_400_and_changes_nothing(api):
    fact_id = create(api, "Prefers tea").json()["fact"]["id"]

    response = api.patch(f"/api/v1/facts/{fact_id}", {"confidence": 2}, format="json")

    assert response.status_code == 400
    assert "confidence" in response.json()["error"]["details"]
    assert api.get(f"/api/v1/facts/{fact_id}").json()["confidence"] == 1.0


def test_conflicts_are_listed_with_both_facts_and_resolved(api):
    create(api, "Lives in Berlin")
    conflict_id = create(api, "Lives in Paris", confidence=0.5).json()["conflict_ids"][0]

    [listed] = api.get("/api/v1/conflicts", {"status": "open"}).json()["results"]
    resolved = api.post(f"/api/v1/conflicts/{conflict_id}/resolve", {"resolution": "keep_new"}, format="json")

    assert (listed["existing_fact"]["content"], listed["new_fact"]["content"]) == ("Lives in Berlin", "Lives in Paris")
    assert resolved.status_code == 200
    assert resolved.json()["status"] == "resolved"
    again = api.post(f"/api/v1/conflicts/{conflict_id}/resolve", {"resolution": "keep_old"}, format="json")
    assert again.status_code == 409
    assert (
        api.post(f"/api/v1/conflicts/{conflict_id}/resolve", {"resolution": "maybe"}, format="json").status_code == 400
    )


def test_bulk_import_stores_facts_as_given(api):
    payload = {"facts": [{"user_id": "u1", "content": "Prefers tea"}, {"user_id": "u1", "content": "Prefers tea"}]}

    response = api.post("/api/v1/facts/import", payload, format="json")

    assert response.status_code == 201
    assert response.json()["imported"] == 2
    assert Fact.objects.filter(source="import").count() == 2


def test_bulk_import_names_the_bad_item_and_stores_nothing(api):
    payload = {"facts": [{"user_id": "u1", "content": "Prefers tea"}, {"user_id": "u1", "confidence": 4}]}

    response = api.post("/api/v1/facts/import", payload, format="json")

    assert response.status_code == 400
    assert response.json()["error"]["message"].startswith("facts[1].")
    assert not Fact.objects.exists()


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("user_id", "has space"),
        ("content", "   "),
        ("category", "gossip"),
        ("confidence", 1.5),
        ("confidence", "high"),
        ("status", "superseded"),
        ("pinned", "yes"),
        ("occurred_at", "last Tuesday"),
        ("metadata", ["not", "an", "object"]),
        ("agent_id", "a" * 256),
    ],
)
def test_bulk_import_names_the_bad_field(api, field, value):
    good = {"user_id": "u1", "content": "Prefers tea"}
    payload = {"facts": [good, good, {**good, field: value}]}

    response = api.post("/api/v1/facts/import", payload, format="json")

    assert response.status_code == 400
    assert response.json()["error"]["message"].startswith(f"facts[2].{field}: ")
    assert not Fact.objects.exists()


def test_bulk_import_refuses_an_item_that_is_not_an_object(api):
    response = api.post("/api/v1/facts/import", {"facts": [{"user_id": "u1", "content": "x"}, "tea"]}, format="json")

    assert response.status_code == 400
    assert response.json()["error"]["message"].startswith("facts[1]")


def test_bulk_import_refuses_more_than_the_batch_limit_and_stores_nothing(api, settings):
    payload = {"facts": [{"user_id": "u1", "content": f"fact {n}"} for n in range(1001)]}

    response = api.post("/api/v1/facts/import", payload, format="json")

    assert response.status_code == 400
    assert response.json()["error"]["details"] == {"facts": ["At most 1000 facts per request."]}

    settings.FACTS_IMPORT_MAX_BATCH = 3  # the setting is the limit, at the API too
    small = api.post("/api/v1/facts/import", {"facts": payload["facts"][:4]}, format="json")
    assert small.status_code == 400
    assert small.json()["error"]["details"] == {"facts": ["At most 3 facts per request."]}
    assert not Fact.objects.exists()


class TestReview:
    def test_a_pending_fact_answers_its_proposal_and_approving_applies_it(self, api):
        old = create(api, "Works as a nurse at Hospital La Paz").json()["fact"]
        response = api.post(
            "/api/v1/facts",
            {"user_id": "u1", "content": "Works as a head nurse at Hospital La Fe", "confidence": 0.65},
            format="json",
        )
        body = response.json()
        assert (response.status_code, body["outcome"], body["fact"]["status"]) == (201, "conflict", "pending")
        # Below FACTS_SUPERSEDE_MIN_CONFIDENCE the judge is not sure enough: a conflict, not a supersession.
        assert body["fact"]["proposal"]["conflicts"][0]["fact"] == old["id"]
        assert api.get(f"/api/v1/facts/{old['id']}").json()["valid_to"] is None

        refused = api.post(f"/api/v1/facts/{body['fact']['id']}/approve")
        assert refused.status_code == 409
        assert refused.json()["error"]["code"] == "open_conflict"
        assert refused.json()["error"]["details"] == {"conflicts": body["conflict_ids"]}

        merged = api.post(
            f"/api/v1/conflicts/{body['conflict_ids'][0]}/resolve",
            {"resolution": "merge", "content": "Works as a head nurse, now at Hospital La Fe"},
            format="json",
        )
        assert merged.status_code == 200
        assert merged.json()["resolution"] == "merge"
        assert api.get(f"/api/v1/facts/{old['id']}").json()["content"] == "Works as a head nurse, now at Hospital La Fe"

    def test_undoing_a_supersession(self, api):
        old = create(api, "Lives in Berlin").json()["fact"]
        new = create(api, "Moved to Paris").json()
        assert new["superseded_ids"] == [old["id"]]

        response = api.post(f"/api/v1/facts/{old['id']}/undo-supersession")

        assert response.status_code == 200
        assert (response.json()["valid_to"], response.json()["superseded_by"]) == (None, None)
        assert api.get(f"/api/v1/facts/{new['fact']['id']}").json()["status"] == "rejected"
        again = api.post(f"/api/v1/facts/{old['id']}/undo-supersession")
        assert (again.status_code, again.json()["error"]["code"]) == (409, "conflict")


class TestTenantIsolation:
    @pytest.fixture
    def foreign_fact(self, other_tenant_and_key):
        return fact_remember(tenant=other_tenant_and_key[0], user_id="u1", content="Globex secret plan").fact

    @pytest.mark.parametrize(
        ("method", "suffix", "payload"),
        [
            ("get", "", None),
            ("patch", "", {"content": "hijacked"}),
            ("delete", "", None),
            ("get", "/history", None),
            ("post", "/approve", None),
            ("post", "/reject", None),
            ("post", "/undo-supersession", None),
            ("post", "/restore", None),
        ],
    )
    def test_every_fact_endpoint_answers_404_for_another_tenants_fact(self, api, foreign_fact, method, suffix, payload):
        response = getattr(api, method)(f"/api/v1/facts/{foreign_fact.pk}{suffix}", payload, format="json")

        assert response.status_code == 404
        assert response.json()["error"]["code"] == "not_found"
        foreign_fact.refresh_from_db()
        assert (foreign_fact.content, foreign_fact.status) == ("Globex secret plan", "active")

    def test_lists_never_show_another_tenants_rows(self, api, foreign_fact):
        assert api.get("/api/v1/facts", {"user_id": "u1"}).json()["results"] == []
        assert api.get("/api/v1/conflicts").json()["results"] == []

    def test_conflicts_of_another_tenant_cannot_be_resolved(self, api, other_tenant_and_key):
        other, key = other_tenant_and_key
        foreign_api = client_with_key(key)
        foreign_api.post("/api/v1/facts", {"user_id": "u1", "content": "Lives in Berlin"}, format="json")
        conflict_id = foreign_api.post(
            "/api/v1/facts", {"user_id": "u1", "content": "Lives in Paris", "confidence": 0.5}, format="json"
        ).json()["conflict_ids"][0]

        response = api.post(f"/api/v1/conflicts/{conflict_id}/resolve", {"resolution": "keep_new"}, format="json")

        assert response.status_code == 404
        assert FactConflict.objects.get(pk=conflict_id).status == "open"

    def test_the_same_user_id_in_two_tenants_is_two_people(self, api, foreign_fact):
        response = create(api, "Globex secret plan")

        assert response.json()["outcome"] == "created"
        assert response.json()["fact"]["id"] != foreign_fact.pk
