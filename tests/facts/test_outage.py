"""The embedding provider down (the local fake failing every request), then back: no write is lost, searches answer
by keywords and say so, and the facts stored meanwhile are embedded, deduplicated and judged once it recovers."""

import json
import threading
from collections import Counter
from datetime import UTC, datetime, timedelta

import pytest
from django.db import connection
from django.utils import timezone
from rest_framework.test import APIClient

from core.locks import LockNamespace, is_locked
from facts.models import Fact, FactConflict, FactEvent
from facts.selectors import facts_search_answer
from facts.services import (
    conflict_resolve,
    embedding_retry_delay,
    fact_approve,
    fact_remember,
    fact_update,
    facts_embed_due,
    facts_extract,
    facts_import,
)
from facts.tasks import facts_embed_sweep
from tests.factories import client_with_key, make_tenant

pytestmark = pytest.mark.usefixtures("openai_settings")

EMBEDDINGS = "/v1/embeddings"


@pytest.fixture
def rules_judge(openai_settings):
    """Judging by the rules (no chat model): deterministic verdicts for exact counts."""
    openai_settings.CHAT_PROVIDER = "none"
    return openai_settings


def embedding_requests(fake) -> int:
    return len(fake.requests_to(EMBEDDINGS))


@pytest.mark.django_db
@pytest.mark.usefixtures("rules_judge")
def test_facts_posted_during_an_outage_are_kept_found_by_keywords_then_judged_when_it_ends(
    tenant_and_key, fake_openai, settings, django_capture_on_commit_callbacks
):
    settings.FACTS_EMBED_RETRY_BASE_SECONDS = 0  # due again at once: the sweep below is the next attempt
    tenant, key = tenant_and_key
    api = client_with_key(key)
    berlin = fact_remember(tenant=tenant, user_id="u1", content="Lives in Berlin").fact  # embedded before the outage
    fake_openai.go_down(EMBEDDINGS)
    posted = [
        "Prefers oolong tea in the afternoon",
        "Prefers oolong tea in the afternoon",  # the duplicate
        "Lives in Paris",  # contradicts Berlin
        "Works on the billing service",
        "Keeps a golden retriever called Biscuit",
    ]

    answers = []
    for content in posted:
        with django_capture_on_commit_callbacks(execute=True):  # the queued task runs inline, and fails too
            answers.append(api.post("/api/v1/facts", {"user_id": "u1", "content": content}, format="json"))

    assert [answer.status_code for answer in answers] == [201] * 5
    assert [answer.json()["fact"]["embedding"] for answer in answers] == ["pending"] * 5
    assert [answer.json()["fact"]["status"] for answer in answers] == ["active"] * 5
    stored = Fact.objects.filter(tenant=tenant).exclude(pk=berlin.pk).order_by("pk")
    assert [fact.content for fact in stored] == posted
    assert all(fact.embedding is None and fact.embedding_attempts == 1 for fact in stored)  # the task tried once
    assert Fact.objects.get(pk=berlin.pk).valid_to is None  # nothing changed another fact yet

    search = api.post("/api/v1/facts/search", {"user_id": "u1", "query": "oolong tea"}, format="json")
    context = api.post("/api/v1/context", {"user_id": "u1", "query": "golden retriever Biscuit"}, format="json")

    assert search.status_code == 200
    assert search.json()["degraded"] == ["embeddings"]
    assert [hit["fact"]["content"] for hit in search.json()["results"]] == [posted[1], posted[0]]
    assert all(hit["scores"]["vector"] == 0 for hit in search.json()["results"])
    assert context.status_code == 200
    assert context.json()["degraded"] == ["embeddings"]
    assert "Keeps a golden retriever called Biscuit" in context.json()["text"]

    fake_openai.recover()
    facts_embed_sweep()  # what the every-minute schedule runs

    facts = {fact.content: fact for fact in Fact.objects.filter(tenant=tenant)}
    tea = Fact.objects.filter(tenant=tenant, content=posted[0]).order_by("pk")
    twin, duplicate = list(tea)
    assert not Fact.objects.filter(tenant=tenant).exclude(embedding_pending="").exists()
    assert all(fact.embedding is not None for fact in facts.values())
    assert duplicate.superseded_by_id == twin.pk
    assert duplicate.valid_to is not None
    assert twin.valid_to is None
    retired = Fact.objects.get(pk=berlin.pk)
    assert retired.superseded_by_id == facts["Lives in Paris"].pk  # the contradiction retired Berlin
    assert Fact.objects.filter(tenant=tenant).count() == 6
    assert Fact.objects.filter(tenant=tenant, valid_to__isnull=True).count() == 4
    events = Counter(FactEvent.objects.filter(tenant=tenant).values_list("action", flat=True))
    assert events == {"created": 6, "merged": 2, "superseded": 1}  # the twin's merge, the duplicate's retirement
    back = api.post("/api/v1/facts/search", {"user_id": "u1", "query": "oolong tea"}, format="json").json()
    assert back["degraded"] == []
    assert [hit["fact"]["id"] for hit in back["results"]][:1] == [twin.pk]
    assert api.get(f"/api/v1/facts/{twin.pk}").json()["embedding"] == "ready"


@pytest.mark.django_db
@pytest.mark.usefixtures("rules_judge")
def test_failed_attempts_back_off_exponentially_up_to_the_cap(tenant, fake_openai, settings):
    settings.FACTS_EMBED_RETRY_BASE_SECONDS = 10
    settings.FACTS_EMBED_RETRY_MAX_SECONDS = 25
    fake_openai.go_down(EMBEDDINGS)
    fact = fact_remember(tenant=tenant, user_id="u1", content="Lives in Lisbon").fact
    assert (fact.embedding_attempts, fact.embedding_pending) == (0, "judge")

    assert [embedding_retry_delay(n).total_seconds() for n in (1, 2, 3, 4)] == [10, 20, 25, 25]
    moments = []
    due_at = fact.embedding_next_attempt_at
    for attempt in (1, 2, 3):
        assert facts_embed_due(now=due_at - timedelta(seconds=1)).failed == 0  # not due yet: no call
        before = timezone.now()
        run = facts_embed_due(now=due_at)
        after = timezone.now()
        fact.refresh_from_db()
        delay = embedding_retry_delay(attempt)
        assert (run.failed, fact.embedding_attempts) == (1, attempt)
        assert before + delay <= fact.embedding_next_attempt_at <= after + delay
        moments.append(fact.embedding_next_attempt_at)
        due_at = fact.embedding_next_attempt_at

    fake_openai.recover()
    run = facts_embed_due(now=due_at)

    fact.refresh_from_db()
    assert (run.embedded, dict(run.outcomes)) == (1, {"created": 1})
    assert (fact.embedding_pending, fact.embedding_attempts, fact.embedding_next_attempt_at) == ("", 0, None)
    assert fact.embedding is not None
    assert fact.embedding_model == "fake-embed"


@pytest.mark.django_db
@pytest.mark.usefixtures("rules_judge")
def test_the_sweep_embeds_in_batches_one_call_each(tenant, other_tenant_and_key, fake_openai, settings):
    settings.FACTS_EMBED_BATCH_SIZE = 3
    fake_openai.go_down(EMBEDDINGS)
    for n in range(7):
        fact_remember(tenant=tenant, user_id=f"user-{n % 2}", content=f"Project note number {n} about deploys")
    fact_remember(tenant=other_tenant_and_key[0], user_id="u1", content="Another tenant's fact")
    fake_openai.recover()
    calls = embedding_requests(fake_openai)

    run = facts_embed_due(now=timezone.now() + timedelta(hours=2))

    assert run.embedded == 8
    # 8 facts in batches of 3: [3 of tenant], [3 of tenant], [1 of tenant + 1 of the other] = 4 calls.
    assert embedding_requests(fake_openai) - calls == 4
    assert [len(r["body"]["input"]) for r in fake_openai.requests_to(EMBEDDINGS)[calls:]] == [3, 3, 1, 1]
    assert not Fact.objects.exclude(embedding_pending="").exists()


@pytest.mark.django_db
@pytest.mark.usefixtures("rules_judge")
def test_an_edit_or_an_import_during_an_outage_is_kept_and_embedded_later_without_judging(tenant, fake_openai):
    first = fact_remember(tenant=tenant, user_id="u1", content="Uses Redis for caching").fact
    other = fact_remember(tenant=tenant, user_id="u1", content="Deploys on Fridays").fact
    fake_openai.go_down(EMBEDDINGS)

    # The same words as the first fact (a judge would merge them), but texts the embedding cache has not seen.
    edited = fact_update(tenant=tenant, fact_id=other.pk, actor="test", content="uses redis for caching")
    [imported] = facts_import(tenant=tenant, facts=[{"user_id": "u1", "content": "USES REDIS FOR CACHING"}], actor="t")

    assert (edited.content, edited.embedding, edited.embedding_pending) == ("uses redis for caching", None, "embed")
    assert Fact.objects.get(pk=imported.pk).embedding_pending == "embed"
    fake_openai.recover()
    run = facts_embed_due(now=timezone.now() + timedelta(hours=2))

    assert run.embedded == 2
    assert not run.outcomes
    assert Fact.objects.filter(pk__in=[first.pk, other.pk, imported.pk], valid_to__isnull=True).count() == 3
    assert Fact.objects.get(pk=other.pk).embedding is not None


@pytest.mark.django_db
@pytest.mark.usefixtures("rules_judge")
def test_extraction_embeds_every_candidate_in_one_call_and_keeps_them_during_an_outage(tenant, fake_openai):
    messages = [
        {"role": "user", "content": "I prefer PostgreSQL for new projects."},
        {"role": "user", "content": "I live in Lisbon."},
        {"role": "user", "content": "We decided to drop Python 3.10."},
    ]
    when = datetime(2023, 5, 5, 12, tzinfo=UTC)
    calls, moved = embedding_requests(fake_openai), []

    results = facts_extract(
        tenant=tenant, user_id="u1", messages=messages, reference_time=when, then=lambda: moved.append(1)
    )

    assert len(results) == 3
    assert embedding_requests(fake_openai) - calls == 1  # every candidate in one call
    assert moved == [1]
    fake_openai.go_down(EMBEDDINGS)
    again = facts_extract(
        tenant=tenant,
        user_id="u2",
        messages=messages,
        reference_time=when,
        then=lambda: moved.append(2),
    )
    assert [r.fact.embedding_pending for r in again] == ["judge"] * len(results)
    assert moved == [1, 2]  # the watermark moves with the facts stored awaiting their vectors


@pytest.mark.django_db(transaction=True)
def test_a_slow_chat_judge_holds_no_lock_and_delays_no_one(fake_openai, settings):
    """User A's fact is being judged by the chat model (its reply held at the fake's gate): meanwhile A's memory is
    not locked, another user's write commits, and A's reads answer. Then A's write completes."""
    settings.FACTS_LLM_JUDGE_MIN_SIMILARITY = 0.0  # A's neighbour is always asked about
    tenant, key = make_tenant("slow-judge")
    api = client_with_key(key)
    fact_remember(tenant=tenant, user_id="a", content="Prefers PostgreSQL for new projects")
    fake_openai.reply_next(
        json.dumps({"judgements": [{"index": 0, "relation": "unrelated", "certainty": 0.9, "reason": "different"}]})
    )
    fake_openai.hold_chat()
    outcome = {}

    def remember_for_a():

        try:
            outcome["result"] = fact_remember(tenant=tenant, user_id="a", content="Prefers tabs over spaces in Go")
        finally:
            connection.close()

    thread = threading.Thread(target=remember_for_a)
    thread.start()
    try:
        assert fake_openai.chat_waiting.wait(30), "A's judge never asked the chat model"
        locked_while_judging = is_locked(LockNamespace.USER_MEMORY, tenant.pk, "a")
        other_user = fact_remember(tenant=tenant, user_id="b", content="Prefers PostgreSQL for new projects")
        listed = api.get("/api/v1/facts", {"user_id": "a"})
        searched = api.post("/api/v1/facts/search", {"user_id": "a", "query": "PostgreSQL"}, format="json")
        still_judging = thread.is_alive() and "result" not in outcome
    finally:
        fake_openai.release_chat()
        thread.join(30)

    assert still_judging  # everything above happened while A's judge waited on the chat model
    assert locked_while_judging is False
    assert other_user.outcome == "created"
    assert Fact.objects.filter(pk=other_user.fact.pk).exists()
    assert listed.status_code == 200
    assert [f["content"] for f in listed.json()["results"]] == ["Prefers PostgreSQL for new projects"]
    assert searched.status_code == 200
    assert searched.json()["degraded"] == []
    assert outcome["result"].outcome == "created"
    assert Fact.objects.filter(tenant=tenant, user_id="a").count() == 2


@pytest.mark.django_db
@pytest.mark.usefixtures("rules_judge")
def test_facts_below_auto_approval_are_judged_on_arrival_into_a_proposal_or_a_conflict(tenant, fake_openai):
    berlin = fact_remember(tenant=tenant, user_id="u1", content="Lives in Berlin").fact
    tea = fact_remember(tenant=tenant, user_id="u1", content="Drinks green tea every morning").fact
    fake_openai.go_down(EMBEDDINGS)
    paris = fact_remember(tenant=tenant, user_id="u1", content="Lives in Paris", confidence=0.5).fact
    twin = fact_remember(tenant=tenant, user_id="u1", content="drinks green tea every morning", confidence=0.5).fact
    assert [paris.status, twin.status] == ["pending", "pending"]
    fake_openai.recover()

    run = facts_embed_due(now=timezone.now() + timedelta(hours=2))

    assert dict(run.outcomes) == {"conflict": 1, "pending": 1}
    paris.refresh_from_db()
    twin.refresh_from_db()
    assert paris.status == "pending"
    assert paris.proposal["conflicts"][0]["fact"] == berlin.pk
    assert FactConflict.objects.get(new_fact=paris).existing_fact_id == berlin.pk
    assert twin.proposal["action"] == "merge"
    assert twin.proposal["targets"][0]["fact"] == tea.pk
    assert Fact.objects.get(pk=berlin.pk).valid_to is None  # a pending fact changes no other fact
    assert Fact.objects.get(pk=tea.pk).confidence == tea.confidence

    approved = fact_approve(tenant=tenant, fact_id=twin.pk, actor="staff:1")  # the proposal applies

    assert approved.superseded_by_id == tea.pk


@pytest.mark.django_db
@pytest.mark.usefixtures("rules_judge")
def test_a_broker_that_cannot_queue_fails_no_write_and_the_sweep_catches_up(
    api, tenant, fake_openai, monkeypatch, django_capture_on_commit_callbacks
):
    def broker_down(*args, **kwargs):
        raise ConnectionError("redis: connection refused")

    monkeypatch.setattr("facts.services.embed_queue.async_task", broker_down)
    fake_openai.go_down(EMBEDDINGS)

    with django_capture_on_commit_callbacks(execute=True) as callbacks:
        response = api.post("/api/v1/facts", {"user_id": "u1", "content": "Lives in Porto"}, format="json")

    assert response.status_code == 201
    assert len(callbacks) == 1  # the embedding was to be queued after commit
    fact = Fact.objects.get(pk=response.json()["fact"]["id"])
    assert (fact.embedding_pending, fact.embedding_attempts) == ("judge", 0)  # not queued: no attempt yet
    fake_openai.recover()
    facts_embed_sweep()
    fact.refresh_from_db()
    assert fact.embedding_pending == ""
    assert fact.embedding is not None


@pytest.mark.django_db
@pytest.mark.usefixtures("rules_judge")
def test_a_conflict_merged_during_an_outage_keeps_the_merged_text_awaiting_its_vector(tenant, fake_openai):
    fact_remember(tenant=tenant, user_id="u1", content="Lives in Berlin")
    conflict_id = fact_remember(tenant=tenant, user_id="u1", content="Lives in Paris", confidence=0.5).conflict_ids[0]
    fake_openai.go_down(EMBEDDINGS)

    conflict = conflict_resolve(
        tenant=tenant, conflict_id=conflict_id, resolution="merge", content="Lives in Paris and Berlin", actor="s:1"
    )

    kept = Fact.objects.get(pk=conflict.existing_fact_id)
    assert (kept.content, kept.embedding, kept.embedding_pending) == ("Lives in Paris and Berlin", None, "embed")
    fake_openai.recover()
    assert facts_embed_due(now=timezone.now() + timedelta(hours=2)).embedded == 1


@pytest.mark.django_db
def test_the_schema_documents_the_embedding_state_and_the_degraded_lists():
    schema = APIClient().get("/api/schema/", HTTP_ACCEPT="application/vnd.oai.openapi+json").json()
    components = schema["components"]["schemas"]

    embedding = components["FactOutput"]["properties"]["embedding"]
    assert components[embedding["allOf"][0]["$ref"].rsplit("/", 1)[1]]["enum"] == ["ready", "pending"]
    assert "pending" in embedding["description"]
    for path in ("/api/v1/facts/search", "/api/v1/kb/search", "/api/v1/context"):
        body = schema["paths"][path]["post"]["responses"]["200"]["content"]["application/json"]["schema"]
        degraded = components[body["$ref"].rsplit("/", 1)[1]]["properties"]["degraded"]
        assert degraded["type"] == "array", path
        assert "embeddings" in degraded["description"], path


@pytest.mark.django_db
@pytest.mark.usefixtures("rules_judge")
def test_the_sweep_stops_at_the_first_failed_call_while_the_provider_is_still_down(tenant, fake_openai, settings):
    settings.FACTS_EMBED_BATCH_SIZE = 3
    settings.OPENAI_MAX_RETRIES = 0
    fake_openai.go_down(EMBEDDINGS)
    for n in range(7):
        fact_remember(tenant=tenant, user_id="u1", content=f"Project note number {n} about deploys")
    calls = embedding_requests(fake_openai)

    run = facts_embed_due(now=timezone.now() + timedelta(hours=2))

    assert embedding_requests(fake_openai) - calls == 1  # one batch tried, not every batch
    assert (run.failed, run.embedded) == (3, 0)
    attempts = sorted(Fact.objects.filter(tenant=tenant).values_list("embedding_attempts", flat=True))
    assert attempts == [0, 0, 0, 0, 1, 1, 1]


@pytest.mark.django_db
def test_the_sweep_finds_the_due_facts_through_their_partial_index(tenant):

    facts_import(
        tenant=tenant, facts=[{"user_id": f"u{n % 50}", "content": f"Note {n}"} for n in range(1000)], actor="t"
    )
    Fact.objects.filter(pk__in=Fact.objects.order_by("pk").values("pk")[:5]).update(
        embedding_pending="judge", embedding_next_attempt_at=timezone.now()
    )
    due = (
        Fact.objects.filter(embedding_next_attempt_at__lte=timezone.now())
        .exclude(embedding_pending="")
        .order_by("embedding_next_attempt_at", "pk")[:64]
    )
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE facts_fact")
    plan = due.explain(format="json")

    assert "fact_embedding_pending" in plan
    assert "Seq Scan" not in plan


@pytest.mark.django_db(transaction=True)
def test_a_neighbour_changed_while_the_judge_thought_is_judged_again_before_the_write(fake_openai, settings):
    settings.FACTS_LLM_JUDGE_MIN_SIMILARITY = 0.0
    tenant, _ = make_tenant("rejudge")
    neighbour = fact_remember(tenant=tenant, user_id="a", content="Prefers PostgreSQL for new projects").fact
    unrelated = json.dumps({"judgements": [{"index": 0, "relation": "unrelated", "certainty": 0.9, "reason": "no"}]})
    fake_openai.reply_next(unrelated, unrelated)
    fake_openai.hold_chat()
    outcome = {}

    def remember_for_a():
        from django.db import connection as own

        try:
            outcome["result"] = fact_remember(tenant=tenant, user_id="a", content="Prefers tabs over spaces in Go")
        finally:
            own.close()

    thread = threading.Thread(target=remember_for_a)
    thread.start()
    try:
        assert fake_openai.chat_waiting.wait(30)
        fact_update(tenant=tenant, fact_id=neighbour.pk, actor="test", confidence=0.8)  # while A's judge waits
    finally:
        fake_openai.release_chat()
        thread.join(30)

    assert outcome["result"].outcome == "created"
    assert len(fake_openai.requests_to("/v1/chat/completions")) == 2  # judged, found stale under the lock, judged again


@pytest.mark.django_db
@pytest.mark.usefixtures("rules_judge")
def test_a_fact_awaiting_its_vector_is_found_by_keywords_in_a_hybrid_search_too(tenant, fake_openai):
    embedded = [
        fact_remember(tenant=tenant, user_id="u1", content=text).fact
        for text in ("Drinks oolong tea after lunch", "Brews oolong tea for the team", "Cycles to work")
    ]
    fake_openai.go_down(EMBEDDINGS)
    waiting = fact_remember(tenant=tenant, user_id="u1", content="Buys oolong tea leaves in Taipei").fact
    fake_openai.recover()

    found = facts_search_answer(tenant=tenant, user_id="u1", query="oolong tea", limit=10)

    assert found.degraded == []
    by_id = {hit.fact.pk: hit for hit in found.results}
    assert waiting.pk in by_id
    assert by_id[waiting.pk].vector == 0
    assert by_id[waiting.pk].keyword > 0
    assert by_id[waiting.pk].fact.embedding is None
    assert by_id[embedded[0].pk].vector > 0  # the others keep both sides
