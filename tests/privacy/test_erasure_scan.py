"""The erasure of a user, checked the hard way: marker text planted through every write path (the API, the admin,
episodes with their extraction, the knowledge base), the user erased, then every table of every installed app
scanned for the marker and for the sha256 of every text the user had embedded (the embedding cache keeps hashes)."""

import hashlib
from collections import Counter

import pytest
from django.apps import apps
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Permission
from django.db import connection
from django.test import Client

from ai.models import EmbeddingCache
from facts.models import Fact
from tenancy.services import tenant_membership_add
from tests.factories import client_with_key
from tests.facts.test_admin import form_data

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("openai_settings")]

USER = "erase-me-4417"
NEIGHBOUR = "stays-4417"
MARKER = "Zanzibar4417"  # in everything the user says, and in every query about the user
NEIGHBOUR_MARKER = "Marmalade6350"  # the same tenant's other user: kept
OTHER_TENANT_MARKER = "Pelican8126"  # another tenant's user with the same user id: kept
KB_MARKER = "Quokka2093"  # the tenant's knowledge base: the tenant's, not the user's, so kept


@pytest.fixture(autouse=True)
def rule_based_chat(openai_settings):
    openai_settings.CHAT_PROVIDER = "none"  # extraction and judging by rules: the fake's chat has no script


def installed_tables() -> list[str]:
    """Every table of every installed app, from the app registry (many-to-many tables included), so that a table
    added later is scanned too."""
    return sorted({model._meta.db_table for model in apps.get_models(include_auto_created=True)})


def rows_containing(needle: str, *, tenant_id: int | None = None) -> dict[str, int]:
    """How many rows of each table hold `needle` anywhere in their text form (only rows of `tenant_id` in tables
    that have tenants, when given)."""
    found = {}
    with connection.cursor() as cursor:
        for table in installed_tables():
            columns = {column.name for column in connection.introspection.get_table_description(cursor, table)}
            sql = f"SELECT count(*) FROM {connection.ops.quote_name(table)} AS t WHERE t::text ILIKE %s"
            params = [f"%{needle}%"]
            if tenant_id is not None and "tenant_id" in columns:
                sql, params = sql + " AND t.tenant_id = %s", [*params, tenant_id]
            cursor.execute(sql, params)
            if count := cursor.fetchone()[0]:
                found[table] = count
    return found


def sha256(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def embedded_texts(fake_openai, marker: str) -> set[str]:
    """What went to the embedding endpoint holding `marker`: exactly the texts whose hashes a cache may keep."""
    return {
        text
        for request in fake_openai.requests_to("/v1/embeddings")
        for text in request["body"]["input"]
        if marker in text
    }


def traces(needles) -> dict[str, dict[str, int]]:
    return {needle: found for needle in needles if (found := rows_containing(needle))}


@pytest.fixture
def staff_client(tenant):
    user = get_user_model().objects.create_user("reviewer", password="pw", is_staff=True)
    user.user_permissions.add(*Permission.objects.filter(content_type__app_label__in=["facts", "episodes", "kb"]))
    tenant_membership_add(tenant=tenant, user=user)
    client = Client()
    client.force_login(user)
    return client


@pytest.fixture
def planted(tenant, api, other_tenant_and_key, staff_client, django_capture_on_commit_callbacks):
    """The user's marker through every path that writes or embeds text; the neighbours' markers beside it."""
    other_api = client_with_key(other_tenant_and_key[1])

    def post(client, path, payload):
        with django_capture_on_commit_callbacks(execute=True):  # queued extraction runs inline (sync django-q)
            response = client.post(path, payload, format="json")
        assert response.status_code in (200, 201, 202), (path, response.content)
        return response.json()

    # The API: facts created, contradicted (a conflict, resolved by a merged text), updated, imported.
    created = post(api, "/api/v1/facts", {"user_id": USER, "content": f"Prefers {MARKER} tea in the morning"})
    post(api, "/api/v1/facts", {"user_id": USER, "content": f"Lives in Berlin near {MARKER} square"})
    contradiction = post(
        api, "/api/v1/facts", {"user_id": USER, "content": f"Lives in Paris near {MARKER} square", "confidence": 0.5}
    )
    [conflict_id] = contradiction["conflict_ids"]
    post(
        api,
        f"/api/v1/conflicts/{conflict_id}/resolve",
        {"resolution": "merge", "content": f"Lives between Berlin and Paris, near {MARKER} square"},
    )
    patched = api.patch(
        f"/api/v1/facts/{created['fact']['id']}", {"content": f"Prefers {MARKER} coffee"}, format="json"
    )
    assert patched.status_code == 200, patched.content
    post(
        api,
        "/api/v1/facts/import",
        {
            "facts": [
                {"user_id": USER, "content": f"Imported note about {MARKER} gardens"},
                {"user_id": NEIGHBOUR, "content": f"Imported note about {NEIGHBOUR_MARKER} jars"},
            ]
        },
    )
    # An episode, with its extraction (facts, summary and its embedding) run by the queued task.
    episode = post(
        api,
        "/api/v1/episodes",
        {
            "user_id": USER,
            "session_id": "s1",
            "messages": [
                {"role": "user", "content": f"I live in {MARKER} harbour town these days, by the sea."},
                {"role": "assistant", "content": f"Noted: {MARKER} harbour town."},
            ],
        },
    )
    # Searches and context with the user's words in the query (their embeddings are cached).
    post(api, "/api/v1/facts/search", {"user_id": USER, "query": f"what about {MARKER} square?"})
    post(api, "/api/v1/episodes/search", {"user_id": USER, "query": f"harbour of {MARKER}"})
    post(api, "/api/v1/context", {"user_id": USER, "query": f"where near {MARKER} does the user live?"})
    # The admin: a fact added, one edited, one deleted by a staff user (each leaves a line in the admin's log).
    added = staff_client.post(
        "/admin/facts/fact/add/", form_data(tenant=tenant.pk, user_id=USER, content=f"Admin wrote {MARKER} hiking")
    )
    assert added.status_code == 302, added.content
    hiking = Fact.objects.get(tenant=tenant, content=f"Admin wrote {MARKER} hiking")
    edited = staff_client.post(
        f"/admin/facts/fact/{hiking.pk}/change/", form_data(hiking, content=f"Admin edited {MARKER} hiking")
    )
    assert edited.status_code == 302, edited.content
    doomed = post(api, "/api/v1/facts", {"user_id": USER, "content": f"Short-lived {MARKER} fact about chess"})
    deleted = staff_client.post(f"/admin/facts/fact/{doomed['fact']['id']}/delete/", {"post": "yes"})
    assert deleted.status_code == 302, deleted.content
    # The tenant's knowledge base, searched with the user's words through the context.
    post(api, "/api/v1/kb/documents", {"doc_id": "guide.md", "text": f"# Guide\n\nThe {KB_MARKER} office opens at 9."})
    post(api, "/api/v1/context", {"user_id": USER, "query": f"When does the {KB_MARKER} office open for {MARKER}?"})
    # Neighbours: the same tenant's other user, and another tenant's user with the very same id.
    post(api, "/api/v1/facts", {"user_id": NEIGHBOUR, "content": f"Prefers {NEIGHBOUR_MARKER} on toast"})
    post(api, "/api/v1/context", {"user_id": NEIGHBOUR, "query": f"what does {NEIGHBOUR_MARKER} go on?"})
    post(other_api, "/api/v1/facts", {"user_id": USER, "content": f"Prefers {OTHER_TENANT_MARKER} watching"})
    post(
        other_api,
        "/api/v1/episodes",
        {
            "user_id": USER,
            "session_id": "s1",
            "messages": [{"role": "user", "content": f"I live in {OTHER_TENANT_MARKER} bay, by the sea."}],
        },
    )
    post(other_api, "/api/v1/context", {"user_id": USER, "query": f"where is {OTHER_TENANT_MARKER} bay?"})
    return {"episode_id": episode["id"]}


def test_erasure_leaves_no_trace_of_the_user_in_any_table(tenant, api, fake_openai, planted):
    texts = embedded_texts(fake_openai, MARKER)
    needles = [MARKER, *map(sha256, texts), f"episode_extract-{planted['episode_id']}"]
    assert len(texts) >= 10  # every write and search path did embed the user's words
    before = traces(needles)
    assert {"facts_fact", "facts_factevent", "episodes_episode", "django_admin_log"} <= set(before[MARKER])
    assert set(before) == set(needles)  # the scan does see every trace while it is there

    cached = EmbeddingCache.objects.filter(tenant=tenant, user_id=USER).count()

    response = api.delete(f"/api/v1/users/{USER}")

    assert response.status_code == 200
    deleted = response.json()["deleted"]
    assert (deleted["embedding_cache_rows"], deleted["task_records"], deleted["admin_log_entries"]) == (cached, 1, 3)
    assert traces(needles) == {}
    assert rows_containing(USER, tenant_id=tenant.pk) == {}


def cache_rows_by_owner() -> Counter:
    return Counter(EmbeddingCache.objects.values_list("tenant__name", "user_id"))


def test_erasure_keeps_the_neighbours_and_the_tenants_knowledge_base(tenant, api, fake_openai, planted):
    others = [
        NEIGHBOUR_MARKER,
        OTHER_TENANT_MARKER,
        KB_MARKER,
        *map(sha256, embedded_texts(fake_openai, NEIGHBOUR_MARKER) | embedded_texts(fake_openai, OTHER_TENANT_MARKER)),
        *(sha256(text) for text in embedded_texts(fake_openai, KB_MARKER) if MARKER not in text),  # the chunk's
    ]
    before, cached = traces(others), cache_rows_by_owner()
    assert {"kb_document", "kb_kbchunk", "ai_embeddingcache"} <= set(before[KB_MARKER]) | set(before[others[-1]])
    assert {("acme", USER), ("acme", NEIGHBOUR), ("acme", ""), ("globex", USER)} <= set(cached)

    api.delete(f"/api/v1/users/{USER}")

    assert traces(others) == before
    assert cache_rows_by_owner() == cached - Counter({("acme", USER): cached["acme", USER]})
    assert api.get("/api/v1/kb/documents").json()["results"][0]["doc_id"] == "guide.md"
