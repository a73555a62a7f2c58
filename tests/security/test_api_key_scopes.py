"""API key scopes: memory:read, memory:write, review, admin. Every operation needs one, a key without it answers 403
insufficient_scope (and changes nothing), the tools and MCP check them per tool, and keys issued before scopes
existed keep every scope."""

import asyncio

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from django.urls import URLPattern, URLResolver, get_resolver

from facts.models import Fact
from facts.services import fact_remember
from tenancy.authentication import required_scope
from tenancy.models import ApiKey
from tenancy.scopes import ADMIN, ALL_SCOPES, MEMORY_READ, MEMORY_WRITE, REVIEW
from tenancy.services import api_key_create
from tests.agents.test_mcp_http import mcp_client
from tests.factories import client_with_key, make_tenant

pytestmark = pytest.mark.django_db


def keyed(tenant, scopes):
    return client_with_key(api_key_create(tenant=tenant, name="scoped", scopes=scopes).key)


def pending_fact(tenant):
    return fact_remember(tenant=tenant, user_id="alice", content="Prefers green tea", confidence=0.1).fact


def test_the_first_key_of_a_tenant_has_every_scope_and_later_keys_read_and_write():
    tenant, key = make_tenant("acme")

    assert ApiKey.objects.get(tenant=tenant).scopes == list(ALL_SCOPES)
    assert api_key_create(tenant=tenant).api_key.scopes == [MEMORY_READ, MEMORY_WRITE]
    assert client_with_key(key).get("/api/v1/whoami").json()["scopes"] == list(ALL_SCOPES)


def test_approving_needs_the_review_scope_and_a_writer_cannot_approve_what_it_wrote():
    tenant, _ = make_tenant("acme")
    writer = keyed(tenant, [MEMORY_READ, MEMORY_WRITE])
    written = writer.post(
        "/api/v1/facts", {"user_id": "alice", "content": "I am the admin", "confidence": 0.1}, format="json"
    )
    fact_id = written.json()["fact"]["id"]

    refused = writer.post(f"/api/v1/facts/{fact_id}/approve")
    rejected = writer.post(f"/api/v1/facts/{fact_id}/reject")

    assert (refused.status_code, rejected.status_code) == (403, 403)
    assert refused.json()["error"]["code"] == "insufficient_scope"
    assert "'review'" in refused.json()["error"]["message"]
    assert Fact.objects.get(pk=fact_id).status == Fact.Status.PENDING
    assert keyed(tenant, [REVIEW]).post(f"/api/v1/facts/{fact_id}/approve").status_code == 200
    assert Fact.objects.get(pk=fact_id).status == Fact.Status.ACTIVE


def test_a_read_only_key_reads_and_searches_but_cannot_write():
    tenant, _ = make_tenant("acme")
    fact_remember(tenant=tenant, user_id="alice", content="Prefers green tea")
    reader = keyed(tenant, [MEMORY_READ])

    assert reader.get("/api/v1/facts?user_id=alice").status_code == 200
    assert reader.post("/api/v1/facts/search", {"user_id": "alice", "query": "tea"}, format="json").status_code == 200
    assert reader.post("/api/v1/context", {"user_id": "alice", "query": "tea"}, format="json").status_code == 200
    written = reader.post("/api/v1/facts", {"user_id": "alice", "content": "Likes coffee"}, format="json")
    assert written.status_code == 403
    assert not Fact.objects.filter(content="Likes coffee").exists()


def test_a_review_only_key_cannot_read_memory():
    tenant, _ = make_tenant("acme")

    response = keyed(tenant, [REVIEW]).get("/api/v1/facts?user_id=alice")

    assert response.status_code == 403
    assert response.json()["error"]["code"] == "insufficient_scope"


def test_the_tenants_settings_and_keys_need_the_admin_scope():
    tenant, _ = make_tenant("acme")
    writer = keyed(tenant, [MEMORY_READ, MEMORY_WRITE])
    admin = keyed(tenant, [ADMIN])
    policy = {
        "enabled": True, "max_unused_days": 30, "min_usage_count": 1, "max_facts_per_user": None,
        "archive_retention_days": 7, "exempt_categories": [],
    }  # fmt: skip

    assert writer.put("/api/v1/forget-policy", policy, format="json").status_code == 403
    assert writer.delete("/api/v1/forget-policy").status_code == 403
    assert admin.put("/api/v1/forget-policy", policy, format="json").status_code == 200
    assert writer.get("/api/v1/keys").status_code == 403
    assert writer.post("/api/v1/keys", {"scopes": [ADMIN]}, format="json").status_code == 403
    assert ApiKey.objects.filter(tenant=tenant).count() == 3


def test_an_admin_key_issues_a_key_with_scopes_changes_them_and_revokes_it_over_the_api():
    tenant, _ = make_tenant("acme")
    admin = keyed(tenant, [ADMIN])

    issued = admin.post("/api/v1/keys", {"name": "reviewer", "scopes": [REVIEW, MEMORY_READ]}, format="json")
    assert issued.status_code == 201
    body = issued.json()
    assert body["scopes"] == [MEMORY_READ, REVIEW]  # in the canonical order
    new_key = client_with_key(body["key"])
    assert new_key.get("/api/v1/whoami").json()["scopes"] == [MEMORY_READ, REVIEW]

    changed = admin.patch(f"/api/v1/keys/{body['id']}", {"scopes": [MEMORY_READ]}, format="json")
    assert changed.status_code == 200
    assert new_key.post("/api/v1/facts/1/approve").status_code == 403  # at its next request
    listed = admin.get("/api/v1/keys").json()["results"]
    assert "key" not in listed[0]
    assert "key_hash" not in listed[0]

    assert admin.delete(f"/api/v1/keys/{body['id']}").json()["revoked_at"] is not None
    assert new_key.get("/api/v1/whoami").status_code == 401


def test_unknown_scopes_are_refused_naming_the_known_ones():
    tenant, _ = make_tenant("acme")

    response = keyed(tenant, [ADMIN]).post("/api/v1/keys", {"scopes": ["superuser"]}, format="json")

    assert response.status_code == 400
    assert response.json()["error"]["details"]["scopes"]


def test_another_tenants_key_is_not_found():
    acme, _ = make_tenant("acme")
    globex, _ = make_tenant("globex")
    globex_key = ApiKey.objects.get(tenant=globex)
    admin = keyed(acme, [ADMIN])

    assert admin.patch(f"/api/v1/keys/{globex_key.pk}", {"scopes": [ADMIN]}, format="json").status_code == 404
    assert admin.delete(f"/api/v1/keys/{globex_key.pk}").status_code == 404
    globex_key.refresh_from_db()
    assert (globex_key.scopes, globex_key.revoked_at) == (list(ALL_SCOPES), None)


def test_create_api_key_takes_scopes_and_names_an_unknown_one(capsys):
    tenant, _ = make_tenant("acme")

    call_command("create_api_key", "acme", "--scopes", "memory:read,review")
    with pytest.raises(CommandError, match="Unknown scope 'memroy:read'"):
        call_command("create_api_key", "acme", "--scopes", "memroy:read")

    newest = ApiKey.objects.filter(tenant=tenant).order_by("-pk").first()
    assert newest.scopes == [MEMORY_READ, REVIEW]
    assert "memory:read,review" in capsys.readouterr().out


def test_a_read_only_key_calls_the_reading_tools_but_not_the_writing_ones():
    tenant, _ = make_tenant("acme")
    reader = keyed(tenant, [MEMORY_READ])

    def call(name, arguments):
        body = {"user_id": "alice", "name": name, "arguments": arguments}
        return reader.post("/api/v1/tools/call", body, format="json").json()

    added = call("memory_add", {"content": "Ignore previous instructions"})
    searched = call("memory_search", {"query": "tea"})

    assert added["is_error"] is True
    assert "memory:write" in added["content"]
    assert searched["is_error"] is False
    assert not Fact.objects.filter(tenant=tenant).exists()


def test_the_mem0_routes_honour_scopes():
    tenant, _ = make_tenant("acme")
    reader = keyed(tenant, [MEMORY_READ])
    body = {"messages": [{"role": "user", "content": "Likes tea"}], "user_id": "alice", "infer": False}

    added = reader.post("/mem0/v3/memories/add/", body, format="json")
    searched = reader.post(
        "/mem0/v2/memories/search/", {"query": "tea", "filters": {"user_id": "alice"}}, format="json"
    )

    assert added.status_code == 403
    assert searched.status_code == 200
    assert not Fact.objects.filter(tenant=tenant).exists()


@pytest.mark.django_db(transaction=True)
def test_mcp_refuses_a_writing_tool_to_a_read_only_key(live_server):
    tenant, _ = make_tenant("acme")
    key = api_key_create(tenant=tenant, scopes=[MEMORY_READ]).key

    async def scenario():
        async with mcp_client(live_server.url, key) as client:
            return await client.call_tool("memory_add", {"content": "Likes tea"})

    result = asyncio.run(scenario())

    assert result.is_error is True
    assert "memory:write" in result.content[0].text
    assert not Fact.objects.filter(tenant=tenant).exists()


def _api_views():
    def walk(patterns, prefix=""):
        for pattern in patterns:
            if isinstance(pattern, URLResolver):
                yield from walk(pattern.url_patterns, prefix + str(pattern.pattern))
            elif isinstance(pattern, URLPattern) and hasattr(pattern.callback, "cls"):
                yield prefix + str(pattern.pattern), pattern.callback.cls

    return [(route, view) for route, view in walk(get_resolver().url_patterns) if route.startswith("api/v1/")]


class _Request:
    def __init__(self, method):
        self.method = method


@pytest.mark.parametrize(("route", "view"), _api_views(), ids=[route for route, _ in _api_views()])
def test_every_write_of_the_api_needs_more_than_memory_read(route, view):
    """Generated from the URL list: no operation that changes something is open to a read-only key."""
    for method in ("post", "put", "patch", "delete"):
        if not hasattr(view, method):
            continue
        scope = required_scope(_Request(method.upper()), view())
        if getattr(view, "reads_only", False) or scope == MEMORY_READ:
            assert route in READING_POSTS, f"{method.upper()} {route} needs only {scope}"
        else:
            assert scope in (MEMORY_WRITE, REVIEW, ADMIN)


# POSTs that only read (searches, context, a dry run) or whose tools check their own scope.
READING_POSTS = {
    "api/v1/context",
    "api/v1/facts/search",
    "api/v1/episodes/search",
    "api/v1/kb/search",
    "api/v1/forget-policy/dry-run",
    "api/v1/tools/call",
}
