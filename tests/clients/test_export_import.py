"""The client's users.export / users.import_ against a live server: a round trip through the client (export, erase,
import) gives the user back, with a user id the path must encode; a bad line is reported and nothing imported."""

import json

import pytest

from memoryproject_client import ValidationError

USER = "team/alice"  # a "/" in the id: the export path must encode it
TURN = [
    {"role": "user", "content": "I moved to Lisbon last spring."},
    {"role": "assistant", "content": "Noted: Lisbon."},
]


def seed(client) -> None:
    client.facts.remember(USER, "Prefers PostgreSQL for new projects", category="preference")
    client.facts.remember(USER, "Has a cat called Miso", category="profile")
    client.episodes.store(USER, "session-1", TURN, extract=False)


def test_export_erase_import_gives_the_user_back(client):
    seed(client)
    client.facts.remember("team", "Another user's fact")
    before = [hit.fact.content for hit in client.facts.search(USER, "which database? PostgreSQL")]

    records = list(client.users.export(USER))
    client.users.erase(USER)
    report = client.users.import_(USER, records)

    assert records[0]["type"] == "header"
    kinds = [record["type"] for record in records[1:]]
    assert (kinds.count("fact"), kinds.count("episode")) == (2, 1)
    assert (report.facts.created, report.episodes.created, report.lines) == (2, 1, len(records))
    assert [hit.fact.content for hit in client.facts.search(USER, "which database? PostgreSQL")] == before
    episodes = list(client.episodes.list(USER))
    assert [episode.session_id for episode in episodes] == ["session-1"]
    assert [m.content for m in client.episodes.get(episodes[0].id).messages] == [m["content"] for m in TURN]
    assert [fact.content for fact in client.facts.list("team")] == ["Another user's fact"]


def test_importing_the_same_export_twice_changes_nothing(client):
    seed(client)
    exported = "".join(json.dumps(record) + "\n" for record in client.users.export(USER))

    again = client.users.import_(USER, exported)  # a whole body, as a string

    assert again.facts.created == 0
    assert again.facts.merged + again.facts.skipped == 2
    assert again.episodes.created == 0
    assert len(list(client.facts.list(USER))) == 2


def test_a_bad_line_is_named_and_nothing_is_imported(client):
    client.facts.remember("carol", "Speaks Portuguese")
    header, fact = (json.dumps(record) for record in client.users.export("carol"))

    with pytest.raises(ValidationError) as refused:
        client.users.import_("bob", [header, fact, "{not json"])

    assert refused.value.message.startswith("line 3")
    assert list(refused.value.details) == ["line 3"]
    assert list(client.facts.list("bob")) == []


def test_mem0_memories_as_records_or_as_a_json_document(client):
    memories = [
        {"id": "m-1", "memory": "Prefers window seats", "user_id": "whoever", "categories": ["user_preferences"]},
        {"id": "m-2", "memory": "Works as a nurse", "user_id": "whoever"},
    ]

    from_records = client.users.import_("dora", memories)
    from_document = client.users.import_(
        "erin", json.dumps({"results": memories}).encode(), content_type="application/json"
    )

    assert (from_records.format, from_records.facts.created) == ("mem0", 2)
    assert (from_document.format, from_document.facts.created) == ("mem0", 2)
    window = next(fact for fact in client.facts.list("dora") if fact.content == "Prefers window seats")
    assert window.category == "preference"
    assert sorted(fact.content for fact in client.facts.list("erin")) == ["Prefers window seats", "Works as a nurse"]


def test_a_user_with_nothing_exports_the_header_alone(client):
    assert [record["type"] for record in client.users.export("nobody")] == ["header"]


@pytest.fixture
def anyio_backend():
    return "asyncio"


@pytest.mark.anyio
async def test_the_async_client_exports_and_imports(async_client_factory):
    async with async_client_factory() as client:
        await client.facts.remember("carol", "Prefers green tea")
        records = [record async for record in client.users.export("carol")]
        await client.users.erase("carol")
        report = await client.users.import_("carol", records)
        facts = [fact.content async for fact in client.facts.list("carol")]

    assert [record["type"] for record in records] == ["header", "fact"]
    assert report.facts.created == 1
    assert facts == ["Prefers green tea"]
