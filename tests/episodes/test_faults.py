"""Faults during extraction and search: a crash between ranges repeats and loses nothing, a chat model that is down
never leaves an episode stuck (the offline rules, or a retry with backoff on the requeue schedule), a failing
embedding provider costs the summary its vector for a while only, and episode search degrades to keywords."""

import json
from datetime import timedelta

import pytest
from django.db import connection
from django.utils import timezone

from episodes import extraction
from episodes.extraction import episode_extract, episodes_embed_summaries, retry_delay
from episodes.models import Episode
from episodes.selectors import episodes_search
from episodes.services import episode_store, episodes_requeue
from facts.models import Fact
from tests.episodes.factories import TURN_1, conversation
from tests.factories import make_tenant
from tests.fake_openai import Failure

pytestmark = pytest.mark.django_db

SESSION = [
    {"role": "user", "content": "I live in Berlin and I prefer PostgreSQL for new projects."},
    {"role": "assistant", "content": "Noted."},
    {"role": "user", "content": "I prefer green tea in the morning."},
    {"role": "assistant", "content": "Green tea, good choice."},
    {"role": "user", "content": "I work as a nurse in Valencia."},
    {"role": "assistant", "content": "A demanding job."},
]
FACTS = [
    "Lives in Berlin", "Prefers PostgreSQL for new projects", "Prefers green tea in the morning",
    "Works as a nurse in Valencia",
]  # fmt: skip
REAL_FACTS_EXTRACT = extraction.facts_extract
EXTRACTED = json.dumps({"facts": [{"content": "Lives in Berlin", "category": "profile", "confidence": 0.9}]})


def store(tenant, messages=SESSION):
    return episode_store(tenant=tenant, user_id="u1", session_id="s1", messages=messages).episode


def spy_on_ranges(monkeypatch, fail_on_call: int | None = None) -> list[list[int]]:
    """The message indexes each facts_extract call sees; the call numbered `fail_on_call` dies before it runs."""
    seen = []

    def spy(**kwargs):
        seen.append([message["index"] for message in kwargs["messages"]])
        if len(seen) == fail_on_call:
            raise MemoryError("worker killed")
        return REAL_FACTS_EXTRACT(**kwargs)

    monkeypatch.setattr(extraction, "facts_extract", spy)
    return seen


def test_a_crash_after_the_first_range_keeps_it_and_the_rerun_extracts_only_the_rest(tenant, settings, monkeypatch):
    settings.EPISODES_EXTRACTION_STEP_MESSAGES = 2
    episode = store(tenant)
    seen = spy_on_ranges(monkeypatch, fail_on_call=2)

    assert episode_extract(episode_id=episode.pk) == "failed"

    episode.refresh_from_db()
    assert episode.extracted_message_count == 2
    assert sorted(Fact.objects.values_list("content", flat=True)) == FACTS[:2]
    assert seen == [[0, 1], [2, 3]]

    seen = spy_on_ranges(monkeypatch)
    assert episode_extract(episode_id=episode.pk) == "done"

    assert seen == [[2, 3], [4, 5]]  # the committed range is not asked again
    episode.refresh_from_db()
    assert episode.extracted_message_count == 6
    assert sorted(Fact.objects.values_list("content", flat=True)) == FACTS  # each once
    assert Fact.objects.count() == 4


def test_a_range_does_not_part_a_user_message_from_the_reply_after_it(tenant, settings, monkeypatch):
    settings.EPISODES_EXTRACTION_STEP_MESSAGES = 3
    episode = store(tenant)
    seen = spy_on_ranges(monkeypatch)

    assert episode_extract(episode_id=episode.pk) == "done"

    assert seen == [[0, 1, 2, 3], [4, 5]]


@pytest.mark.usefixtures("openai_settings")
class TestChatModelDown:
    """The fake answers 500 to every chat request while no reply is scripted: the chat model is down."""

    @pytest.fixture(autouse=True)
    def no_chat_judge(self, openai_settings):
        openai_settings.FACTS_LLM_JUDGE_MIN_SIMILARITY = 1.01  # only extraction and summaries ask the chat model

    def test_with_the_fallback_the_episode_ends_done_with_facts_by_the_rules(self, api, post_episode, settings):
        settings.EPISODES_EXTRACTION_ON_CHAT_FAILURE = "fallback"

        episode_id = post_episode(conversation(messages=TURN_1)).json()["id"]

        episode = api.get(f"/api/v1/episodes/{episode_id}").json()
        assert (episode["extraction_status"], episode["extraction_next_attempt_at"]) == ("done", None)
        assert sorted(f["content"] for f in episode["facts"]) == FACTS[:2]
        assert episode["summary"].startswith("I live in Berlin")  # extractive

    def test_with_retry_the_episode_waits_with_a_next_attempt_and_the_schedule_finishes_it(
        self, api, post_episode, settings, fake_openai
    ):
        settings.EPISODES_EXTRACTION_ON_CHAT_FAILURE = "retry"
        before = timezone.now()

        episode_id = post_episode(conversation(messages=TURN_1)).json()["id"]

        failed = api.get(f"/api/v1/episodes/{episode_id}").json()
        assert (failed["extraction_status"], failed["extraction_attempts"], failed["facts"]) == ("failed", 1, [])
        episode = Episode.objects.get(pk=episode_id)
        assert before + timedelta(seconds=60) <= episode.extraction_next_attempt_at <= timezone.now() + timedelta(60)
        assert failed["extraction_next_attempt_at"] is not None

        # Not due yet: the schedule leaves it alone
        assert episodes_requeue(older_than=timedelta(minutes=10)) == 0

        # Due, still down: queued (the task runs inline here), failed again, the wait doubled
        before = timezone.now()
        assert episodes_requeue(older_than=timedelta(minutes=10), now=episode.extraction_next_attempt_at) == 1
        episode.refresh_from_db()
        assert (episode.extraction_status, episode.extraction_attempts) == ("failed", 2)
        assert episode.extraction_next_attempt_at >= before + timedelta(seconds=120)

        # Due, the model is back: done, the facts extracted once
        fake_openai.reply_next(EXTRACTED, json.dumps({"summary": "Lives in Berlin."}))
        assert episodes_requeue(older_than=timedelta(minutes=10), now=episode.extraction_next_attempt_at) == 1
        done = api.get(f"/api/v1/episodes/{episode_id}").json()
        assert (done["extraction_status"], done["extraction_attempts"], done["extraction_next_attempt_at"]) == (
            "done",
            0,
            None,
        )
        assert [f["content"] for f in done["facts"]] == ["Lives in Berlin"]


def test_the_backoff_doubles_from_the_base_up_to_the_cap_and_stays_there(settings):
    settings.EPISODES_EXTRACTION_RETRY_BASE_SECONDS = 60
    settings.EPISODES_EXTRACTION_RETRY_MAX_SECONDS = 3600

    assert [retry_delay(n).total_seconds() for n in (1, 2, 3, 6, 7, 1000, 32767)] == [
        60, 120, 240, 1920, 3600, 3600, 3600,
    ]  # fmt: skip


def test_any_failure_is_retried_on_the_schedule_forever_and_retry_queues_it_at_once(tenant, monkeypatch, retry_episode):
    episode = store(tenant, TURN_1)
    spy_on_ranges(monkeypatch, fail_on_call=1)  # a bug, not a provider: the same backoff
    assert episode_extract(episode_id=episode.pk) == "failed"
    Episode.objects.filter(pk=episode.pk).update(extraction_attempts=500)  # long past the cap
    episode.refresh_from_db()
    assert episode.extraction_next_attempt_at is not None
    spy_on_ranges(monkeypatch)
    assert episodes_requeue(older_than=timedelta(minutes=10), now=timezone.now() + timedelta(hours=2)) == 1
    episode.refresh_from_db()
    assert (episode.extraction_status, episode.extraction_attempts) == ("done", 0)

    assert retry_episode(episode.pk).status_code == 409  # done: nothing to retry


@pytest.mark.usefixtures("openai_settings")
def test_a_summary_whose_embedding_fails_is_stored_found_by_keywords_and_embedded_later(tenant, settings, fake_openai):
    settings.CHAT_PROVIDER = "none"  # the offline rules and the extractive summary; vectors from the fake
    episode = store(tenant, [{"role": "user", "content": "Hello there, how is the weather looking around here?"}])
    fake_openai.fail_next(*[Failure(status=500)] * 3)  # the summary's embedding, and its two retries

    assert episode_extract(episode_id=episode.pk) == "done"

    episode.refresh_from_db()
    assert episode.summary.startswith("Hello there")
    assert (episode.embedding, episode.embedding_model) == (None, "")
    [hit] = episodes_search(tenant=tenant, user_id="u1", query="weather")
    assert (hit.episode.pk, hit.vector) == (episode.pk, 0)
    assert hit.keyword > 0

    assert episodes_embed_summaries() == 1

    episode.refresh_from_db()
    assert episode.embedding is not None
    assert episode.embedding_model == "fake-embed"
    assert episodes_search(tenant=tenant, user_id="u1", query="weather")[0].vector > 0


@pytest.mark.usefixtures("openai_settings")
def test_episode_search_answers_by_keywords_while_embeddings_fail(api, post_episode, fake_openai, settings):
    settings.CHAT_PROVIDER = "none"
    post_episode(conversation(messages=TURN_1))
    query = {"user_id": "u1", "query": "Where is Berlin?"}

    fake_openai.fail_next(*[Failure(status=500)] * 3)
    degraded = api.post("/api/v1/episodes/search", query, format="json")

    assert degraded.status_code == 200
    body = degraded.json()
    assert body["degraded"] == ["embeddings"]
    [hit] = body["results"]
    assert hit["scores"]["vector"] == 0
    assert hit["scores"]["keyword"] == hit["score"] == 1
    assert [m["index"] for m in hit["matches"]] == [0, 1]

    healthy = api.post("/api/v1/episodes/search", query, format="json").json()
    assert healthy["degraded"] == []
    assert healthy["results"][0]["scores"]["vector"] > 0


@pytest.mark.django_db(transaction=True)
def test_no_transaction_is_open_across_steps_nor_during_the_slow_calls(settings, monkeypatch):
    settings.EPISODES_EXTRACTION_STEP_MESSAGES = 2
    tenant, _ = make_tenant()
    open_during = []

    def extract(**kwargs):
        open_during.append(("extract", connection.in_atomic_block))
        return REAL_FACTS_EXTRACT(**kwargs)

    def embed(*args, **kwargs):
        open_during.append(("summary embedding", connection.in_atomic_block))
        return real_embed(*args, **kwargs)

    real_embed = extraction.embed_query
    monkeypatch.setattr(extraction, "facts_extract", extract)
    monkeypatch.setattr(extraction, "embed_query", embed)

    episode = store(tenant)  # committed: its extraction runs after the commit (inline in the tests)

    assert Episode.objects.get(pk=episode.pk).extraction_status == "done"
    assert open_during == [("extract", False)] * 3 + [("summary embedding", False)]
