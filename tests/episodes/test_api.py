"""The episodes API over HTTP: store, extract in the background, read, list, search, limits, errors, isolation."""

import pytest

from episodes.models import Episode
from facts.models import Fact, FactEvent
from retrieval.context import context_build
from tests.episodes.factories import TURN_1, TURN_2, conversation, stored
from tests.factories import client_with_key

pytestmark = pytest.mark.django_db


def test_a_conversation_becomes_pending_facts_linked_to_it_and_once_approved_they_reach_the_context(
    api, tenant, post_episode, settings
):
    settings.FACTS_EXTRACTED_AUTO_APPROVE_CONFIDENCE = 0.99  # everything extracted waits for review
    response = post_episode(conversation())

    assert response.status_code == 202
    body = response.json()
    assert body["extraction_status"] == "pending"  # extraction runs after the response, in the background
    assert (body["created"], body["appended"], body["message_count"]) == (True, 2, 2)

    episode = api.get(f"/api/v1/episodes/{body['id']}").json()
    assert episode["extraction_status"] == "done"
    assert episode["messages"] == [
        {"role": "user", "content": TURN_1[0]["content"], "timestamp": "2023-05-08T13:56:00Z"},
        {"role": "assistant", "content": TURN_1[1]["content"], "timestamp": "2023-05-08T13:56:05Z"},
    ]
    assert episode["summary"].startswith("I live in Berlin")
    assert {(f["content"], f["status"], f["source"], f["source_episode"]) for f in episode["facts"]} == {
        ("Lives in Berlin", "pending", "extracted", body["id"]),
        ("Prefers PostgreSQL for new projects", "pending", "extracted", body["id"]),
    }
    # Relative dates would resolve against the conversation's time, not the time of the run.
    assert {f["occurred_at"] for f in episode["facts"]} == {"2023-05-08T13:56:05Z"}

    # Pending facts stay out of the prompt until a reviewer approves them.
    assert context_build(tenant=tenant, user_id="u1", query="Where does the user live?", max_tokens=500).facts == []
    berlin = next(f for f in episode["facts"] if f["content"] == "Lives in Berlin")
    assert api.post(f"/api/v1/facts/{berlin['id']}/approve").json()["status"] == "active"

    context = context_build(tenant=tenant, user_id="u1", query="Where does the user live?", max_tokens=500)
    assert [hit.fact.pk for hit in context.facts] == [berlin["id"]]
    assert "Lives in Berlin" in context.text


def test_reposting_the_session_appends_only_new_messages_and_extracts_only_from_them(api, tenant, post_episode):
    first = post_episode(conversation(messages=TURN_1)).json()

    again = post_episode(conversation(messages=TURN_1 + TURN_2)).json()

    assert again["id"] == first["id"]
    assert (again["created"], again["appended"], again["message_count"]) == (False, 2, 4)
    episode = api.get(f"/api/v1/episodes/{first['id']}").json()
    assert [m["content"] for m in episode["messages"]] == [m["content"] for m in TURN_1 + TURN_2]
    assert episode["extracted_message_count"] == 4
    assert sorted(f["content"] for f in episode["facts"]) == [
        "Lives in Berlin", "Prefers PostgreSQL for new projects", "Prefers green tea in the morning",
    ]  # fmt: skip
    # The first turn's facts were not extracted a second time (which would have merged into them).
    actions = FactEvent.objects.filter(tenant=tenant).values_list("action", flat=True)
    assert sorted(actions) == ["created", "created", "created"]


def test_metadata_posted_with_messages_reaches_the_episode_its_facts_and_its_export(api, tenant, post_episode):
    first = post_episode(conversation(messages=TURN_1) | {"metadata": {"channel": "chat"}}).json()
    post_episode(conversation(messages=TURN_1 + TURN_2) | {"metadata": {"channel": "email", "mood": "calm"}})

    episode = api.get(f"/api/v1/episodes/{first['id']}").json()
    assert episode["metadata"] == {"channel": "email", "mood": "calm"}  # merged, the later post's keys win
    channels = {fact["content"]: fact["metadata"].get("channel") for fact in episode["facts"]}
    assert channels == {
        "Lives in Berlin": "chat", "Prefers PostgreSQL for new projects": "chat",
        "Prefers green tea in the morning": "email",
    }  # fmt: skip
    exported = api.get("/api/v1/users/u1/export").getvalue().decode()
    imported = api.post("/api/v1/users/u2/import", exported, content_type="application/x-ndjson")
    assert imported.status_code == 200, imported.content
    assert Episode.objects.get(tenant=tenant, user_id="u2").metadata == {"channel": "email", "mood": "calm"}


def test_posting_only_the_new_turns_appends_them(api, post_episode):
    episode_id = post_episode(conversation(messages=TURN_1)).json()["id"]

    body = post_episode(conversation(messages=TURN_2)).json()

    assert (body["id"], body["appended"], body["message_count"]) == (episode_id, 2, 4)
    contents = [m["content"] for m in api.get(f"/api/v1/episodes/{episode_id}").json()["messages"]]
    assert contents == [m["content"] for m in TURN_1 + TURN_2]


@pytest.mark.parametrize(
    "posted",
    [
        pytest.param(TURN_1 + TURN_2, id="the same session again"),
        pytest.param(TURN_1, id="an earlier snapshot"),
        pytest.param(TURN_2, id="a retried last turn"),
        pytest.param(TURN_1[1:] + TURN_2, id="the tail of the session"),
    ],
)
def test_posting_what_is_stored_adds_nothing_and_queues_nothing(
    api, post_episode, django_capture_on_commit_callbacks, posted
):
    episode_id = post_episode(conversation(messages=TURN_1 + TURN_2)).json()["id"]
    before = Episode.objects.get(pk=episode_id)

    with django_capture_on_commit_callbacks() as queued:
        body = api.post("/api/v1/episodes", conversation(messages=posted), format="json").json()

    assert (body["appended"], body["message_count"], body["extraction_status"]) == (0, 4, "done")
    assert queued == []
    after = Episode.objects.get(pk=episode_id)
    assert after.updated_at == before.updated_at
    assert Fact.objects.count() == 3


def test_a_repeated_message_with_its_own_timestamp_is_kept(api, post_episode):
    ok = {"role": "user", "content": "ok", "timestamp": "2023-05-08T15:00:00Z"}
    episode_id = post_episode(conversation(messages=[*TURN_1, ok])).json()["id"]

    body = post_episode(conversation(messages=[{**ok, "timestamp": "2023-05-08T15:05:00Z"}])).json()

    assert (body["appended"], body["message_count"]) == (1, 4)
    messages = api.get(f"/api/v1/episodes/{episode_id}").json()["messages"]
    assert [m["timestamp"] for m in messages[-2:]] == ["2023-05-08T15:00:00Z", "2023-05-08T15:05:00Z"]


def test_extraction_can_be_switched_off_per_request(api, post_episode):
    body = post_episode(conversation(messages=TURN_1, extract=False)).json()

    episode = api.get(f"/api/v1/episodes/{body['id']}").json()
    assert episode["extraction_status"] == "skipped"
    assert "switched off" in episode["extraction_skip_reason"]
    assert episode["facts"] == []
    assert episode["summary"]  # still summarised (and searchable)

    post_episode(conversation(messages=TURN_2))  # extraction on again: only the new messages are mined
    episode = api.get(f"/api/v1/episodes/{body['id']}").json()
    assert episode["extraction_status"] == "done"
    assert [f["content"] for f in episode["facts"]] == ["Prefers green tea in the morning"]


def test_a_session_too_short_to_matter_is_skipped_until_it_grows(api, post_episode):
    hello = [{"role": "user", "content": "hi there"}, {"role": "assistant", "content": "Hello! How can I help?"}]
    body = post_episode(conversation(messages=hello)).json()

    episode = api.get(f"/api/v1/episodes/{body['id']}").json()
    assert episode["extraction_status"] == "skipped"
    assert "Too short" in episode["extraction_skip_reason"]
    assert episode["extracted_message_count"] == 0

    post_episode(conversation(messages=[*hello, *TURN_1]))
    episode = api.get(f"/api/v1/episodes/{body['id']}").json()
    assert (episode["extraction_status"], episode["extraction_skip_reason"]) == ("done", "")
    assert episode["extracted_message_count"] == 4
    assert len(episode["facts"]) == 2


@pytest.mark.parametrize(
    ("messages", "field", "index"),
    [
        ([{"content": "no role"}], "role", 0),
        ([TURN_1[0], {"role": "narrator", "content": "x"}], "role", 1),
        ([TURN_1[0], TURN_1[1], {"role": "user"}], "content", 2),
        ([{"role": "user", "content": ""}], "content", 0),
        ([{"role": "user", "content": "   "}], "content", 0),
        ([{"role": "user", "content": ["a", "b"]}], "content", 0),
        ([TURN_1[0], {"role": "user", "content": "x", "timestamp": "yesterday"}], "timestamp", 1),
    ],
)
def test_a_malformed_message_is_400_naming_its_index_and_nothing_is_stored(api, messages, field, index):
    response = api.post("/api/v1/episodes", conversation(messages=messages), format="json")

    assert response.status_code == 400
    error = response.json()["error"]
    assert error["code"] == "validation_error"
    assert error["message"].startswith(f"messages[{index}].{field}:")
    assert not Episode.objects.exists()


@pytest.mark.parametrize(
    ("payload", "field"),
    [
        ({"user_id": "u1", "session_id": "s1", "messages": []}, "messages"),
        ({"user_id": "u1", "session_id": "s1", "messages": "hello"}, "messages"),
        ({"user_id": "u1", "messages": TURN_1}, "session_id"),
        ({"user_id": "u1", "session_id": "two words", "messages": TURN_1}, "session_id"),
        ({"session_id": "s1", "messages": TURN_1}, "user_id"),
        ({"user_id": "u1", "session_id": "s1", "messages": TURN_1, "agent_id": "a" * 256}, "agent_id"),
    ],
)
def test_a_bad_envelope_is_400_naming_the_field(api, payload, field):
    response = api.post("/api/v1/episodes", payload, format="json")

    assert response.status_code == 400
    assert response.json()["error"]["message"].startswith(f"{field}:")
    assert not Episode.objects.exists()


def test_too_many_messages_in_one_request_is_413_and_nothing_is_stored(api, settings):
    settings.EPISODES_MAX_MESSAGES_PER_REQUEST = 3
    messages = [{"role": "user", "content": f"message {n}"} for n in range(4)]

    response = api.post("/api/v1/episodes", conversation(messages=messages), format="json")

    assert response.status_code == 413
    error = response.json()["error"]
    assert error["code"] == "payload_too_large"
    assert "at most 3" in error["message"]
    assert "messages" in error["details"]
    assert not Episode.objects.exists()


def test_a_message_over_the_character_limit_is_413_naming_it(api, settings):
    settings.EPISODES_MAX_MESSAGE_CHARS = 100
    messages = [TURN_1[0], {"role": "assistant", "content": "x" * 101}]

    response = api.post("/api/v1/episodes", conversation(messages=messages), format="json")

    assert response.status_code == 413
    assert response.json()["error"]["message"].startswith("messages[1].content has 101 characters, at most 100")
    assert not Episode.objects.exists()


def test_an_episode_over_the_character_limit_is_413_and_keeps_what_it_had(api, settings, post_episode):
    settings.EPISODES_MAX_EPISODE_CHARS = 120
    episode_id = post_episode(conversation(messages=TURN_1)).json()["id"]  # 93 characters, TURN_2 has 57

    response = post_episode(conversation(messages=TURN_2))

    assert response.status_code == 413
    assert "EPISODES_MAX_EPISODE_CHARS" in response.json()["error"]["message"]
    episode = Episode.objects.get(pk=episode_id)
    assert episode.message_count == 2
    assert len(stored(episode)) == 2


def test_the_episode_time_is_its_latest_message_time(api, post_episode):
    body = post_episode(conversation(messages=TURN_1 + TURN_2)).json()

    listed = api.get("/api/v1/episodes", {"user_id": "u1"}).json()["results"]

    assert [(e["id"], e["last_message_at"]) for e in listed] == [(body["id"], "2023-05-08T14:01:03Z")]


def test_list_by_user_and_session_with_a_cursor_and_without_messages(api, post_episode):
    for n in range(3):
        post_episode(conversation(session_id=f"s{n}", messages=[{"role": "user", "content": f"Session {n} here"}]))
    post_episode(conversation(session_id="s0", user_id="u2", messages=TURN_1))

    first = api.get("/api/v1/episodes", {"user_id": "u1", "limit": 2}).json()
    second = api.get(first["next"]).json()
    one_session = api.get("/api/v1/episodes", {"user_id": "u1", "session_id": "s1"}).json()["results"]

    assert [e["session_id"] for e in first["results"] + second["results"]] == ["s2", "s1", "s0"]
    assert second["next"] is None
    assert "messages" not in first["results"][0]
    assert [(e["session_id"], e["user_id"], e["message_count"]) for e in one_session] == [("s1", "u1", 1)]
    assert api.get("/api/v1/episodes", {"user_id": "u1", "status": "failed"}).json()["results"] == []
    assert api.get("/api/v1/episodes").json()["error"]["details"].keys() == {"user_id"}


def test_search_finds_what_was_said_and_shows_the_matching_messages(api, post_episode):
    post_episode(conversation(session_id="db", messages=TURN_1))
    post_episode(conversation(session_id="tea", messages=TURN_2))
    post_episode(conversation(session_id="other-user", user_id="u2", messages=TURN_2))

    response = api.post("/api/v1/episodes/search", {"user_id": "u1", "query": "green tea"}, format="json")

    assert response.status_code == 200
    results = response.json()["results"]
    assert results[0]["episode"]["session_id"] == "tea"
    assert results[0]["scores"]["keyword"] == 1.0
    assert results[0]["scores"]["vector"] > 0  # the summary was embedded by the background run
    assert [m["index"] for m in results[0]["matches"]] == [0, 1]
    assert {r["episode"]["user_id"] for r in results} == {"u1"}
    assert [r["episode"]["session_id"] for r in results[1:]] in ([], ["db"])  # "db" only by its summary vector
    assert all(r["scores"]["keyword"] == 0 and r["score"] < results[0]["score"] for r in results[1:])


def test_search_by_the_date_it_was_said(api, post_episode):
    post_episode(conversation(session_id="may", messages=TURN_1))
    june = [{**TURN_2[0], "timestamp": "2023-06-20T10:00:00Z"}]
    post_episode(conversation(session_id="june", messages=june))

    results = api.post("/api/v1/episodes/search", {"user_id": "u1", "query": "June 2023"}, format="json").json()

    assert results["results"][0]["episode"]["session_id"] == "june"
    assert results["results"][0]["scores"]["keyword"] == 1.0


def test_search_rejects_a_missing_query(api):
    response = api.post("/api/v1/episodes/search", {"user_id": "u1"}, format="json")

    assert response.status_code == 400
    assert response.json()["error"]["message"].startswith("query:")


def test_retry_of_an_episode_that_succeeded_is_409(api, post_episode):
    episode_id = post_episode(conversation()).json()["id"]

    response = api.post(f"/api/v1/episodes/{episode_id}/retry")

    assert response.status_code == 409
    assert response.json()["error"]["code"] == "conflict"


def test_an_unknown_episode_is_404(api):
    assert api.get("/api/v1/episodes/999999").json()["error"]["code"] == "not_found"
    assert api.post("/api/v1/episodes/999999/retry").status_code == 404


class TestTenantIsolation:
    @pytest.fixture
    def theirs(self, other_tenant_and_key, post_episode):
        client = client_with_key(other_tenant_and_key[1])
        return client, post_episode(conversation(), client=client).json()["id"]

    def test_another_tenants_episode_is_404_on_every_endpoint(self, api, theirs):
        _, episode_id = theirs

        assert api.get(f"/api/v1/episodes/{episode_id}").status_code == 404
        assert api.post(f"/api/v1/episodes/{episode_id}/retry").status_code == 404

    def test_another_tenants_episodes_are_not_listed_or_found(self, api, theirs):
        assert api.get("/api/v1/episodes", {"user_id": "u1"}).json()["results"] == []
        found = api.post("/api/v1/episodes/search", {"user_id": "u1", "query": "Berlin"}, format="json").json()
        assert found["results"] == []

    def test_the_same_user_and_session_in_two_tenants_are_two_episodes(self, api, theirs, post_episode, tenant):
        client, their_id = theirs

        mine = post_episode(conversation()).json()

        assert mine["id"] != their_id
        assert mine["created"] is True
        assert client.get(f"/api/v1/episodes/{their_id}").json()["message_count"] == 2
        assert {f.source_episode_id for f in Fact.objects.filter(tenant=tenant)} == {mine["id"]}


def test_users_of_one_tenant_do_not_see_each_others_episodes(api, post_episode):
    post_episode(conversation(user_id="alice", messages=TURN_1))

    assert api.get("/api/v1/episodes", {"user_id": "bob"}).json()["results"] == []
    found = api.post("/api/v1/episodes/search", {"user_id": "bob", "query": "Berlin"}, format="json").json()
    assert found["results"] == []


def test_the_schema_documents_the_episode_endpoints(api):
    schema = api.get("/api/schema/", HTTP_ACCEPT="application/vnd.oai.openapi+json").json()

    assert {"/api/v1/episodes", "/api/v1/episodes/{episode_id}", "/api/v1/episodes/search"} <= set(schema["paths"])
