"""Every resource of the sync client against a live server: what each method sends reaches the API, and what it
answers comes back typed."""

from datetime import datetime

import pytest

from episodes.models import Episode
from facts.models import Fact, FactConflict
from memoryproject_client import (
    AuthenticationError,
    ConflictError,
    Context,
    MemoryClient,
    NotFoundError,
    ValidationError,
)
from memoryproject_client import (
    Fact as ClientFact,
)
from tests.factories import make_fact, make_tenant

TURN = [
    {"role": "user", "content": "I moved to Lisbon and I prefer PostgreSQL for new projects."},
    {"role": "assistant", "content": "Noted: Lisbon, and PostgreSQL for new projects."},
]

DISTINCT_FACTS = [
    "Works on the billing service in Go",
    "Has two children, Ana and Rui",
    "Deploys with Kubernetes on Hetzner",
    "Is learning Japanese on weekends",
    "Runs a marathon every April",
]


class TestFacts:
    def test_remember_get_update_history_delete(self, client):
        saved = client.facts.remember(
            "alice", "Prefers dark mode", category="preference", confidence=0.9, metadata={"from": "settings"}
        )

        assert saved.outcome == "created"
        assert isinstance(saved.fact, ClientFact)
        assert (saved.fact.user_id, saved.fact.category, saved.fact.metadata) == (
            "alice",
            "preference",
            {"from": "settings"},
        )
        assert isinstance(saved.fact.created_at, datetime)
        assert saved.fact.created_at.tzinfo is not None

        fact = client.facts.get(saved.fact.id)
        assert (fact.content, fact.confidence) == ("Prefers dark mode", 0.9)

        updated = client.facts.update(fact.id, content="Prefers dark mode in every editor", pinned=True)
        assert (updated.content, updated.pinned) == ("Prefers dark mode in every editor", True)
        actions = [event.action for event in client.facts.history(fact.id)]
        assert actions[0] == "created"
        assert len(actions) == 2

        assert client.facts.delete(fact.id) is None
        with pytest.raises(NotFoundError):
            client.facts.get(fact.id)

    def test_saving_the_same_fact_twice_merges(self, client):
        first = client.facts.remember("alice", "Prefers dark mode")

        again = client.facts.remember("alice", "prefers dark mode.")

        assert (again.outcome, again.fact.id) == ("merged", first.fact.id)

    def test_list_iterates_every_page_lazily_with_the_filters(self, client):
        for content in DISTINCT_FACTS:
            client.facts.remember("alice", content)
        client.facts.remember("alice", "Prefers tea", category="preference")
        client.facts.remember("bob", "Project of someone else")

        pages = list(client.facts.list("alice", category="other", page_size=2).pages())
        facts = list(client.facts.list("alice", category=["other", "preference"], page_size=2))

        assert [len(page.items) for page in pages] == [2, 2, 1]
        assert pages[-1].next_cursor is None
        assert len(facts) == 6
        assert {fact.user_id for fact in facts} == {"alice"}
        assert [fact.id for fact in facts] == sorted((fact.id for fact in facts), reverse=True)  # newest first

    def test_review_approve_and_reject(self, client):
        pending = client.facts.remember("alice", "Might move to Madrid", confidence=0.3).fact
        doubtful = client.facts.remember("alice", "Perhaps allergic to nuts", confidence=0.3).fact
        assert (pending.status, doubtful.status) == ("pending", "pending")
        assert [fact.id for fact in client.facts.list("alice", status="pending")] == [doubtful.id, pending.id]

        assert client.facts.approve(pending.id).status == "active"
        assert client.facts.reject(doubtful.id).status == "rejected"

    def test_restore_brings_an_archived_fact_back(self, client, tenant_and_key):
        archived = make_fact(tenant=tenant_and_key[0], user_id="alice", content="Old hobby", status="archived")

        restored = client.facts.restore(archived.pk)

        assert (restored.status, restored.archived_at) == ("active", None)
        with pytest.raises(ConflictError) as refused:
            client.facts.restore(archived.pk)
        assert (refused.value.status, refused.value.code) == (409, "conflict")

    def test_undo_supersession(self, client):
        old = client.facts.remember("alice", "Lives in Berlin").fact
        new = client.facts.remember("alice", "Moved to Paris")
        assert new.superseded_ids == [old.id]
        assert [fact.id for fact in client.facts.list("alice", validity="superseded")] == [old.id]

        current = client.facts.undo_supersession(old.id)

        assert (current.valid_to, current.superseded_by) == (None, None)
        assert client.facts.get(new.fact.id).status == "rejected"

    def test_import_sends_batches_and_reports_every_id(self, client, tenant_and_key):
        facts = [{"user_id": "alice", "content": f"Imported fact {n}", "category": "project"} for n in range(5)]

        result = client.facts.import_(iter(facts), batch_size=2)

        assert result.imported == 5
        assert len(result.ids) == 5
        stored = Fact.objects.filter(tenant=tenant_and_key[0], pk__in=result.ids)
        assert sorted(stored.values_list("content", flat=True)) == sorted(fact["content"] for fact in facts)

    def test_search_ranks_the_matching_fact_first(self, client):
        client.facts.remember("alice", "Prefers PostgreSQL for its JSONB support", category="preference")
        client.facts.remember("alice", "Has a cat called Miso", category="profile")

        found = client.facts.search("alice", "which database does she prefer? PostgreSQL", limit=5)

        assert found.degraded == []
        assert found[0].fact.content == "Prefers PostgreSQL for its JSONB support"
        assert set(found[0].scores) >= {"vector", "keyword", "final"}
        assert [hit.fact.category for hit in client.facts.search("alice", "cat", categories=["profile"])] == ["profile"]

    def test_filters_narrow_list_search_context_export_and_delete(self, client):
        atlas = client.facts.remember("alice", "Deploys the atlas service with Helm", metadata={"project": "atlas"})
        zephyr = client.facts.remember("alice", "Deploys the zephyr service with Ansible", metadata={"project": "z"})
        only_atlas = {"metadata.project": "atlas"}

        listed = [fact.id for fact in client.facts.list("alice", filters=only_atlas)]
        found = client.facts.search("alice", "how does she deploy?", filters={"NOT": only_atlas})
        context = client.context("alice", "how does she deploy?", filters=only_atlas, include_documents=False)
        exported = [record for record in client.users.export("alice", filters=only_atlas) if record["type"] == "fact"]
        deleted = client.facts.delete_where("alice", {"metadata.project": {"in": ["z"]}})

        assert listed == [atlas.fact.id]
        assert [hit.fact.id for hit in found] == [zephyr.fact.id]
        assert [hit.fact.id for hit in context.facts] == [atlas.fact.id]
        assert [record["id"] for record in exported] == [atlas.fact.id]
        assert (deleted.deleted, deleted.fact_ids) == (1, [zephyr.fact.id])
        with pytest.raises(ValidationError) as refused:
            list(client.facts.list("alice", filters={"metadata.project": {"like": "a%"}}))
        assert "filters.metadata.project.like: unknown operator" in str(refused.value)


def test_conflicts_are_listed_and_resolved(client, tenant_and_key):
    tenant = tenant_and_key[0]
    old = make_fact(tenant=tenant, user_id="alice", content="Lives in Lisbon")
    new = make_fact(tenant=tenant, user_id="alice", content="Lives in Porto", status=Fact.Status.PENDING)
    conflict = FactConflict.objects.create(
        tenant=tenant, user_id="alice", existing_fact=old, new_fact=new, reason="city"
    )

    listed = list(client.conflicts.list(user_id="alice", status="open"))
    resolved = client.conflicts.resolve(conflict.pk, "keep_old")

    assert [(item.id, item.existing_fact.content, item.new_fact.content) for item in listed] == [
        (conflict.pk, "Lives in Lisbon", "Lives in Porto")
    ]
    assert (resolved.status, resolved.resolution) == ("resolved", "keep_old")
    assert client.facts.get(new.pk).status == "rejected"
    assert list(client.conflicts.list(status="open")) == []


def test_context_holds_the_users_facts_and_documents(client):
    client.facts.remember("alice", "Prefers PostgreSQL for new projects", category="preference")
    client.kb.upload("guides/db.md", "# Databases\n\nWe run PostgreSQL 18 with pgvector for every service.\n")

    context = client.context("alice", "Which database should the new project use? PostgreSQL", max_tokens=500)

    assert isinstance(context, Context)
    assert "Prefers PostgreSQL for new projects" in context.text
    assert context.facts[0].fact.content == "Prefers PostgreSQL for new projects"
    assert context.documents[0].doc_id == "guides/db.md"
    assert context.documents[0].citation.startswith("doc:")
    assert context.token_count > 0
    assert client.facts.get(context.facts[0].fact.id).usage_count == 1  # injected, so used
    without_documents = client.context("alice", "PostgreSQL", include_documents=False)
    assert without_documents.documents == []


class TestEpisodes:
    def test_store_twice_appends_only_what_is_new(self, client):
        first = client.episodes.store("alice", "session-1", TURN, extract=False)
        reply = {"role": "user", "content": "And I drink green tea."}

        again = client.episodes.store("alice", "session-1", [*TURN, reply], extract=False)

        assert (first.created, first.appended, first.message_count) == (True, 2, 2)
        assert (again.id, again.created, again.appended, again.message_count) == (first.id, False, 1, 3)

    def test_list_get_search(self, client):
        stored = client.episodes.store("alice", "session-1", TURN, agent_id="helper")
        client.episodes.store("alice", "session-2", [{"role": "user", "content": "What is the weather like?"}])

        listed = list(client.episodes.list("alice", page_size=1))
        only_one = list(client.episodes.list("alice", session_id="session-1"))
        episode = client.episodes.get(stored.id)
        found = client.episodes.search("alice", "Lisbon PostgreSQL")

        assert [item.session_id for item in listed] == ["session-2", "session-1"]
        assert listed[0].messages is None  # lists leave the messages out
        assert [item.id for item in only_one] == [stored.id]
        assert [(message.role, message.content) for message in episode.messages] == [
            (message["role"], message["content"]) for message in TURN
        ]
        assert episode.agent_id == "helper"
        assert found[0].episode.id == stored.id
        assert found[0].matches

    def test_retry_queues_a_failed_extraction_and_refuses_a_finished_one(self, client):
        stored = client.episodes.store("alice", "session-1", TURN)
        Episode.objects.filter(pk=stored.id).update(extraction_status="failed", extraction_error="model down")

        retried = client.episodes.retry(stored.id)

        assert retried.id == stored.id
        assert retried.extraction_status != "failed"
        Episode.objects.filter(pk=stored.id).update(extraction_status="done")
        with pytest.raises(ConflictError):
            client.episodes.retry(stored.id)


class TestKnowledgeBase:
    def test_upload_text_and_file_list_get_search_delete(self, client, tmp_path):
        text = client.kb.upload("guides/setup.md", "# Setup\n\nRun make install, then make run.\n", title="Setup")
        path = tmp_path / "faq.txt"
        path.write_text("Where are backups kept? In the vault, every night at two.\n")
        from_path = client.kb.upload(file=path)
        from_bytes = client.kb.upload(file=b"# Holidays\n\nThe office closes in August.\n", filename="holidays.md")

        assert (text.outcome, text.document.title, text.document.status) == ("new", "Setup", "ready")
        assert (from_path.document.doc_id, from_bytes.document.doc_id) == ("faq.txt", "holidays.md")
        assert (
            client.kb.upload("guides/setup.md", "# Setup\n\nRun make install, then make run.\n").outcome == "unchanged"
        )
        assert [document.doc_id for document in client.kb.list(page_size=2)] == [
            "faq.txt",
            "guides/setup.md",
            "holidays.md",
        ]
        document = client.kb.get(text.document.id)
        assert document.chunks
        assert "make install" in document.chunks[0].text
        assert document.indexing is None
        hits = client.kb.search("when are backups made", limit=3)
        assert hits[0].doc_id == "faq.txt"
        assert [hit.doc_id for hit in client.kb.search("office", doc_ids=["holidays.md"])] == ["holidays.md"]

        assert client.kb.delete(from_path.document.id) is None
        with pytest.raises(NotFoundError):
            client.kb.get(from_path.document.id)

    def test_retry_of_a_ready_document_is_a_conflict(self, client):
        uploaded = client.kb.upload("notes.md", "# Notes\n\nNothing to see.\n")

        with pytest.raises(ConflictError) as refused:
            client.kb.retry(uploaded.document.id)

        assert refused.value.code == "conflict"


def test_forget_policy_and_runs(client):
    assert client.forget_policy.get().is_default is True

    replaced = client.forget_policy.replace(
        enabled=True,
        max_unused_days=30,
        min_usage_count=2,
        max_facts_per_user=100,
        archive_retention_days=7,
        exempt_categories=["profile"],
    )
    updated = client.forget_policy.update(max_facts_per_user=None, exempt_categories=["profile", "decision"])
    run = client.forget_policy.dry_run(as_of="2030-01-01T00:00:00Z")

    assert (replaced.is_default, replaced.max_unused_days, replaced.max_facts_per_user) == (False, 30, 100)
    assert (updated.max_unused_days, updated.max_facts_per_user) == (30, None)
    assert sorted(updated.exempt_categories) == ["decision", "profile"]
    assert run.dry_run is True
    assert run.as_of.year == 2030
    assert [listed.id for listed in client.forget_runs.list(dry_run=True)] == [run.id]
    assert client.forget_runs.get(run.id).archived == run.archived
    assert client.forget_policy.delete().is_default is True


@pytest.mark.parametrize("odd", ["org/alïce?x=1#%2F", ".."])
def test_erasing_a_user_whose_id_holds_a_slash_and_reserved_characters(client, odd):
    client.facts.remember(odd, "Lives in Lisbon")
    client.episodes.store(odd, "s1", TURN, extract=False)
    client.facts.remember("org", "Another user's fact")

    erased = client.users.erase(odd)

    assert erased.user_id == odd
    assert (erased.deleted["facts"], erased.deleted["episodes"]) == (1, 1)
    assert list(client.facts.list(odd)) == []
    assert [fact.content for fact in client.facts.list("org")] == ["Another user's fact"]
    assert client.users.erase(odd).deleted["facts"] == 0


def test_whoami_health_and_embedding_cache(client):
    assert (client.whoami().tenant, client.health().status) == ("acme", "ok")
    assert client.health().database["reachable"] is True
    assert client.embedding_cache().enabled in (True, False)


class TestErrors:
    def test_a_400_names_the_field(self, client):
        with pytest.raises(ValidationError) as refused:
            client.facts.remember("alice", "Prefers tea", confidence=2)

        error = refused.value
        assert (error.status, error.code) == (400, "validation_error")
        assert error.message.startswith("confidence:")
        assert list(error.details) == ["confidence"]

    def test_another_tenants_fact_is_not_found(self, client, transactional_db):
        other, _ = make_tenant("globex")
        foreign = make_fact(tenant=other, user_id="alice", content="Globex secret")

        with pytest.raises(NotFoundError) as refused:
            client.facts.get(foreign.pk)
        with pytest.raises(NotFoundError):
            client.facts.update(foreign.pk, content="hijacked")

        assert (refused.value.status, refused.value.code) == (404, "not_found")
        foreign.refresh_from_db()
        assert foreign.content == "Globex secret"

    def test_a_wrong_key_is_an_authentication_error(self, live_server, transactional_db):
        with (
            MemoryClient(live_server.url, "mp_wrong", max_retries=0) as client,
            pytest.raises(AuthenticationError) as refused,
        ):
            client.whoami()

        assert refused.value.status == 401
        assert refused.value.code
        assert refused.value.message

    def test_the_environment_configures_the_client(self, live_server, key, monkeypatch):
        monkeypatch.setenv("MEMORYPROJECT_URL", live_server.url)
        monkeypatch.setenv("MEMORYPROJECT_API_KEY", key)

        with MemoryClient() as client:
            assert client.whoami().tenant == "acme"

        monkeypatch.delenv("MEMORYPROJECT_API_KEY")
        with pytest.raises(ValueError, match="MEMORYPROJECT_API_KEY"):
            MemoryClient()
