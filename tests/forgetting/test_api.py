"""The forgetting API over HTTP: policy, dry runs, runs, restore, user erasure; errors and tenant isolation."""

from datetime import timedelta

import pytest

from episodes.models import Episode
from episodes.services import episode_store
from facts.models import Fact, FactConflict, FactEvent
from forgetting.models import ForgetPolicy
from forgetting.services import forget_policy_apply
from tests.factories import client_with_key

from .conftest import add, age, status_of

pytestmark = pytest.mark.django_db

POLICY = {
    "enabled": True,
    "max_unused_days": 30,
    "min_usage_count": 2,
    "max_facts_per_user": 500,
    "archive_retention_days": 7,
    "exempt_categories": ["profile"],
}


@pytest.fixture
def other_api(other_tenant_and_key):
    return client_with_key(other_tenant_and_key[1])


class TestPolicy:
    def test_a_new_tenant_reads_the_default_policy(self, api):
        body = api.get("/api/v1/forget-policy").json()

        assert body == {
            "enabled": True,
            "max_unused_days": 90,
            "min_usage_count": 3,
            "max_facts_per_user": 1000,
            "archive_retention_days": 30,
            "exempt_categories": [],
            "is_default": True,
            "updated_at": None,
        }

    def test_put_saves_the_tenants_policy_and_patch_changes_single_fields(self, api, other_api):
        saved = api.put("/api/v1/forget-policy", POLICY, format="json")
        patched = api.patch("/api/v1/forget-policy", {"max_facts_per_user": None}, format="json")

        assert saved.status_code == 200
        assert {key: saved.json()[key] for key in POLICY} == POLICY
        assert saved.json()["is_default"] is False
        assert patched.json()["max_facts_per_user"] is None
        assert patched.json()["max_unused_days"] == 30
        assert api.get("/api/v1/forget-policy").json()["max_facts_per_user"] is None
        assert other_api.get("/api/v1/forget-policy").json()["is_default"] is True

    def test_delete_goes_back_to_the_defaults(self, api):
        api.put("/api/v1/forget-policy", POLICY, format="json")

        body = api.delete("/api/v1/forget-policy").json()

        assert (body["is_default"], body["max_unused_days"]) == (True, 90)
        assert not ForgetPolicy.objects.exists()

    @pytest.mark.parametrize(
        ("payload", "field"),
        [
            ({"max_unused_days": 0}, "max_unused_days"),
            ({"max_unused_days": "soon"}, "max_unused_days"),
            ({"min_usage_count": -1}, "min_usage_count"),
            ({"max_facts_per_user": 0}, "max_facts_per_user"),
            ({"archive_retention_days": 100000}, "archive_retention_days"),
            ({"exempt_categories": ["gossip"]}, "exempt_categories"),
            ({"exempt_categories": "profile"}, "exempt_categories"),
            ({"enabled": "perhaps"}, "enabled"),
        ],
    )
    def test_bad_input_is_400_naming_the_field_and_saves_nothing(self, api, payload, field):
        response = api.patch("/api/v1/forget-policy", payload, format="json")

        assert response.status_code == 400
        error = response.json()["error"]
        assert (error["code"], list(error["details"])) == ("validation_error", [field])
        assert error["message"].startswith(f"{field}")
        assert not ForgetPolicy.objects.exists()

    def test_put_needs_every_field(self, api):
        response = api.put("/api/v1/forget-policy", {"enabled": False}, format="json")

        assert response.status_code == 400
        assert "max_unused_days" in response.json()["error"]["details"]

    def test_the_policy_needs_an_api_key(self, client):
        assert client.get("/api/v1/forget-policy").status_code == 401


class TestRuns:
    def test_a_dry_run_reports_counts_changes_nothing_and_is_listed(self, api, tenant, now):
        [stale] = add(tenant, "Stale preference")
        age(stale, now, days=100)

        response = api.post("/api/v1/forget-policy/dry-run", {}, format="json")

        assert response.status_code == 201
        run = response.json()
        assert (run["dry_run"], run["status"], run["archived"], run["evicted"], run["purged"]) == (
            True,
            "done",
            1,
            0,
            0,
        )
        assert status_of(stale) == "active"
        listed = api.get("/api/v1/forget-runs").json()["results"]
        assert [item["id"] for item in listed] == [run["id"]]
        assert api.get(f"/api/v1/forget-runs/{run['id']}").json()["archived"] == 1

    def test_a_dry_run_can_look_ahead(self, api, tenant, now):
        [fact] = add(tenant, "Fresh today")
        age(fact, now, days=0)

        later = (now + timedelta(days=91)).isoformat()
        ahead = api.post("/api/v1/forget-policy/dry-run", {"as_of": later}, format="json").json()
        bad = api.post("/api/v1/forget-policy/dry-run", {"as_of": "next week"}, format="json")

        assert ahead["archived"] == 1
        assert (bad.status_code, list(bad.json()["error"]["details"])) == (400, ["as_of"])

    def test_runs_are_filtered_and_belong_to_their_tenant(self, api, other_api, tenant, other_tenant_and_key):
        forget_policy_apply(tenant=tenant)
        forget_policy_apply(tenant=tenant, dry_run=True)
        foreign = forget_policy_apply(tenant=other_tenant_and_key[0])

        real = api.get("/api/v1/forget-runs", {"dry_run": "false"}).json()["results"]
        every = api.get("/api/v1/forget-runs").json()["results"]

        assert [run["dry_run"] for run in real] == [False]
        assert len(every) == 2
        assert api.get(f"/api/v1/forget-runs/{foreign.run_id}").status_code == 404
        assert [run["id"] for run in other_api.get("/api/v1/forget-runs").json()["results"]] == [foreign.run_id]


class TestRestore:
    def test_an_archived_fact_is_restored_over_http(self, api, tenant, now):
        [fact] = add(tenant, "Prefers dark roast")
        age(fact, now, days=100)
        forget_policy_apply(tenant=tenant, now=now)

        response = api.post(f"/api/v1/facts/{fact.pk}/restore")

        assert response.status_code == 200
        assert response.json()["status"] == "active"
        history = api.get(f"/api/v1/facts/{fact.pk}/history").json()
        assert [event["action"] for event in history] == ["created", "archived", "restored"]
        assert history[-1]["actor"].startswith("api_key:")

    def test_restoring_a_live_fact_is_409(self, api, tenant):
        [fact] = add(tenant, "Prefers light roast")

        response = api.post(f"/api/v1/facts/{fact.pk}/restore")

        assert (response.status_code, response.json()["error"]["code"]) == (409, "conflict")

    def test_another_tenants_archived_fact_is_404(self, api, other_tenant_and_key, now):
        [foreign] = add(other_tenant_and_key[0], "Globex archived fact")
        age(foreign, now, days=100)
        forget_policy_apply(tenant=other_tenant_and_key[0], now=now)

        response = api.post(f"/api/v1/facts/{foreign.pk}/restore")

        assert (response.status_code, response.json()["error"]["code"]) == (404, "not_found")
        assert status_of(foreign) == "archived"


class TestUserErasure:
    @pytest.fixture
    def user_data(self, api, tenant, other_tenant_and_key):
        """u1 of acme with facts (one superseded), a conflict, events and an episode; neighbours that must stay."""
        api.post("/api/v1/facts", {"user_id": "u1", "content": "Lives in Berlin"}, format="json")
        api.post("/api/v1/facts", {"user_id": "u1", "content": "Lives in Paris"}, format="json")
        api.post("/api/v1/facts", {"user_id": "u1", "content": "Lives in Rome", "confidence": 0.5}, format="json")
        episode_store(tenant=tenant, user_id="u1", session_id="s1", messages=[{"role": "user", "content": "Hi"}])
        add(tenant, "Another user's fact", user_id="u2")
        add(other_tenant_and_key[0], "Same user id at another tenant", user_id="u1")
        Episode.objects.create(tenant=other_tenant_and_key[0], user_id="u1", session_id="s1")

    def test_delete_user_removes_everything_and_returns_the_counts(self, api, tenant, other_tenant_and_key, user_data):
        response = api.delete("/api/v1/users/u1")

        assert response.status_code == 200
        assert response.json() == {
            "user_id": "u1",
            "deleted": {
                "facts": 3,
                "fact_events": 6,
                "fact_conflicts": 1,
                "episodes": 1,
                "admin_log_entries": 0,
                "embedding_cache_rows": 0,  # (the hash embedder caches nothing: tests/privacy has the cached case)
                "task_records": 0,
            },
        }
        assert api.get("/api/v1/facts", {"user_id": "u1", "validity": "all"}).json()["results"] == []
        assert api.get("/api/v1/conflicts", {"user_id": "u1"}).json()["results"] == []
        for model in (Fact, FactEvent, FactConflict, Episode):
            assert not model.objects.filter(tenant=tenant, user_id="u1").exists(), model
        assert Fact.objects.filter(tenant=tenant, user_id="u2").count() == 1
        other = other_tenant_and_key[0]
        assert (Fact.objects.filter(tenant=other).count(), Episode.objects.filter(tenant=other).count()) == (1, 1)

    def test_history_of_an_erased_fact_is_404(self, api, tenant, user_data):
        fact_id = Fact.objects.filter(tenant=tenant, user_id="u1").values_list("pk", flat=True).first()

        api.delete("/api/v1/users/u1")

        assert api.get(f"/api/v1/facts/{fact_id}/history").status_code == 404
        assert api.get(f"/api/v1/facts/{fact_id}").status_code == 404

    def test_erasing_again_deletes_nothing(self, api, user_data):
        api.delete("/api/v1/users/u1")

        again = api.delete("/api/v1/users/u1")

        assert again.status_code == 200
        assert set(again.json()["deleted"].values()) == {0}

    def test_user_ids_with_slashes_are_erased_and_bad_ones_are_400(self, api, tenant):
        add(tenant, "Slashed user fact", user_id="team/alice")

        assert api.delete("/api/v1/users/team/alice").json()["deleted"]["facts"] == 1
        bad = api.delete("/api/v1/users/two%20words")
        assert (bad.status_code, list(bad.json()["error"]["details"])) == (400, ["user_id"])


def test_the_schema_documents_the_forgetting_endpoints(api):
    paths = api.get("/api/schema/", HTTP_ACCEPT="application/json").json()["paths"]

    for path in [
        "/api/v1/forget-policy",
        "/api/v1/forget-policy/dry-run",
        "/api/v1/forget-runs",
        "/api/v1/forget-runs/{run_id}",
        "/api/v1/facts/{fact_id}/restore",
        "/api/v1/users/{user_id}",
    ]:
        assert path in paths, path
    assert "200" in paths["/api/v1/users/{user_id}"]["delete"]["responses"]  # the counts, not an empty 204
