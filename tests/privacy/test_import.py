"""POST /api/v1/users/{user_id}/import: our own export brought back (round trip through an erasure), into another
user, twice; what is created, merged or skipped; re-embedding, and storing without vectors while the embedder fails;
no extraction of imported episodes."""

import json

import pytest

from episodes.models import Episode
from facts.models import Fact, FactConflict, FactEvent
from facts.selectors import facts_search
from privacy.services import user_erase
from tests.factories import client_with_key
from tests.privacy.memories import build_memories, lines_of, what_searches_answer

pytestmark = pytest.mark.django_db

NDJSON = "application/x-ndjson"


@pytest.fixture
def memories(tenant):
    return build_memories(tenant)


def export_of(api, user_id: str = "alice") -> str:
    return "".join(json.dumps(record) + "\n" for record in lines_of(api.get(f"/api/v1/users/{user_id}/export")))


def post_import(api, user_id: str, body: str, content_type: str = NDJSON):
    return api.generic("POST", f"/api/v1/users/{user_id}/import", body.encode(), content_type=content_type)


def test_export_erase_import_gives_the_same_memory_back(api, tenant, memories):
    as_of = memories.facts["superseded"].valid_from  # when Lisbon was still true
    before = what_searches_answer(tenant, "alice", as_of=as_of)
    exported = export_of(api)
    facts = Fact.objects.filter(tenant=tenant, user_id="alice").count()

    user_erase(tenant=tenant, user_id="alice", actor="test")
    assert not Fact.objects.filter(tenant=tenant, user_id="alice").exists()
    response = post_import(api, "alice", exported)

    assert response.status_code == 200, response.content
    assert response.json() == {
        "format": "memoryproject",
        "lines": len(exported.splitlines()),
        "facts": {"created": facts, "merged": 0, "skipped": 0},
        "episodes": {"created": 2, "skipped": 0},
        "conflicts": {"created": FactConflict.objects.filter(tenant=tenant, user_id="alice").count()},
    }
    after = what_searches_answer(tenant, "alice", as_of=as_of)
    assert after == before
    assert "Lives in Lisbon" in after["as of"]  # what was true then: history is searchable again
    assert "Lives in Porto since last spring" not in after["as of"]
    assert any(after[f"episodes: {query}"] for query in ("Porto", "green tea"))


def test_the_restored_facts_keep_links_statuses_times_and_usage(api, tenant, memories):
    exported = export_of(api)
    old = {fact.content: fact for fact in Fact.objects.filter(tenant=tenant, user_id="alice")}
    user_erase(tenant=tenant, user_id="alice", actor="test")

    post_import(api, "alice", exported)

    new = {fact.content: fact for fact in Fact.objects.filter(tenant=tenant, user_id="alice")}
    assert set(new) == set(old)
    kept = ["status", "category", "confidence", "source", "pinned", "usage_count", "last_used_at", "valid_from",
            "valid_to", "occurred_at", "metadata", "reviewed_at", "archived_at", "source_messages", "created_at",
            "updated_at"]  # fmt: skip
    for content, fact in new.items():
        assert {name: getattr(fact, name) for name in kept} == {name: getattr(old[content], name) for name in kept}
        assert fact.embedding is not None
        assert fact.embedding_model == "hash-v2"
    assert new["Lives in Lisbon"].superseded_by == new["Lives in Porto since last spring"]
    extracted = new["Works as a nurse at the hospital in Porto"]
    assert extracted.source_episode.session_id == "trip-1"
    assert extracted.source_episode.user_id == "alice"
    pending = new["Prefers MySQL for new projects"]
    # The proposal names facts of this side now, or nothing: never the exporting side's ids.
    ids = set(Fact.objects.filter(tenant=tenant, user_id="alice").values_list("pk", flat=True))
    for item in pending.proposal["targets"] + pending.proposal["conflicts"]:
        assert item["fact"] in ids
    conflict = FactConflict.objects.get(tenant=tenant, user_id="alice", reason=memories.conflict.reason)
    assert (conflict.existing_fact, conflict.new_fact) == (new["Prefers PostgreSQL for new projects"], pending)
    superseded = FactEvent.objects.get(fact_id=new["Lives in Lisbon"].pk, action="superseded")
    assert superseded.after["superseded_by"] == new["Lives in Porto since last spring"].pk


def test_imported_episodes_are_not_extracted_again(api, tenant, memories):
    exported = export_of(api)
    user_erase(tenant=tenant, user_id="alice", actor="test")

    with_facts = Fact.objects.filter(tenant=tenant, user_id="alice")
    post_import(api, "alice", exported)

    episode = Episode.objects.get(tenant=tenant, user_id="alice", session_id="trip-1")
    assert episode.extraction_status == "done"
    assert episode.extracted_message_count == episode.message_count == 2
    assert episode.summarized_message_count == 2
    assert episode.embedding is not None
    assert [message.content for message in episode.message_rows.order_by("position")][0].startswith("I work as")
    # Only the facts of the file: the extraction did not run again (it would have made its facts a second time).
    assert with_facts.filter(source="extracted").count() == 1


def test_importing_alices_export_into_bob_leaves_alice_alone(api, tenant, memories):
    exported = export_of(api)
    alice = Fact.objects.filter(tenant=tenant, user_id="alice").count()

    response = post_import(api, "bob", exported)

    assert response.status_code == 200
    assert Fact.objects.filter(tenant=tenant, user_id="bob").count() == alice
    assert Fact.objects.filter(tenant=tenant, user_id="alice").count() == alice
    assert set(Episode.objects.filter(tenant=tenant, user_id="bob").values_list("session_id", flat=True)) == {
        "trip-1",
        "db-2",
    }
    assert facts_search(tenant=tenant, user_id="bob", query="shellfish")[0].fact.content == "Is allergic to shellfish"


def test_importing_the_same_file_twice_skips_everything_the_second_time(api, tenant, memories):
    exported = export_of(api)
    post_import(api, "bob", exported)
    rows = {
        model: model.objects.filter(tenant=tenant, user_id="bob").count()
        for model in (Fact, FactEvent, FactConflict, Episode)
    }

    again = post_import(api, "bob", exported).json()

    facts = rows[Fact]
    assert again["facts"] == {"created": 0, "merged": 0, "skipped": facts}
    assert again["episodes"] == {"created": 0, "skipped": 2}
    assert again["conflicts"] == {"created": 0}
    assert {model: model.objects.filter(tenant=tenant, user_id="bob").count() for model in rows} == rows


def test_a_fact_the_user_already_holds_is_merged_keeping_the_strongest_values(api, tenant):
    held = Fact.objects.create(
        tenant=tenant, user_id="bob", content="Prefers dark mode", confidence=0.6, usage_count=9, metadata={"a": 1}
    )
    record = {"type": "fact", "id": 1, "content": "prefers dark mode.", "confidence": 0.8, "usage_count": 3,
              "pinned": True, "metadata": {"a": 2, "b": 3}}  # fmt: skip
    header = {"type": "header", "format": "memoryproject", "version": 1, "user_id": "someone"}
    body = "\n".join(json.dumps(line) for line in [header, record])

    response = post_import(api, "bob", body)

    assert response.json()["facts"] == {"created": 0, "merged": 1, "skipped": 0}
    held.refresh_from_db()
    assert (held.content, held.confidence, held.usage_count, held.pinned) == ("Prefers dark mode", 0.8, 9, True)
    assert held.metadata == {"a": 1, "b": 3}  # the held fact's own values win
    assert FactEvent.objects.filter(fact_id=held.pk, action="merged").count() == 1
    assert post_import(api, "bob", body).json()["facts"] == {"created": 0, "merged": 0, "skipped": 1}


def test_a_minimal_hand_written_file_imports_with_defaults(api, tenant):
    body = "\n".join(
        [
            json.dumps({"type": "header", "format": "memoryproject", "version": 1}),
            "",
            json.dumps({"type": "fact", "id": "f1", "content": "Lives in Madrid"}),
            json.dumps(
                {
                    "type": "episode",
                    "id": "e1",
                    "session_id": "s1",
                    "messages": [{"role": "user", "content": "Hola, I live in Madrid now."}],
                }
            ),  # fmt: skip
        ]
    )

    response = post_import(api, "carol", body, content_type="application/jsonl")

    assert response.status_code == 200, response.content
    assert response.json()["lines"] == 3
    fact = Fact.objects.get(tenant=tenant, user_id="carol")
    assert (fact.status, fact.source, fact.category, fact.confidence) == ("active", "import", "other", 1.0)
    assert [event.action for event in FactEvent.objects.filter(fact_id=fact.pk)] == ["created"]
    assert Episode.objects.get(tenant=tenant, user_id="carol").extraction_status == "done"


def test_while_the_embedder_fails_facts_are_stored_awaiting_vectors_and_found_by_keywords(
    openai_settings, fake_openai, api, tenant
):
    fake_openai.go_down()
    body = "\n".join(
        json.dumps(line)
        for line in [
            {"type": "header", "format": "memoryproject", "version": 1, "user_id": "dana"},
            {"type": "fact", "id": 1, "content": "Drives a blue tractor"},
        ]
    )

    response = post_import(api, "dana", body)

    assert response.status_code == 200
    fact = Fact.objects.get(tenant=tenant, user_id="dana")
    assert fact.embedding is None
    assert fact.embedding_pending == "embed"
    assert [hit.fact.pk for hit in facts_search(tenant=tenant, user_id="dana", query="tractor")] == [fact.pk]


def test_another_tenant_importing_writes_only_into_its_own_tenant(api, tenant, memories, other_tenant_and_key):
    exported = export_of(api)
    other_tenant = other_tenant_and_key[0]
    ours = Fact.objects.filter(tenant=tenant).count()

    response = post_import(client_with_key(other_tenant_and_key[1]), "alice", exported)

    assert response.status_code == 200
    assert response.json()["facts"]["created"] == Fact.objects.filter(tenant=tenant, user_id="alice").count()
    assert Fact.objects.filter(tenant=tenant).count() == ours
    assert Fact.objects.filter(tenant=other_tenant, user_id="alice").count() == response.json()["facts"]["created"]
    theirs = Fact.objects.filter(tenant=other_tenant)
    assert not theirs.exclude(source_episode=None).exclude(source_episode__tenant=other_tenant).exists()
    assert not theirs.exclude(superseded_by=None).exclude(superseded_by__tenant=other_tenant).exists()


def test_references_to_a_fact_the_user_holds_point_at_the_held_fact(api, tenant):
    held = Fact.objects.create(tenant=tenant, user_id="bob", content="Lives in Porto")
    header = {"type": "header", "format": "memoryproject", "version": 1, "user_id": "alice"}
    lisbon = {"type": "fact", "id": 1, "content": "Lives in Lisbon", "valid_from": "2024-01-01T00:00:00Z",
              "valid_to": "2024-06-01T00:00:00Z", "superseded_by": 2}  # fmt: skip
    porto = {"type": "fact", "id": 2, "content": "Lives in Porto", "valid_from": "2024-06-01T00:00:00Z"}
    conflict = {"type": "conflict", "id": 9, "existing_fact": 2, "new_fact": 1, "reason": "which city"}
    body = "".join(json.dumps(line) + "\n" for line in [header, lisbon, porto, conflict])

    report = post_import(api, "bob", body).json()

    assert report["facts"] == {"created": 1, "merged": 0, "skipped": 1}
    assert report["conflicts"] == {"created": 1}
    retired = Fact.objects.get(tenant=tenant, user_id="bob", content="Lives in Lisbon")
    assert retired.superseded_by == held
    assert FactConflict.objects.get(tenant=tenant, user_id="bob").existing_fact == held
