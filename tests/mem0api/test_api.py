"""The Mem0-compatible routes over HTTP, for what mem0ai's client never sends: older clients' routes, bad input,
features we lack, authentication and the error answers (the routes are out of the OpenAPI schema, so out of its
fuzzing: these are their bad-input tests)."""

import json
from datetime import timedelta
from urllib.parse import urlencode

import pytest
from django.utils import timezone
from rest_framework.test import APIClient

from facts.models import Fact
from tests.factories import make_fact

pytestmark = pytest.mark.django_db


@pytest.fixture
def mem0(tenant_and_key) -> APIClient:
    """A client sending the tenant's key as mem0ai does: `Authorization: Token <key>`."""
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {tenant_and_key[1]}")
    return client


def error_of(response) -> tuple[int, str, str]:
    """(status, code, detail) of a Mem0 error answer, checking that detail repeats the message (what mem0ai reads)."""
    body = response.json()
    assert body["detail"] == body["error"]["message"]
    return response.status_code, body["error"]["code"], body["detail"]


def add(client, **body):
    return client.post("/mem0/v3/memories/add/", body, format="json")


SAID = [{"role": "user", "content": "I prefer PostgreSQL"}]


# --- authentication -----------------------------------------------------------------------------------------------


def test_without_a_key_the_answer_is_a_json_401_asking_for_a_token(tenant):
    response = APIClient().get("/mem0/v1/ping/")

    assert error_of(response)[:2] == (401, "not_authenticated")
    assert response["WWW-Authenticate"] == 'Token realm="mem0"'


@pytest.mark.parametrize(
    ("header", "code"),
    [
        pytest.param("Token mp_wrong", "authentication_failed", id="a wrong key"),
        pytest.param("Token", "authentication_failed", id="no key after Token"),
        pytest.param("Token a b", "authentication_failed", id="two words"),
        pytest.param("Basic YWxpY2U6cHc=", "not_authenticated", id="another scheme"),
    ],
)
def test_a_wrong_or_malformed_key_is_a_json_401(tenant, header, code):
    response = APIClient().get("/mem0/v1/ping/", HTTP_AUTHORIZATION=header)

    assert error_of(response)[:2] == (401, code)


def test_our_own_bearer_scheme_works_too(tenant_and_key):
    response = APIClient().get("/mem0/v1/ping/", HTTP_AUTHORIZATION=f"Bearer {tenant_and_key[1]}")

    assert response.status_code == 200
    assert response.json()["org_id"] == tenant_and_key[0].name


def test_failed_keys_are_throttled_per_address_as_on_the_rest_of_the_api(tenant_and_key, settings, throttle_clock):
    settings.AUTH_FAILURE_THROTTLE_RATE = "2/min"
    anonymous = APIClient()
    for _ in range(2):
        assert anonymous.get("/mem0/v1/ping/", HTTP_AUTHORIZATION="Token mp_wrong").status_code == 401

    response = anonymous.get("/mem0/v1/ping/", HTTP_AUTHORIZATION="Token mp_wrong")
    valid = anonymous.get("/mem0/v1/ping/", HTTP_AUTHORIZATION=f"Token {tenant_and_key[1]}")

    assert error_of(response)[:2] == (429, "throttled")
    assert int(response["Retry-After"]) >= 1
    assert valid.status_code == 200  # the failures are slowed, never a key that works


# --- errors in the Mem0 answer ------------------------------------------------------------------------------------


@pytest.mark.parametrize("path", ["/mem0/", "/mem0/v9/memories/", "/mem0/v1/ping", "/mem0/v1/memories/1/nope/"])
def test_an_unknown_route_is_a_json_404_naming_it(mem0, path):
    status, code, detail = error_of(mem0.get(path))

    assert (status, code) == (404, "not_found")
    assert path in detail


@pytest.mark.parametrize(
    ("method", "path", "feature"),
    [
        ("get", "/mem0/v1/entities/", "listing or deleting users"),
        ("delete", "/mem0/v2/entities/user/alice/", "deleting users"),
        ("put", "/mem0/v1/batch/", "batch updates"),
        ("post", "/mem0/v1/exports/", "Mem0 exports"),
        ("get", "/mem0/v1/event/0b6f/", "events are not supported"),
        ("get", "/mem0/api/v1/orgs/organizations/acme/projects/default/", "organizations and projects"),
        ("post", "/mem0/api/v1/webhooks/projects/default/", "webhooks"),
        ("get", "/mem0/v2/entities/user/alice/profile/", "memory profiles"),
    ],
)
def test_mem0_features_we_lack_answer_400_not_supported_saying_so(mem0, method, path, feature):
    status, code, detail = error_of(getattr(mem0, method)(path, {"memories": []}, format="json"))

    assert (status, code) == (400, "not_supported")
    assert feature in detail


def test_a_body_over_the_limit_is_a_json_413_before_it_is_read(mem0, settings):
    settings.API_MAX_BODY_BYTES = 1000

    response = add(mem0, user_id="alice", infer=False, messages=[{"role": "user", "content": "x" * 2000}])

    assert response.status_code == 413
    assert response.json()["error"]["code"] == "payload_too_large"


def test_an_unexpected_error_is_a_json_500_without_a_traceback(mem0, tenant, monkeypatch):
    def broken(**kwargs):
        raise RuntimeError("secret internals")

    monkeypatch.setattr("facts.selectors.fact_get", broken)
    mem0.raise_request_exception = False

    response = mem0.get(f"/mem0/v1/memories/{make_fact(tenant=tenant).pk}/")

    assert response.status_code == 500
    assert response.json()["error"]["code"] == "server_error"
    assert b"secret internals" not in response.content


def test_a_body_that_is_not_json_is_a_400(mem0):
    response = mem0.generic("POST", "/mem0/v3/memories/search/", "{query", content_type="application/json")

    assert error_of(response)[:2] == (400, "parse_error")


def test_a_wrong_method_is_a_json_405(mem0):
    assert error_of(mem0.get("/mem0/v3/memories/add/"))[:2] == (405, "method_not_allowed")


# --- bad input ----------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("body", "refused"),
    [
        pytest.param({"user_id": "alice"}, (400, "validation_error"), id="no messages"),
        pytest.param({"user_id": "alice", "messages": []}, (400, "validation_error"), id="no message"),
        pytest.param({"user_id": "alice", "messages": "hi"}, (400, "validation_error"), id="messages as text"),
        pytest.param(
            {"user_id": "alice", "messages": [{"role": "robot", "content": "hi"}]},
            (400, "validation_error"),
            id="an unknown role",
        ),
        pytest.param(
            {"user_id": "alice", "messages": [{"role": "user", "content": " "}]},
            (400, "validation_error"),
            id="nothing said",
        ),
        pytest.param(
            {"user_id": "alice", "messages": [{"role": "system", "content": "Be brief"}], "infer": False},
            (400, "validation_error"),
            id="only a system message to store",
        ),
        pytest.param({"messages": SAID}, (400, "user_id_required"), id="no user"),
        pytest.param({"agent_id": "travel", "messages": SAID}, (400, "user_id_required"), id="an agent alone"),
        pytest.param(
            {"user_id": "alice", "messages": SAID, "metadata": {"a": {"b": {"c": {"d": {"e": {"f": {"g": 1}}}}}}}},
            (400, "validation_error"),
            id="metadata nested too deep",
        ),
        pytest.param(
            {"user_id": "alice", "run_id": "r1", "messages": SAID, "infer": False},
            (400, "not_supported"),
            id="run without inference",
        ),
        pytest.param({"user_id": "alice", "app_id": "shop", "messages": SAID}, (400, "not_supported"), id="an app"),
        pytest.param(
            {"user_id": "alice", "messages": SAID, "infer": "maybe"},
            (400, "validation_error"),
            id="infer not a boolean",
        ),
        pytest.param(
            {"user_id": "alice", "messages": SAID, "timestamp": "yesterday"},
            (400, "validation_error"),
            id="a bad timestamp",
        ),
        pytest.param(
            {"user_id": "alice", "messages": SAID, "messages_typo": 1}, (400, "validation_error"), id="an unknown field"
        ),
        pytest.param(
            {"user_id": "alice", "messages": [{"role": "user", "content": "x" * 30000}]},
            (413, "payload_too_large"),
            id="a message over its limit",
        ),
    ],
)
def test_a_bad_add_is_refused_and_stores_nothing(mem0, tenant, body, refused):
    assert error_of(add(mem0, **body))[:2] == refused
    assert not Fact.objects.filter(tenant=tenant).exists()


@pytest.mark.parametrize(
    ("path", "body", "refused"),
    [
        pytest.param("search", {"filters": {"user_id": "alice"}}, "validation_error", id="search without query"),
        pytest.param(
            "search",
            {"query": " \u200b", "filters": {"user_id": "alice"}},
            "validation_error",
            id="search of nothing visible",
        ),
        pytest.param(
            "search", {"query": "q", "filters": {"user_id": "alice"}, "top_k": 0}, "validation_error", id="top_k 0"
        ),
        pytest.param(
            "search",
            {"query": "q", "filters": {"user_id": "alice"}, "top_k": 1000},
            "validation_error",
            id="top_k too large",
        ),
        pytest.param(
            "search",
            {"query": "q", "filters": {"user_id": "alice"}, "fields": ["text"]},
            "validation_error",
            id="an unknown field",
        ),
        pytest.param(
            "search",
            {"query": "q", "filters": {"user_id": "alice"}, "rerank": True, "enable_graph": True},
            "not_supported",
            id="graph",
        ),
        pytest.param("search", {"query": "q"}, "user_id_required", id="search of nobody"),
        pytest.param("", {"filters": {"user_id": "alice"}, "page": 0}, "validation_error", id="page 0"),
        pytest.param("", {"filters": {"user_id": "alice"}, "page": 10**18}, "validation_error", id="page 10**18"),
        pytest.param("", {"filters": {"user_id": "alice"}, "page_size": 10**6}, "validation_error", id="a huge page"),
        pytest.param(
            "", {"filters": {"user_id": "alice"}, "start_date": "2024-01-01"}, "not_supported", id="a date range"
        ),
        pytest.param("", {"filters": {"user_id": "alice", "run_id": "r1"}}, "not_supported", id="a run filter"),
    ],
)
def test_bad_searches_and_lists_are_refused(mem0, path, body, refused):
    response = mem0.post(f"/mem0/v3/memories/{path}/".replace("//", "/"), body, format="json")

    assert error_of(response)[:2] == (400, refused)


@pytest.mark.parametrize(
    ("query", "refused"),
    [
        pytest.param("", "user_id_required", id="nobody: never the whole tenant"),
        pytest.param("?agent_id=travel", "user_id_required", id="an agent alone"),
        pytest.param("?app_id=shop", "not_supported", id="an app"),
        pytest.param("?filters=alice", "validation_error", id="filters that are no object"),
        pytest.param("?user_id=alice&user_id=bob", "validation_error", id="two users"),
        pytest.param("?user_id=al%00ice", "validation_error", id="NUL"),
    ],
)
def test_a_bad_delete_all_deletes_nothing(mem0, tenant, query, refused):
    make_fact(tenant=tenant, user_id="alice")

    assert error_of(mem0.delete(f"/mem0/v1/memories/{query}"))[:2] == (400, refused)
    assert Fact.objects.filter(tenant=tenant).count() == 1


def test_delete_all_deletes_what_its_filters_select(mem0, tenant):
    synced = make_fact(tenant=tenant, user_id="alice", content="from the CRM", metadata={"origin": "crm"})
    said = make_fact(tenant=tenant, user_id="alice", content="said in chat", metadata={"origin": "chat"})
    bobs = make_fact(tenant=tenant, user_id="bob", content="bob's CRM fact", metadata={"origin": "crm"})
    filters = json.dumps({"user_id": "alice", "metadata": {"origin": "crm"}})

    response = mem0.delete(f"/mem0/v1/memories/?{urlencode({'filters': filters})}")

    assert response.status_code == 200
    assert response.json()["deleted"] == 1
    assert set(Fact.objects.filter(tenant=tenant).values_list("pk", flat=True)) == {said.pk, bobs.pk}
    assert not Fact.objects.filter(pk=synced.pk).exists()


def test_a_v1_search_takes_metadata_at_the_top_as_mem0s_v1_did(mem0):
    for content, topic in (("Likes jazz", "music"), ("Likes hiking", "sport")):
        said = [{"role": "user", "content": content}]
        assert add(mem0, messages=said, user_id="alice", infer=False, metadata={"topic": topic}).status_code == 200

    response = mem0.post(
        "/mem0/v1/memories/search/",
        {"query": "likes", "user_id": "alice", "metadata": {"topic": "sport"}, "top_k": 5},
        format="json",
    )

    assert response.status_code == 200, response.content
    assert [memory["memory"] for memory in response.json()["results"]] == ["Likes hiking"]


@pytest.mark.parametrize("memory_id", ["abc", "-1", "1.0", "99999999999999999999999", "٣"])
def test_an_id_that_names_no_fact_is_404(mem0, memory_id):
    for response in (
        mem0.get(f"/mem0/v1/memories/{memory_id}/"),
        mem0.put(f"/mem0/v1/memories/{memory_id}/", {"text": "x"}, format="json"),
        mem0.delete(f"/mem0/v1/memories/{memory_id}/"),
        mem0.get(f"/mem0/v1/memories/{memory_id}/history/"),
    ):
        assert error_of(response)[:2] == (404, "not_found")


@pytest.mark.parametrize("status", [Fact.Status.PENDING, Fact.Status.REJECTED, Fact.Status.ARCHIVED])
def test_a_fact_that_is_no_memory_cannot_be_read_changed_or_deleted_through_mem0(mem0, tenant, status):
    fact = make_fact(tenant=tenant, user_id="alice", status=status)

    for response in (
        mem0.get(f"/mem0/v1/memories/{fact.pk}/"),
        mem0.put(f"/mem0/v1/memories/{fact.pk}/", {"text": "changed"}, format="json"),
        mem0.delete(f"/mem0/v1/memories/{fact.pk}/"),
    ):
        assert error_of(response)[:2] == (404, "not_found")
    fact.refresh_from_db()
    assert (fact.content, fact.status) == ("prefers PostgreSQL", status)


def retired(tenant, content: str, *, by: Fact) -> Fact:
    """A fact `by` superseded: true from a day ago until now."""
    now = timezone.now()
    return make_fact(
        tenant=tenant, user_id=by.user_id, content=content, valid_from=now - timedelta(days=1), valid_to=now,
        superseded_by=by,
    )  # fmt: skip


def test_a_superseded_fact_is_history_not_a_memory(mem0, tenant):
    new = make_fact(tenant=tenant, user_id="alice", content="Lives in Porto")
    retired(tenant, "Lives in Lisbon", by=new)

    listed = mem0.post("/mem0/v3/memories/", {"filters": {"user_id": "alice"}}, format="json").json()

    assert [memory["memory"] for memory in listed["results"]] == ["Lives in Porto"]


@pytest.mark.parametrize(
    ("body", "refused"),
    [
        pytest.param({}, "validation_error", id="nothing to change"),
        pytest.param({"text": ""}, "validation_error", id="empty text"),
        pytest.param({"text": 42}, "validation_error", id="text not a string"),
        pytest.param({"metadata": "x"}, "validation_error", id="metadata not an object"),
        pytest.param({"text": "x", "expiration_date": "2030-01-01"}, "not_supported", id="an expiry"),
        pytest.param({"text": "x", "immutable": True}, "not_supported", id="immutable"),
    ],
)
def test_a_bad_update_changes_nothing(mem0, tenant, body, refused):
    fact = make_fact(tenant=tenant, user_id="alice")

    assert error_of(mem0.put(f"/mem0/v1/memories/{fact.pk}/", body, format="json"))[:2] == (400, refused)
    fact.refresh_from_db()
    assert fact.content == "prefers PostgreSQL"


def test_delete_linked_also_deletes_the_older_facts_the_memory_replaced(mem0, tenant):
    current = make_fact(tenant=tenant, user_id="alice", content="Lives in Porto")
    oldest = retired(tenant, "Lives in Faro", by=retired(tenant, "Lives in Lisbon", by=current))
    other = make_fact(tenant=tenant, user_id="alice", content="Has a dog")

    assert mem0.delete(f"/mem0/v1/memories/{current.pk}/?delete_linked=true").status_code == 200

    assert list(Fact.objects.filter(tenant=tenant).values_list("pk", flat=True)) == [other.pk]
    assert not Fact.objects.filter(pk=oldest.pk).exists()


def test_a_delete_without_delete_linked_keeps_the_older_facts_as_history(mem0, tenant):
    current = make_fact(tenant=tenant, user_id="alice", content="Lives in Porto")
    older = retired(tenant, "Lives in Lisbon", by=current)

    assert mem0.delete(f"/mem0/v1/memories/{current.pk}/").status_code == 200

    assert list(Fact.objects.filter(tenant=tenant).values_list("pk", flat=True)) == [older.pk]


@pytest.mark.parametrize(
    ("method", "path"),
    [("get", "/mem0/v1/ping/?verbose=1"), ("get", "/mem0/v1/memories/?user_id=alice&colour=red")],
)
def test_unknown_query_parameters_are_refused(mem0, method, path):
    assert error_of(getattr(mem0, method)(path))[:2] == (400, "validation_error")


def test_a_get_with_a_body_is_refused(mem0):
    response = mem0.generic("GET", "/mem0/v1/ping/", '{"user_id": "alice"}', content_type="application/json")

    assert error_of(response)[:2] == (400, "validation_error")


# --- older clients' routes ----------------------------------------------------------------------------------------


def test_older_clients_v1_and_v2_routes_work_with_top_level_ids_and_filters(mem0, tenant):
    added = mem0.post(
        "/mem0/v1/memories/", {"messages": SAID, "user_id": "alice", "infer": False, "output_format": "v1.1"},
        format="json",
    ).json()  # fmt: skip
    memory_id = added["results"][0]["id"]

    listed = mem0.get("/mem0/v1/memories/?user_id=alice&page_size=10").json()
    v2_listed = mem0.post("/mem0/v2/memories/", {"filters": {"AND": [{"user_id": "alice"}]}}, format="json").json()
    v1_found = mem0.post("/mem0/v1/memories/search/", {"query": "PostgreSQL", "user_id": "alice"}, format="json")
    v2_found = mem0.post(
        "/mem0/v2/memories/search/", {"query": "PostgreSQL", "filters": {"user_id": "alice"}, "version": "v2"},
        format="json",
    )  # fmt: skip

    assert [memory["id"] for memory in listed["results"]] == [memory_id]
    assert [memory["id"] for memory in v2_listed["results"]] == [memory_id]
    assert [memory["id"] for memory in v1_found.json()["results"]] == [memory_id]
    assert [memory["id"] for memory in v2_found.json()["results"]] == [memory_id]
