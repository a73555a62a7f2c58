"""GET /api/v1/users/{user_id}/export and manage.py export_memories: every fact with its history and validity, every
episode with its messages, every conflict, as JSON Lines; nothing of another user or tenant."""

import json

import pytest
from django.core.management import CommandError, call_command

from episodes.models import EpisodeMessage
from facts.models import Fact, FactEvent
from tests.factories import client_with_key, make_fact
from tests.privacy.memories import build_memories, lines_of

pytestmark = pytest.mark.django_db


@pytest.fixture
def memories(tenant):
    return build_memories(tenant)


def by_type(records: list[dict], kind: str) -> list[dict]:
    return [record for record in records if record["type"] == kind]


def test_the_export_streams_a_header_then_every_record_of_the_user(api, tenant, memories):
    make_fact(tenant=tenant, user_id="bob", content="Bob's own fact")

    response = api.get("/api/v1/users/alice/export")

    assert response.status_code == 200
    assert response.streaming
    assert response["Content-Type"] == "application/x-ndjson"
    assert 'filename="memories-alice.jsonl"' in response["Content-Disposition"]
    records = lines_of(response)
    header = records[0]
    assert header["type"] == "header"
    assert header | {"exported_at": None} == {
        "type": "header",
        "format": "memoryproject",
        "version": 1,
        "user_id": "alice",
        "exported_at": None,
        "embedding_model": "hash-v2",
    }
    assert header["exported_at"].endswith("Z")
    assert {record["type"] for record in records[1:]} == {"fact", "episode", "conflict"}
    stored = Fact.objects.filter(tenant=tenant, user_id="alice")
    assert sorted(record["id"] for record in by_type(records, "fact")) == sorted(stored.values_list("pk", flat=True))
    assert "Bob's own fact" not in json.dumps(records)


def test_facts_of_every_status_come_with_validity_links_and_history(api, memories):
    facts = {record["id"]: record for record in by_type(lines_of(api.get("/api/v1/users/alice/export")), "fact")}

    assert {record["status"] for record in facts.values()} == {"active", "pending", "rejected", "archived"}
    old, new = memories.facts["superseded"], memories.facts["superseding"]
    assert facts[old.pk]["superseded_by"] == new.pk
    assert facts[old.pk]["valid_to"] is not None
    assert facts[new.pk]["valid_to"] is None
    assert [event["action"] for event in facts[old.pk]["events"]] == ["created", "superseded"]
    assert len(facts[old.pk]["events"]) == FactEvent.objects.filter(fact_id=old.pk).count()
    database = facts[memories.facts["database"].pk]
    assert database["usage_count"] == 2
    assert database["last_used_at"] is not None
    assert database["confidence"] == 0.9
    assert facts[memories.facts["allergy"].pk]["pinned"] is True
    assert facts[memories.facts["pending"].pk]["proposal"]["action"] in ("create", "merge", "refine", "supersede")
    assert facts[memories.facts["archived"].pk]["archived_at"] is not None
    assert facts[memories.facts["rejected"].pk]["reviewed_at"] is not None
    extracted = [record for record in facts.values() if record["source"] == "extracted"]
    assert extracted, "the episodes' extraction made facts"
    assert all(record["source_episode"] and record["source_messages"] for record in extracted)
    assert not {"embedding", "search_text", "search_vector", "embedding_pending"} & set(database)


def test_episodes_come_with_their_messages_in_order_and_conflicts_with_both_facts(api, tenant, memories):
    records = lines_of(api.get("/api/v1/users/alice/export"))

    episodes = {record["session_id"]: record for record in by_type(records, "episode")}
    assert set(episodes) == {"trip-1", "db-2"}
    trip = episodes["trip-1"]
    stored = EpisodeMessage.objects.filter(episode_id=trip["id"]).order_by("position")
    assert [message["content"] for message in trip["messages"]] == [row.content for row in stored]
    assert [message["role"] for message in trip["messages"]] == ["user", "assistant"]
    assert all(message["timestamp"].endswith("Z") for message in trip["messages"])
    assert trip["summary"]
    assert trip["extraction_status"] == "done"
    [conflict] = by_type(records, "conflict")
    assert conflict | {"created_at": None} == {
        "type": "conflict",
        "id": memories.conflict.pk,
        "user_id": "alice",
        "existing_fact": memories.facts["database"].pk,
        "new_fact": memories.facts["pending"].pk,
        "status": "open",
        "reason": memories.conflict.reason,
        "resolution": "",
        "resolved_by": "",
        "resolved_at": None,
        "created_at": None,
    }
    # Every reference points into the file.
    fact_ids = {record["id"] for record in by_type(records, "fact")}
    assert all(record["superseded_by"] in fact_ids for record in by_type(records, "fact") if record["superseded_by"])
    assert all(record["source_episode"] in {e["id"] for e in episodes.values()}
               for record in by_type(records, "fact") if record["source_episode"])  # fmt: skip


def test_a_filtered_export_holds_the_selected_facts_and_imports_as_it_is(api, tenant, memories):
    wanted = json.dumps({"OR": [{"category": "profile"}, {"id": memories.facts["pending"].pk}]})

    response = api.get("/api/v1/users/alice/export", {"filters": wanted})

    records = lines_of(response)
    assert records[0]["filtered"] is True
    selected = Fact.objects.filter(tenant=tenant, user_id="alice", category="profile")
    facts = {record["id"]: record for record in by_type(records, "fact")}
    assert set(facts) == {*selected.values_list("pk", flat=True), memories.facts["pending"].pk}
    assert not by_type(records, "episode")
    assert all(record["source_episode"] is None for record in facts.values())
    old = memories.facts["superseded"]
    assert facts[old.pk]["superseded_by"] == memories.facts["superseding"].pk  # both in the file
    assert not by_type(records, "conflict")  # its other fact (the database preference) is not in the file
    imported = api.post(
        "/api/v1/users/carol/import", "".join(json.dumps(record) + "\n" for record in records),
        content_type="application/x-ndjson",
    )  # fmt: skip
    assert imported.status_code == 200, imported.content
    assert Fact.objects.filter(tenant=tenant, user_id="carol").count() == len(facts)


def test_a_bad_export_filter_is_a_400_naming_its_path(api, memories):
    response = api.get("/api/v1/users/alice/export", {"filters": json.dumps({"NOT": {"colour": "red"}})})

    assert response.status_code == 400
    assert response.json()["error"]["message"].startswith("filters.NOT.colour: unknown field")


def test_another_tenant_exporting_the_same_user_id_gets_the_header_alone(memories, other_tenant_and_key):
    other = client_with_key(other_tenant_and_key[1])

    records = lines_of(other.get("/api/v1/users/alice/export"))

    assert [record["type"] for record in records] == ["header"]
    assert records[0]["user_id"] == "alice"


def test_a_user_id_with_slashes_is_exported_and_still_erased(api, tenant):
    make_fact(tenant=tenant, user_id="team/a/b", content="Nested user's fact")
    make_fact(tenant=tenant, user_id="team/a", content="Parent user's fact")

    records = lines_of(api.get("/api/v1/users/team/a/b/export"))

    assert records[0]["user_id"] == "team/a/b"
    assert [record["content"] for record in by_type(records, "fact")] == ["Nested user's fact"]
    erased = api.delete("/api/v1/users/team/a/b")
    assert erased.status_code == 200
    assert erased.json()["deleted"]["facts"] == 1
    assert Fact.objects.filter(tenant=tenant, user_id="team/a").exists()


def test_a_bad_user_id_or_a_query_parameter_is_refused(api):
    assert api.get("/api/v1/users/bad%20id/export").status_code == 400
    assert api.get("/api/v1/users/alice/export?since=2024").status_code == 400


def test_the_command_exports_one_user_or_every_user_of_the_tenant(tenant, memories, tmp_path, capsys):
    make_fact(tenant=tenant, user_id="bob", content="Bob's own fact")

    call_command("export_memories", "--tenant", tenant.name, "--user", "alice", "--output", str(tmp_path / "a.jsonl"))
    call_command("export_memories", "--tenant", str(tenant.pk))

    alice = [json.loads(line) for line in (tmp_path / "a.jsonl").read_text().splitlines()]
    assert alice[0]["user_id"] == "alice"
    assert "Bob's own fact" not in json.dumps(alice)
    everyone = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    headers = [record["user_id"] for record in everyone if record["type"] == "header"]
    assert headers == ["alice", "bob"]
    bob_at = next(n for n, record in enumerate(everyone) if record["type"] == "header" and record["user_id"] == "bob")
    assert [record["content"] for record in everyone[bob_at + 1 :]] == ["Bob's own fact"]
    assert everyone[1:bob_at] == alice[1:]


def test_the_command_names_an_unknown_tenant(db):
    with pytest.raises(CommandError, match="No tenant named or numbered 'nope'"):
        call_command("export_memories", "--tenant", "nope")
