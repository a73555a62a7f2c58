"""The async client's main methods against a live server: the same answers as the sync client, awaited. The test
bodies stay off the ORM (it is synchronous-only inside an event loop); rows are made in sync fixtures."""

import pytest

from memoryproject_client import AsyncMemoryClient, AsyncPager, AuthenticationError, NotFoundError, ValidationError
from tests.factories import make_fact, make_tenant

pytestmark = pytest.mark.anyio

TURN = [
    {"role": "user", "content": "I moved to Lisbon and I prefer PostgreSQL for new projects."},
    {"role": "assistant", "content": "Noted: Lisbon, and PostgreSQL for new projects."},
]


@pytest.fixture
def anyio_backend():
    return "asyncio"  # the live server's thread is the same either way; one event loop is enough here


@pytest.fixture
def foreign_fact_id(transactional_db):
    other, _ = make_tenant("globex")
    return make_fact(tenant=other, user_id="alice", content="Globex secret").pk


async def test_facts_remember_list_get_search_delete(async_client_factory):
    async with async_client_factory() as client:
        saved = await client.facts.remember("alice", "Prefers PostgreSQL for its JSONB support", category="preference")
        await client.facts.remember("alice", "Has a cat called Miso", category="profile")
        await client.facts.remember("alice", "Runs a marathon every April")

        listed = client.facts.list("alice", page_size=2)
        contents = [fact.content async for fact in listed]
        page_sizes = [len(page.items) async for page in listed.pages()]
        fact = await client.facts.get(saved.fact.id)
        found = await client.facts.search("alice", "PostgreSQL database")
        await client.facts.delete(saved.fact.id)
        with pytest.raises(NotFoundError):
            await client.facts.get(saved.fact.id)

    assert isinstance(listed, AsyncPager)
    assert contents[-1] == "Prefers PostgreSQL for its JSONB support"
    assert len(contents) == 3
    assert page_sizes == [2, 1]
    assert (fact.category, fact.user_id) == ("preference", "alice")
    assert found[0].fact.id == saved.fact.id


async def test_import_in_batches(async_client_factory):
    facts = [{"user_id": "alice", "content": content} for content in ("Speaks Portuguese", "Plays chess", "Owns a van")]

    async with async_client_factory() as client:
        result = await client.facts.import_(facts, batch_size=2)
        listed = [fact.content async for fact in client.facts.list("alice")]

    assert result.imported == 3
    assert sorted(listed) == sorted(fact["content"] for fact in facts)


async def test_context_episodes_and_knowledge_base(async_client_factory):
    async with async_client_factory() as client:
        await client.facts.remember("alice", "Prefers PostgreSQL for new projects", category="preference")
        uploaded = await client.kb.upload("guides/db.md", "# Databases\n\nWe run PostgreSQL 18 with pgvector.\n")
        hits = await client.kb.search("pgvector")
        context = await client.context("alice", "Which database? PostgreSQL")
        stored = await client.episodes.store("alice", "session-1", TURN, extract=False)
        again = await client.episodes.store("alice", "session-1", TURN, extract=False)
        episode = await client.episodes.get(stored.id)
        sessions = [item.session_id async for item in client.episodes.list("alice")]
        episode_hits = await client.episodes.search("alice", "Lisbon")

    assert uploaded.outcome == "new"
    assert hits[0].doc_id == "guides/db.md"
    assert "Prefers PostgreSQL for new projects" in context.text
    assert context.documents
    assert (stored.appended, again.appended, again.id) == (2, 0, stored.id)
    assert [message.content for message in episode.messages] == [message["content"] for message in TURN]
    assert sessions == ["session-1"]
    assert episode_hits[0].episode.id == stored.id


async def test_erase_policy_and_server(async_client_factory):
    async with async_client_factory() as client:
        await client.facts.remember("team/alice", "Lives in Lisbon")
        erased = await client.users.erase("team/alice")
        remaining = [fact async for fact in client.facts.list("team/alice")]
        policy = await client.forget_policy.update(enabled=True, max_facts_per_user=50)
        run = await client.forget_policy.dry_run()
        who = await client.whoami()
        health = await client.health()

    assert erased.deleted["facts"] == 1
    assert remaining == []
    assert (policy.enabled, policy.max_facts_per_user) == (True, 50)
    assert run.dry_run
    assert (who.tenant, health.status) == ("acme", "ok")


async def test_errors_carry_the_apis_code(async_client_factory, foreign_fact_id, live_server):
    async with async_client_factory() as client:
        with pytest.raises(NotFoundError) as missing:
            await client.facts.get(foreign_fact_id)
        with pytest.raises(ValidationError) as invalid:
            await client.episodes.store("alice", "s1", [{"role": "robot", "content": "beep"}])

    async with AsyncMemoryClient(live_server.url, "mp_wrong", max_retries=0) as stranger:
        with pytest.raises(AuthenticationError):
            await stranger.whoami()

    assert (missing.value.status, missing.value.code) == (404, "not_found")
    assert invalid.value.code == "validation_error"
    assert "messages[0].role" in invalid.value.message
