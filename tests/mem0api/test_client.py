"""mem0ai 2.2.1's own MemoryClient and AsyncMemoryClient, unchanged, against a live server: a Mem0 user's code works
after changing the host and the key."""

import asyncio
import socket

import pytest
from mem0 import AsyncMemoryClient, MemoryClient
from mem0.exceptions import AuthenticationError, MemoryNotFoundError, ValidationError

from episodes.models import Episode
from facts.models import Fact, FactEvent
from tenancy.services import api_key_revoke
from tests.episodes.factories import TURN_1

pytestmark = pytest.mark.django_db(transaction=True)


def said(*contents: str) -> list[dict]:
    return [{"role": "user", "content": content} for content in contents]


def contents(answer: dict) -> list[str]:
    return sorted(memory["memory"] for memory in answer["results"])


def test_the_client_checks_its_key_when_constructed_and_learns_an_org_and_project(acme_mem0, acme):
    assert (acme_mem0.org_id, acme_mem0.project_id) == (acme[0].name, "default")
    assert acme_mem0.user_email is None


def test_a_wrong_key_stops_the_client_at_construction(mem0_host, acme):
    with pytest.raises(ValueError, match="Unknown or revoked API key"):
        MemoryClient(api_key="mp_not-a-key", host=mem0_host)


def test_a_key_revoked_after_construction_raises_the_clients_authentication_error(acme_mem0, acme):
    api_key_revoke(api_key=acme[0].api_keys.get())

    with pytest.raises(AuthenticationError, match="Unknown or revoked API key") as raised:
        acme_mem0.get_all(filters={"user_id": "alice"})

    assert raised.value.details["error"]["code"] == "authentication_failed"


def test_add_without_inference_stores_each_message_as_a_memory_with_its_metadata(acme_mem0, acme):
    answer = acme_mem0.add(
        [*said("I prefer PostgreSQL for new projects", "I drink green tea"), {"role": "system", "content": "Be brief"}],
        user_id="alice",
        infer=False,
        metadata={"source": "onboarding"},
        timestamp=1714573800,
    )

    assert [(event["event"], event["memory"]) for event in answer["results"]] == [
        ("ADD", "I prefer PostgreSQL for new projects"), ("ADD", "I drink green tea"),
    ]  # fmt: skip
    facts = Fact.objects.filter(tenant=acme[0], user_id="alice").order_by("pk")
    assert [str(fact.pk) for fact in facts] == [event["id"] for event in answer["results"]]
    assert {(fact.status, fact.metadata["source"], fact.occurred_at.isoformat()) for fact in facts} == {
        ("active", "onboarding", "2024-05-01T14:30:00+00:00")
    }
    listed = acme_mem0.get_all(filters={"user_id": "alice"})
    assert listed["count"] == 2
    assert {memory["metadata"]["source"] for memory in listed["results"]} == {"onboarding"}


def test_get_all_and_search_are_scoped_by_user_and_agent_in_each_filter_form(acme_mem0):
    acme_mem0.add(said("I prefer PostgreSQL for new projects"), user_id="alice", infer=False)
    acme_mem0.add(said("Books flights with window seats"), user_id="alice", agent_id="travel", infer=False)
    acme_mem0.add(said("Prefers MySQL for everything"), user_id="bob", infer=False)

    assert contents(acme_mem0.get_all(filters={"user_id": "alice"})) == [
        "Books flights with window seats", "I prefer PostgreSQL for new projects",
    ]  # fmt: skip
    travel = {"AND": [{"user_id": "alice"}, {"agent_id": "travel"}]}
    assert contents(acme_mem0.get_all(filters=travel)) == ["Books flights with window seats"]
    assert contents(acme_mem0.get_all(filters={"OR": [{"user_id": "bob"}]})) == ["Prefers MySQL for everything"]

    found = acme_mem0.search("which database for new projects?", filters={"user_id": "alice"}, top_k=5)
    assert found["results"][0]["memory"] == "I prefer PostgreSQL for new projects"
    assert all(memory["user_id"] == "alice" for memory in found["results"])
    assert all(0 < memory["score"] <= 1 for memory in found["results"])
    assert contents(acme_mem0.search("flights", filters=travel)) == ["Books flights with window seats"]
    assert contents(acme_mem0.search("database", filters={"user_id": {"in": ["bob"]}})) == [
        "Prefers MySQL for everything"
    ]


def test_a_search_threshold_and_fields_shape_the_results(acme_mem0):
    acme_mem0.add(said("I prefer PostgreSQL for new projects", "Has a dog called Rex"), user_id="alice", infer=False)

    everything = acme_mem0.search("PostgreSQL projects", filters={"user_id": "alice"})["results"]
    best = everything[0]["score"]
    strict = acme_mem0.search("PostgreSQL projects", filters={"user_id": "alice"}, threshold=best, fields=["memory"])

    assert len(everything) == 2
    assert strict["results"] == [{"memory": "I prefer PostgreSQL for new projects"}]


def test_get_all_pages_with_page_and_page_size(acme_mem0):
    acme_mem0.add(said(*(f"Fact number {n}" for n in range(5))), user_id="alice", infer=False)

    first = acme_mem0.get_all(filters={"user_id": "alice"}, page=1, page_size=2)
    last = acme_mem0.get_all(filters={"user_id": "alice"}, page=3, page_size=2)

    assert (first["count"], len(first["results"]), first["previous"]) == (5, 2, None)
    assert "page=2" in first["next"]
    assert (len(last["results"]), last["next"]) == (1, None)
    assert "page=2" in last["previous"]
    pages = [acme_mem0.get_all(filters={"user_id": "alice"}, page=page, page_size=2) for page in (1, 2, 3)]
    assert sorted(memory["memory"] for page in pages for memory in page["results"]) == [
        f"Fact number {n}" for n in range(5)
    ]


def test_get_update_history_and_delete_one_memory(acme_mem0, acme):
    memory_id = acme_mem0.add(said("Lives in Lisbon"), user_id="alice", infer=False)["results"][0]["id"]

    assert acme_mem0.get(memory_id)["memory"] == "Lives in Lisbon"
    updated = acme_mem0.update(memory_id, text="Lives in Porto", metadata={"moved": "2024"})
    assert (updated["memory"], updated["metadata"]) == ("Lives in Porto", {"moved": "2024"})
    assert acme_mem0.get(memory_id)["memory"] == "Lives in Porto"
    assert acme_mem0.search("Porto", filters={"user_id": "alice"})["results"][0]["id"] == memory_id

    assert acme_mem0.delete(memory_id) == {"message": "Memory deleted successfully!"}
    with pytest.raises(MemoryNotFoundError, match="Memory not found"):
        acme_mem0.get(memory_id)
    history = acme_mem0.history(memory_id)
    assert [(entry["event"], entry["old_memory"], entry["new_memory"]) for entry in history] == [
        ("ADD", None, "Lives in Lisbon"),
        ("UPDATE", "Lives in Lisbon", "Lives in Porto"),
        ("DELETE", "Lives in Porto", None),
    ]
    assert FactEvent.objects.filter(tenant=acme[0], fact_id=int(memory_id)).last().actor.startswith("api_key:")


def test_delete_all_deletes_the_users_facts_only_of_the_agent_given(acme_mem0, acme):
    acme_mem0.add(said("Prefers PostgreSQL"), user_id="alice", infer=False)
    acme_mem0.add(said("Window seats"), user_id="alice", agent_id="travel", infer=False)
    acme_mem0.add(said("Prefers MySQL"), user_id="bob", infer=False)

    answer = acme_mem0.delete_all(user_id="alice", agent_id="travel")
    assert answer == {"message": "Memories deleted successfully!", "deleted": 1}
    assert contents(acme_mem0.get_all(filters={"user_id": "alice"})) == ["Prefers PostgreSQL"]

    acme_mem0.delete_all(filters={"user_id": "alice"})  # as mem0ai's types document it: filters in the query string
    assert acme_mem0.get_all(filters={"user_id": "alice"})["count"] == 0
    assert contents(acme_mem0.get_all(filters={"user_id": "bob"})) == ["Prefers MySQL"]


def test_delete_all_also_deletes_what_waits_for_review(acme_mem0, acme):
    Fact.objects.create(tenant=acme[0], user_id="alice", content="Maybe likes jazz", status=Fact.Status.PENDING)

    assert acme_mem0.delete_all(user_id="alice")["deleted"] == 1
    assert not Fact.objects.filter(tenant=acme[0], user_id="alice").exists()


def test_add_with_inference_keeps_the_conversation_as_an_episode_whose_extraction_makes_the_memories(
    acme_mem0, acme, settings
):
    settings.FACTS_EXTRACTED_AUTO_APPROVE_CONFIDENCE = 0.0  # extracted facts active at once, as Mem0's are

    answer = acme_mem0.add([{k: m[k] for k in ("role", "content")} for m in TURN_1], user_id="u1", run_id="trip-1")

    assert answer["status"] == "PENDING"
    episode = Episode.objects.get(tenant=acme[0], user_id="u1")
    assert (answer["event_id"], answer["episode_id"]) == (str(episode.pk), episode.pk)
    assert (episode.session_id, episode.message_count) == ("trip-1", 2)
    episode.refresh_from_db()
    assert episode.extraction_status == "done"  # the test settings run the background task inline
    assert contents(acme_mem0.get_all(filters={"user_id": "u1"})) == [
        "Lives in Berlin", "Prefers PostgreSQL for new projects",
    ]  # fmt: skip
    assert acme_mem0.search("Where does the user live?", filters={"user_id": "u1"})["results"][0]["memory"] == (
        "Lives in Berlin"
    )
    assert set(Fact.objects.filter(tenant=acme[0]).values_list("source_episode", flat=True)) == {episode.pk}


def test_add_with_inference_gives_every_extracted_memory_the_requests_metadata(acme_mem0, acme, settings):
    settings.FACTS_EXTRACTED_AUTO_APPROVE_CONFIDENCE = 0.0
    conversation = [{k: m[k] for k in ("role", "content")} for m in TURN_1]

    acme_mem0.add(conversation, user_id="u1", run_id="trip-1", metadata={"channel": "whatsapp", "trip": 7})

    episode = Episode.objects.get(tenant=acme[0], user_id="u1")
    assert episode.metadata == {"channel": "whatsapp", "trip": 7}
    memories = acme_mem0.get_all(filters={"user_id": "u1", "metadata": {"channel": "whatsapp"}})["results"]
    assert len(memories) == 2
    assert all(memory["metadata"]["trip"] == 7 for memory in memories)
    assert acme_mem0.get_all(filters={"user_id": "u1", "metadata": {"channel": "email"}})["results"] == []


def test_an_agents_conversation_gives_that_agents_memories(acme_mem0, acme, settings):
    settings.FACTS_EXTRACTED_AUTO_APPROVE_CONFIDENCE = 0.0

    acme_mem0.add([{k: m[k] for k in ("role", "content")} for m in TURN_1], user_id="u1", agent_id="travel")

    assert contents(acme_mem0.get_all(filters={"AND": [{"user_id": "u1"}, {"agent_id": "travel"}]})) == [
        "Lives in Berlin", "Prefers PostgreSQL for new projects",
    ]  # fmt: skip
    assert acme_mem0.get_all(filters={"AND": [{"user_id": "u1"}, {"agent_id": "other"}]})["count"] == 0


def test_extracted_facts_below_the_auto_approve_confidence_wait_for_review_before_they_are_memories(
    acme_mem0, acme, settings
):
    settings.FACTS_EXTRACTED_AUTO_APPROVE_CONFIDENCE = 0.99
    acme_mem0.add(TURN_1[0]["content"], user_id="u1")  # a string is one user message, as in Mem0

    pending = Fact.objects.filter(tenant=acme[0], user_id="u1")
    assert pending.exists()
    assert set(pending.values_list("status", flat=True)) == {"pending"}
    assert acme_mem0.get_all(filters={"user_id": "u1"})["count"] == 0
    with pytest.raises(MemoryNotFoundError):
        acme_mem0.get(str(pending.first().pk))


def test_each_add_with_inference_but_no_run_id_is_a_session_of_its_own(acme_mem0, acme):
    acme_mem0.add("I prefer green tea in the morning.", user_id="u1")
    acme_mem0.add("I prefer green tea in the morning.", user_id="u1")

    assert Episode.objects.filter(tenant=acme[0], user_id="u1").count() == 2


def test_the_filters_of_a_real_application_select_what_they_say(acme_mem0):
    ids = {}
    for text, metadata in [
        ("Likes jazz", {"topic": "music", "priority": 3}),
        ("Likes hiking", {"topic": "sport", "priority": 1}),
        ("Works at Initech", {"topic": "work", "tags": ["job", "office"]}),
    ]:
        added = acme_mem0.add(said(text), user_id="alice", infer=False, metadata=metadata)
        ids[text] = added["results"][0]["id"]
    acme_mem0.add(said("Likes opera"), user_id="bob", infer=False, metadata={"topic": "music"})
    alice = {"user_id": "alice"}

    music = acme_mem0.get_all(filters={"AND": [alice, {"metadata": {"topic": "music"}}]})
    important_or_work = acme_mem0.search(
        "likes",
        filters={**alice, "OR": [{"metadata": {"priority": {"gte": 2}}}, {"metadata": {"tags": {"contains": "job"}}}]},
    )
    not_music = acme_mem0.get_all(filters={**alice, "NOT": {"metadata": {"topic": {"in": ["music"]}}}})
    by_id = acme_mem0.get_all(filters={**alice, "memory_ids": [ids["Likes hiking"]]})
    recent_likes = acme_mem0.get_all(
        filters={**alice, "created_at": {"gte": "2000-01-01"}, "keywords": {"icontains": "LIKES"}}
    )
    with_priority = acme_mem0.search(
        "likes", filters={**alice, "metadata": {"priority": "*", "topic": {"ne": "music"}}}
    )

    assert contents(music) == ["Likes jazz"]
    assert contents(important_or_work) == ["Likes jazz", "Works at Initech"]
    assert contents(not_music) == ["Likes hiking", "Works at Initech"]
    assert contents(by_id) == ["Likes hiking"]
    assert contents(recent_likes) == ["Likes hiking", "Likes jazz"]
    assert contents(with_priority) == ["Likes hiking"]
    assert acme_mem0.get_all(filters={**alice, "agent_id": "*"})["count"] == 0  # none was saved for an agent
    with pytest.raises(ValidationError, match="filters.metadata.priority.gte: expected a string, a number"):
        acme_mem0.search("jazz", filters={**alice, "metadata": {"priority": {"gte": [2]}}})


def test_features_we_lack_raise_the_clients_validation_error_with_the_code(acme_mem0):
    with pytest.raises(ValidationError, match="graph memory is not supported") as graph:
        acme_mem0.add(said("Likes jazz"), user_id="alice", enable_graph=True)
    with pytest.raises(ValidationError, match="OR across different users") as either:
        acme_mem0.search("jazz", filters={"OR": [{"user_id": "alice"}, {"user_id": "bob"}]})
    with pytest.raises(ValidationError, match="user_id is required") as nobody:
        acme_mem0.get_all(filters={"agent_id": "travel"})
    with pytest.raises(ValidationError, match="batch updates and deletions are not supported") as batch:
        acme_mem0.batch_delete([{"memory_id": "1"}])
    with pytest.raises(ValidationError, match="organizations and projects are not supported"):
        acme_mem0.project.get()

    codes = [error.value.details["error"]["code"] for error in (graph, either, nobody, batch)]
    assert codes == ["not_supported", "not_supported", "user_id_required", "not_supported"]


def test_another_tenants_client_never_sees_reads_changes_or_deletes_the_first_ones_memories(
    acme_mem0, globex_mem0, acme
):
    memory_id = acme_mem0.add(said("Lives in Lisbon"), user_id="alice", infer=False)["results"][0]["id"]

    assert globex_mem0.get_all(filters={"user_id": "alice"})["count"] == 0
    assert globex_mem0.search("Lisbon", filters={"user_id": "alice"})["results"] == []
    for call in (
        lambda: globex_mem0.get(memory_id),
        lambda: globex_mem0.update(memory_id, text="Lives in Berlin"),
        lambda: globex_mem0.delete(memory_id),
        lambda: globex_mem0.history(memory_id),
    ):
        with pytest.raises(MemoryNotFoundError):
            call()
    assert globex_mem0.delete_all(user_id="alice")["deleted"] == 0

    assert acme_mem0.get(memory_id)["memory"] == "Lives in Lisbon"
    assert [entry["event"] for entry in acme_mem0.history(memory_id)] == ["ADD"]


def test_the_async_client_works_the_same(mem0_host, acme):
    async def session() -> tuple:
        async with AsyncMemoryClient(api_key=acme[1], host=mem0_host) as memory:
            added = await memory.add(said("Prefers PostgreSQL"), user_id="alice", infer=False)
            memory_id = added["results"][0]["id"]
            found = await memory.search("PostgreSQL", filters={"user_id": "alice"})
            await memory.update(memory_id, text="Prefers PostgreSQL 17")
            got = await memory.get(memory_id)
            history = await memory.history(memory_id)
            await memory.delete_all(user_id="alice")
            listed = await memory.get_all(filters={"user_id": "alice"})
            return found, got, history, listed

    found, got, history, listed = asyncio.run(session())

    assert contents(found) == ["Prefers PostgreSQL"]
    assert got["memory"] == "Prefers PostgreSQL 17"
    assert [entry["event"] for entry in history] == ["ADD", "UPDATE"]
    assert listed["count"] == 0


def test_the_client_talks_to_no_one_but_the_server(mem0_host, live_server, acme, monkeypatch):
    """Telemetry off: every connection the clients open goes to the live server (PostHog's would go elsewhere)."""
    peers = []
    connect = socket.socket.connect

    def recording(sock, address):
        if sock.family in (socket.AF_INET, socket.AF_INET6):
            peers.append(address[:2])
        return connect(sock, address)

    monkeypatch.setattr(socket.socket, "connect", recording)
    memory = MemoryClient(api_key=acme[1], host=mem0_host)
    memory.add(said("Prefers PostgreSQL"), user_id="alice", infer=False)
    memory.search("PostgreSQL", filters={"user_id": "alice"})
    memory.client.close()
    asyncio.run(AsyncMemoryClient(api_key=acme[1], host=mem0_host).async_client.aclose())

    port = int(live_server.url.rsplit(":", 1)[1])
    assert peers
    assert {(host in ("127.0.0.1", "::1"), peer_port) for host, peer_port in peers} == {(True, port)}
