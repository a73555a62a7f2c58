"""Every body has a limit, and a request past one is refused naming the limit and its setting, storing nothing:
metadata (bytes, keys, nesting), the user import (facts as /facts/import takes them), episodes' messages."""

import json

import pytest

from episodes.models import Episode
from facts.models import Fact
from facts.services import fact_remember
from tests.factories import client_with_key, make_tenant

pytestmark = pytest.mark.django_db

NDJSON = "application/x-ndjson"


@pytest.fixture
def api_and_tenant():
    tenant, key = make_tenant("acme")
    return client_with_key(key), tenant


def remember(api, metadata):
    return api.post("/api/v1/facts", {"user_id": "alice", "content": "Likes tea", "metadata": metadata}, format="json")


def nested(levels: int) -> dict:
    value: dict = {"leaf": 1}
    for _ in range(levels - 1):
        value = {"inner": value}
    return value


@pytest.mark.parametrize(
    ("metadata", "setting"),
    [
        ({f"k{n}": n for n in range(5_000)}, "METADATA_MAX_KEYS"),
        ({"note": "x" * 20_000}, "METADATA_MAX_BYTES"),
        (nested(8), "METADATA_MAX_DEPTH"),
    ],
    ids=["keys", "bytes", "depth"],
)
def test_metadata_past_a_limit_is_refused_naming_it(api_and_tenant, metadata, setting):
    api, tenant = api_and_tenant

    response = remember(api, metadata)

    assert response.status_code == 400
    assert f"({setting})" in response.json()["error"]["message"]
    assert response.json()["error"]["message"].startswith("metadata: ")
    assert not Fact.objects.filter(tenant=tenant).exists()


def test_metadata_within_the_limits_is_kept(api_and_tenant):
    api, _ = api_and_tenant
    metadata = {"source": "onboarding", "tags": ["a", "b"], "detail": {"turn": 3}}

    response = remember(api, metadata)

    assert response.status_code == 201
    assert response.json()["fact"]["metadata"] == metadata


def test_the_other_ways_to_write_metadata_hold_the_same_limits(api_and_tenant):
    api, tenant = api_and_tenant
    fact = fact_remember(tenant=tenant, user_id="alice", content="Likes tea").fact
    huge = {f"k{n}": n for n in range(500)}

    edited = api.patch(f"/api/v1/facts/{fact.pk}", {"metadata": huge}, format="json")
    imported = api.post("/api/v1/facts/import", {"facts": [{"user_id": "bob", "content": "Hi", "metadata": huge}]},
                        format="json")  # fmt: skip
    mem0 = api.post(
        "/mem0/v3/memories/add/",
        {"messages": [{"role": "user", "content": "Likes tea"}], "user_id": "carol", "infer": False, "metadata": huge},
        format="json",
    )

    assert (edited.status_code, imported.status_code, mem0.status_code) == (400, 400, 400)
    assert "(METADATA_MAX_KEYS)" in json.dumps(mem0.json())
    fact.refresh_from_db()
    assert fact.metadata == {}
    assert Fact.objects.filter(tenant=tenant).count() == 1


def test_merges_never_grow_metadata_past_the_limits(api_and_tenant, settings):
    settings.METADATA_MAX_KEYS = 4
    _, tenant = api_and_tenant
    first = fact_remember(tenant=tenant, user_id="alice", content="Likes tea", metadata={"a": 1, "b": 2, "c": 3}).fact

    merged = fact_remember(tenant=tenant, user_id="alice", content="Likes tea", metadata={"d": 4, "e": 5})

    assert (merged.outcome, merged.fact.pk) == ("merged", first.pk)
    first.refresh_from_db()
    assert first.metadata == {"a": 1, "b": 2, "c": 3}


def test_the_user_import_takes_at_most_as_many_facts_as_the_facts_import(api_and_tenant, settings):
    settings.FACTS_IMPORT_MAX_BATCH = 5
    api, tenant = api_and_tenant
    body = "".join(
        json.dumps({"id": str(n), "memory": f"Fact number {n}", "user_id": "alice"}) + "\n" for n in range(6)
    )

    response = api.generic("POST", "/api/v1/users/alice/import", body.encode(), content_type=NDJSON)

    assert response.status_code == 413
    assert "(FACTS_IMPORT_MAX_BATCH)" in response.json()["error"]["message"]
    assert not Fact.objects.filter(tenant=tenant).exists()


def test_an_imported_episode_holds_no_more_messages_than_one_may(api_and_tenant, settings):
    settings.EPISODES_MAX_MESSAGES_PER_EPISODE = 10
    api, tenant = api_and_tenant
    header = {"type": "header", "format": "memoryproject", "version": 1, "user_id": "alice"}
    messages = [{"role": "user", "content": f"message {n}"} for n in range(11)]
    episode = {"type": "episode", "id": 1, "session_id": "s1", "messages": messages}
    body = "".join(json.dumps(record) + "\n" for record in (header, episode))

    response = api.generic("POST", "/api/v1/users/alice/import", body.encode(), content_type=NDJSON)

    assert response.status_code == 400
    assert "(EPISODES_MAX_MESSAGES_PER_EPISODE)" in json.dumps(response.json())
    assert not Episode.objects.filter(tenant=tenant).exists()


def test_posting_to_an_episode_stops_at_its_message_limit(api_and_tenant, settings):
    settings.EPISODES_MAX_MESSAGES_PER_EPISODE = 4
    api, tenant = api_and_tenant

    def post(first: int):
        messages = [{"role": "user", "content": f"message {n}"} for n in range(first, first + 3)]
        return api.post("/api/v1/episodes", {"user_id": "alice", "session_id": "s1", "messages": messages},
                        format="json")  # fmt: skip

    assert post(0).status_code == 202
    refused = post(3)

    assert refused.status_code == 413
    assert "(EPISODES_MAX_MESSAGES_PER_EPISODE)" in refused.json()["error"]["message"]
    assert Episode.objects.get(tenant=tenant).message_count == 3
