"""Episode extraction and summaries with a chat model: the real openai client against the local fake server."""

import json

import pytest

from episodes.models import Episode
from episodes.summaries import EpisodeSummary
from facts.models import Fact
from tests.episodes.factories import TURN_1, TURN_2, conversation
from tests.fake_openai import Failure

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("openai_settings")]

EXTRACTED = json.dumps(
    {
        "facts": [
            {"content": "Lives in Berlin", "category": "profile", "confidence": 0.9},
            {"content": "Prefers PostgreSQL for new projects", "category": "preference", "confidence": 0.8},
        ]
    }
)


@pytest.fixture(autouse=True)
def no_chat_judge(openai_settings):
    """Only the extraction and summary calls are scripted here: new facts are never sent to the chat judge."""
    openai_settings.FACTS_LLM_JUDGE_MIN_SIMILARITY = 1.01


def summary(text: str) -> str:
    return json.dumps({"summary": text})


def chat_prompts(fake_openai) -> list[str]:
    return [request["body"]["messages"][1]["content"] for request in fake_openai.requests_to("/v1/chat/completions")]


def test_a_scripted_llm_failure_marks_the_episode_failed_with_the_message_and_a_retry_succeeds(
    api, fake_openai, openai_settings, post_episode, retry_episode
):
    openai_settings.EPISODES_EXTRACTION_ON_CHAT_FAILURE = "retry"
    fake_openai.reply_next("not json", "{still not")

    episode_id = post_episode(conversation()).json()["id"]

    failed = api.get(f"/api/v1/episodes/{episode_id}").json()
    assert failed["extraction_status"] == "failed"
    assert "returned invalid JSON twice" in failed["extraction_error"]
    assert (failed["extracted_message_count"], failed["extraction_attempts"], failed["facts"]) == (0, 1, [])
    assert failed["extraction_next_attempt_at"] is not None
    assert not Fact.objects.exists()

    fake_openai.reply_next(EXTRACTED, summary("The user lives in Berlin and prefers PostgreSQL."))
    response = retry_episode(episode_id)

    assert response.status_code == 202
    assert response.json()["extraction_status"] == "pending"
    done = api.get(f"/api/v1/episodes/{episode_id}").json()
    assert (done["extraction_status"], done["extraction_error"]) == ("done", "")
    assert done["extracted_message_count"] == 2
    assert done["summary"] == "The user lives in Berlin and prefers PostgreSQL."
    assert sorted((f["content"], f["status"]) for f in done["facts"]) == [
        ("Lives in Berlin", "pending"),
        ("Prefers PostgreSQL for new projects", "pending"),
    ]


def test_the_model_sees_only_the_new_messages_and_the_summary_builds_on_the_previous_one(
    api, fake_openai, post_episode
):
    fake_openai.reply_next(EXTRACTED, summary("Lives in Berlin, likes PostgreSQL."))
    episode_id = post_episode(conversation(messages=TURN_1)).json()["id"]
    tea = {"facts": [{"content": "Prefers green tea in the morning", "category": "preference", "confidence": 0.9}]}
    fake_openai.reply_next(json.dumps(tea), summary("Lives in Berlin, likes PostgreSQL and green tea."))

    post_episode(conversation(messages=TURN_1 + TURN_2))

    prompts = chat_prompts(fake_openai)
    assert len(prompts) == 4  # extract + summarise, twice
    extract_again, summarise_again = prompts[2], prompts[3]
    assert "green tea" in extract_again
    assert "PostgreSQL for new projects." not in extract_again
    assert "Lives in Berlin, likes PostgreSQL." in summarise_again  # the previous summary ...
    assert "green tea" in summarise_again
    assert "Noted, Berlin" not in summarise_again
    episode = api.get(f"/api/v1/episodes/{episode_id}").json()
    assert episode["summary"] == "Lives in Berlin, likes PostgreSQL and green tea."
    assert len(episode["facts"]) == 3


def test_when_the_chat_model_cannot_summarise_the_summary_is_extractive(api, fake_openai, post_episode):
    fake_openai.reply_next(EXTRACTED)  # no reply left for the summary: the fake answers 500, then again

    episode_id = post_episode(conversation()).json()["id"]

    episode = api.get(f"/api/v1/episodes/{episode_id}").json()
    assert episode["extraction_status"] == "done"
    assert episode["summary"].startswith("I live in Berlin and I prefer PostgreSQL")
    assert len(episode["facts"]) == 2


def test_an_embedding_endpoint_refusing_the_key_keeps_the_facts_awaiting_their_vectors(
    fake_openai, openai_settings, post_episode
):
    openai_settings.CHAT_PROVIDER = "none"  # rule-based extraction; the facts' vectors come from the endpoint
    fake_openai.fail_next(Failure(status=401))  # the facts' embedding call (issue 17: no write lost to it)

    episode_id = post_episode(conversation()).json()["id"]

    episode = Episode.objects.get(pk=episode_id)
    assert episode.extraction_status == "done"
    facts = Fact.objects.all()
    assert facts.exists()
    # Stored without vectors, then embedded by the task queued after commit (inline here), the endpoint answering again.
    assert {fact.embedding_pending for fact in facts} == {""}
    assert all(fact.embedding is not None for fact in facts)


def test_the_model_summary_is_asked_for_by_its_schema_and_shortened_to_the_limit(
    api, fake_openai, openai_settings, post_episode
):
    openai_settings.EPISODES_SUMMARY_MAX_CHARS = 40
    fake_openai.reply_next(EXTRACTED, summary("The user   lives in Berlin\nand prefers PostgreSQL for new projects."))

    episode_id = post_episode(conversation()).json()["id"]

    assert api.get(f"/api/v1/episodes/{episode_id}").json()["summary"] == "The user lives in Berlin and prefers…"
    summary_request = fake_openai.requests_to("/v1/chat/completions")[1]["body"]
    assert summary_request["response_format"]["json_schema"] == {
        "name": "episode_summary",
        "schema": EpisodeSummary.model_json_schema(),
    }


def test_a_summary_that_is_not_a_string_twice_gives_the_extractive_summary(api, fake_openai, post_episode):
    fake_openai.reply_next(EXTRACTED, json.dumps({"summary": ["Lives in Berlin"]}), json.dumps({"text": "x"}))

    episode_id = post_episode(conversation()).json()["id"]

    assert api.get(f"/api/v1/episodes/{episode_id}").json()["summary"].startswith("I live in Berlin")
    retry = fake_openai.requests_to("/v1/chat/completions")[2]["body"]["messages"][-1]["content"]
    assert "$.summary: Input should be a valid string" in retry
