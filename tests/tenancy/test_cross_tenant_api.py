"""Tenant B's key against every API route, generated from the URL resolver: each path parameter filled with tenant
A's real objects, each method the view allows. A's objects answer 404, lists and searches show nothing of A, and
A's rows stay as they were. A new route is covered without a new test; one the generator cannot fill fails here."""

import json
import re

import pytest
from django.db import transaction
from django.urls import URLPattern, URLResolver, get_resolver

from tests.factories import client_with_key, make_fact, make_tenant
from tests.tenancy.cross_tenant import USER_ID, assert_no_secret, rows_of, tenant_a_with_everything

pytestmark = pytest.mark.django_db

API_PREFIX = "api/v1/"
PARAMETER = re.compile(r"<(?:(?P<converter>\w+):)?(?P<name>\w+)>")
# Path parameters naming one of A's objects: B must get 404, as for an id that does not exist. A user id is not an
# object (B may have its own user of that id): B's call must simply find nothing of A's.
OBJECT_PARAMETERS = {"fact_id", "conflict_id", "episode_id", "document_id", "run_id", "key_id"}

# What B sends: enough for the call to reach its service (a 400 proves nothing), aimed at A's user and A's words.
SEARCH = {"user_id": USER_ID, "query": "PostgreSQL green tea Lisbon nurse"}
REQUESTS = {
    ("whoami", "GET"): {},
    ("api-keys", "GET"): {},
    ("facts-delete-by-filter", "POST"): {"data": {"user_id": USER_ID, "filters": {"category": "preference"}}},
    ("api-keys", "POST"): {"data": {"name": "b's key"}},
    ("api-key-detail", "PATCH"): {"data": {"scopes": ["memory:read"]}},
    ("api-key-detail", "DELETE"): {},
    ("embedding-cache", "GET"): {},
    ("context", "POST"): {"data": {**SEARCH, "include_documents": True}},
    ("facts", "GET"): {"query": {"user_id": USER_ID, "status": "active,pending,archived,rejected", "validity": "all"}},
    ("facts", "POST"): {"data": {"user_id": USER_ID, "content": "Prefers PostgreSQL for new projects"}},
    ("facts-import", "POST"): {"data": {"facts": [{"user_id": USER_ID, "content": "Lives in Lisbon"}]}},
    ("facts-search", "POST"): {"data": {**SEARCH, "include_pending": True}},
    ("fact-detail", "GET"): {},
    ("fact-detail", "PATCH"): {"data": {"content": "Rewritten by tenant B", "pinned": True}},
    ("fact-detail", "DELETE"): {},
    ("fact-history", "GET"): {},
    ("fact-approve", "POST"): {},
    ("fact-reject", "POST"): {},
    ("fact-restore", "POST"): {},
    ("fact-undo-supersession", "POST"): {},
    ("conflicts", "GET"): {"query": {"user_id": USER_ID}},
    ("conflict-resolve", "POST"): {"data": {"resolution": "keep_new"}},
    ("forget-policy", "GET"): {},
    ("forget-policy", "PUT"): {
        "data": {
            "enabled": True,
            "max_unused_days": 1,
            "min_usage_count": 100,
            "max_facts_per_user": 1,
            "archive_retention_days": 0,
            "exempt_categories": [],
        }
    },  # fmt: skip
    ("forget-policy", "PATCH"): {"data": {"max_unused_days": 1}},
    ("forget-policy", "DELETE"): {},
    ("forget-dry-run", "POST"): {"data": {}},
    ("forget-runs", "GET"): {},
    ("forget-run-detail", "GET"): {},
    ("user-erase", "DELETE"): {},
    ("user-export", "GET"): {},
    # A JSON document of our format (the test client sends JSON); JSON Lines go the same way (tests/privacy).
    ("user-import", "POST"): {
        "data": {
            "results": [
                {"type": "header", "format": "memoryproject", "version": 1, "user_id": USER_ID},
                {"type": "fact", "id": 1, "content": "Lives in Lisbon"},
            ]
        }
    },
    ("episodes", "GET"): {"query": {"user_id": USER_ID}},
    ("episodes", "POST"): {
        "data": {
            "user_id": USER_ID,
            "session_id": "session-1",
            "messages": [{"role": "user", "content": "I prefer PostgreSQL and green tea."}],
        }
    },  # fmt: skip
    ("episodes-search", "POST"): {"data": SEARCH},
    ("episode-detail", "GET"): {},
    ("episode-retry", "POST"): {},
    ("kb-documents", "GET"): {},
    ("kb-documents", "POST"): {"data": {"doc_id": "runbook.md", "text": "# Deploys\n\nOn Fridays."}},
    ("kb-document-detail", "GET"): {},
    ("kb-document-detail", "DELETE"): {},
    ("kb-document-retry", "POST"): {},
    ("kb-search", "POST"): {"data": {"query": "deploy PostgreSQL Fridays green tea"}},
    ("tools", "GET"): {"query": {"format": "anthropic"}},
    ("tools-call", "POST"): {
        "data": {"user_id": USER_ID, "name": "memory_search", "arguments": {"query": SEARCH["query"]}}
    },
}


def api_routes() -> list[tuple[str, str, type]]:
    """(route, name, view class) of every URL under /api/v1/, walked from the project's resolver."""
    found = []

    def walk(patterns, prefix: str) -> None:
        for entry in patterns:
            route = prefix + str(entry.pattern)
            if isinstance(entry, URLResolver):
                walk(entry.url_patterns, route)
            elif isinstance(entry, URLPattern) and route.startswith(API_PREFIX):
                found.append((route, entry.name, entry.callback.view_class))

    walk(get_resolver().url_patterns, "")
    return found


def allowed_methods(view_class) -> list[str]:
    methods = [method.upper() for method in view_class.http_method_names if hasattr(view_class, method)]
    return [*methods, "HEAD"] if "GET" in methods and "HEAD" not in methods else methods


def calls(a) -> list[dict]:
    """One call per route, method and filling of its path parameters with A's objects."""
    generated = []
    for route, name, view_class in api_routes():
        parameters = [match["name"] for match in PARAMETER.finditer(route)]
        missing = [parameter for parameter in parameters if parameter not in a.objects]
        if missing:
            pytest.fail(f"/{route}: no filler for {missing}: add A's objects for it in tenant_a_with_everything()")
        fillings = [{}]
        for parameter in parameters:
            fillings = [
                {**filling, parameter: getattr(value, "pk", value)}
                for filling in fillings
                for value in a.objects[parameter]
            ]
        for method in allowed_methods(view_class):
            if (name, method) not in REQUESTS and method not in ("HEAD", "OPTIONS"):
                pytest.fail(f"{method} /{route} ({name}): add what tenant B sends to REQUESTS")
            request = REQUESTS.get((name, "GET" if method == "HEAD" else method), {})
            for filling in fillings:
                path = "/" + PARAMETER.sub(lambda match, filling=filling: str(filling[match["name"]]), route)
                generated.append(
                    {"name": name, "method": method, "path": path, "parameters": parameters, "filling": filling}
                    | request
                )
    return generated


def send(client, call):
    method = call["method"].lower()
    if "data" in call:
        return getattr(client, method)(call["path"], data=json.dumps(call["data"]), content_type="application/json")
    return getattr(client, method)(call["path"], call.get("query"))


@pytest.fixture
def a():
    return tenant_a_with_everything()


@pytest.fixture
def b():
    tenant, key = make_tenant("globex")
    make_fact(tenant=tenant, user_id=USER_ID, content="Prefers MySQL")  # B's lists have something of B's
    return client_with_key(key)


def test_every_api_route_answers_tenant_b_without_a_trace_of_tenant_a(a, b):
    before = rows_of(a)
    generated = calls(a)
    assert len({call["name"] for call in generated}) == len(api_routes())

    for call in generated:
        response = send(b, call)
        what = f"{call['method']} {call['path']} ({call['name']}) with tenant B's key"

        if call["method"] == "OPTIONS":
            assert response.status_code == 200, what
        elif OBJECT_PARAMETERS & set(call["parameters"]):
            assert response.status_code == 404, f"{what}: {response.status_code} {response.content[:300]!r}"
            if call["method"] != "HEAD":
                assert response.json()["error"]["code"] == "not_found", what
        else:
            assert 200 <= response.status_code < 300, f"{what}: {response.status_code} {response.content[:300]!r}"
        assert_no_secret(response, what)
        assert rows_of(a) == before, f"{what} changed tenant A's rows"


def test_every_filled_route_does_reach_a_real_object_of_tenant_a(a):
    """The control: with A's own key each (route, method) succeeds on at least one of its fillings, so the 404s
    above are tenant B's, not a wrong id's. Each call is rolled back."""
    own = client_with_key(a.key)
    answered = {}
    for call in calls(a):
        if not call["parameters"] or call["method"] == "OPTIONS":
            continue
        with transaction.atomic():
            status = send(own, call).status_code
            transaction.set_rollback(True)
        answered.setdefault((call["method"], call["name"]), []).append(status)

    assert answered
    failing = {route: statuses for route, statuses in answered.items() if not any(s < 300 for s in statuses)}
    assert not failing, f"no filling reaches a real object of A (statuses by route): {failing}"
