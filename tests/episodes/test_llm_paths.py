"""Episode extraction and summaries with a chat model: the real openai client against the local fake server."""

import json
from datetime import UTC, datetime

import pytest

from episodes.models import Episode
from episodes.summaries import EpisodeSummary
from facts.extraction import extract_by_rules
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
    openai_settings.FACTS_EXTRACTED_AUTO_APPROVE_CONFIDENCE = 0.99  # everything extracted waits for review
    fake_openai.reply_next("not json", "{still not")

    episode_id = post_episode(conversation()).json()["id"]

    failed = api.get(f"/api/v1/episodes/{episode_id}").json()
    assert failed["extraction_status"] == "failed"
    assert "returned invalid JSON twice" in failed["extraction_error"]
    assert failed["extraction_fallback_reason"] == ""  # it did not fall back: it failed, to be retried
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


def fact_answer(content: str = "Has lived in Berlin since 2021", **fields) -> str:
    """An extraction answer with one fact (not one the offline rules would write), `fields` overriding its own."""
    return json.dumps({"facts": [{"content": content, "category": "profile", "confidence": 0.9, **fields}]})


def offline_contents(messages: list[dict]) -> list[str]:
    """What the offline extractor makes of these messages, said at the time of the last of them."""
    when = datetime.fromisoformat(messages[-1]["timestamp"].replace("Z", "+00:00")).astimezone(UTC)
    return sorted({candidate.content for candidate in extract_by_rules(messages, reference_time=when)})


def test_the_answer_contract_becomes_the_episodes_facts_with_their_day_and_message_indexes(
    api, fake_openai, post_episode
):
    fake_openai.reply_next(EXTRACTED, summary("Lives in Berlin."))
    episode_id = post_episode(conversation(messages=TURN_1)).json()["id"]
    tea = fact_answer(
        "The user prefers green tea in the morning", category="preference", confidence=0.7, refers_to="2023-05-08",
        messages=[0],
    )  # fmt: skip
    fake_openai.reply_next(tea, summary("Lives in Berlin, drinks green tea."))

    post_episode(conversation(messages=TURN_1 + TURN_2))  # the model sees messages 2 and 3 as [0] and [1]

    episode = api.get(f"/api/v1/episodes/{episode_id}").json()
    [fact] = [fact for fact in episode["facts"] if "tea" in fact["content"]]
    assert (fact["content"], fact["category"], fact["confidence"]) == (
        "Prefers green tea in the morning",
        "preference",
        0.7,
    )
    assert (fact["metadata"], fact["source_messages"]) == ({"refers_to": "2023-05-08"}, [2])
    assert episode["extraction_fallback_reason"] == ""


@pytest.mark.parametrize(
    ("answer", "problem"),
    [
        pytest.param("not json", "$: Invalid JSON", id="malformed JSON"),
        pytest.param(fact_answer(category="location"), "$.facts[0].category: Input should be", id="unknown category"),
        pytest.param(fact_answer(confidence=1.5), "$.facts[0].confidence: Input should be less than or equal to 1",
                     id="confidence over 1"),
        pytest.param(fact_answer(confidence="0.9"), "$.facts[0].confidence: Input should be a valid number",
                     id="confidence a string"),
        pytest.param(fact_answer(refers_to="next week"), "$.facts[0].refers_to: Value error", id="refers_to next week"),
        pytest.param(fact_answer(refers_to="2023-13-45"), "$.facts[0].refers_to: Value error",
                     id="refers_to 2023-13-45"),
        pytest.param(fact_answer(messages=["0"]), "$.facts[0].messages[0]: Input should be a valid integer",
                     id="messages not integers"),
    ],
)  # fmt: skip
def test_an_answer_outside_the_contract_twice_falls_back_for_that_run_and_the_episode_says_why(
    api, fake_openai, post_episode, answer, problem
):
    fake_openai.reply_next(answer, answer, summary("Lives in Berlin."))

    episode_id = post_episode(conversation(messages=TURN_1)).json()["id"]

    episode = api.get(f"/api/v1/episodes/{episode_id}").json()
    assert (episode["extraction_status"], episode["extraction_error"]) == ("done", "")
    reason = episode["extraction_fallback_reason"]
    assert reason.startswith("The chat model failed, so the facts were extracted offline: ")
    assert problem in reason
    assert offline_contents(TURN_1), "the offline extractor finds Berlin and PostgreSQL"
    assert sorted({fact["content"] for fact in episode["facts"]}) == offline_contents(TURN_1)
    [listed] = api.get("/api/v1/episodes", {"user_id": "u1"}).json()["results"]
    assert listed["extraction_fallback_reason"] == reason

    # Given a chat model answering within the contract again, when more messages arrive, the next run clears it.
    tea = fact_answer("Prefers green tea in the morning", category="preference", messages=[0])
    fake_openai.reply_next(tea, summary("Lives in Berlin, drinks green tea."))
    post_episode(conversation(messages=TURN_1 + TURN_2))

    again = api.get(f"/api/v1/episodes/{episode_id}").json()
    assert (again["extraction_status"], again["extraction_fallback_reason"]) == ("done", "")
    assert "Prefers green tea in the morning" in {fact["content"] for fact in again["facts"]}


def test_a_run_that_falls_back_for_one_of_its_ranges_keeps_the_reason(api, fake_openai, openai_settings, post_episode):
    openai_settings.EPISODES_EXTRACTION_STEP_MESSAGES = 2  # TURN_1, then TURN_2: two ranges in one run
    tea = fact_answer("Prefers green tea in the morning", category="preference", messages=[0])
    fake_openai.reply_next("{oops", "{oops again", tea, summary("Lives in Berlin, drinks green tea."))

    episode_id = post_episode(conversation(messages=TURN_1 + TURN_2)).json()["id"]

    episode = api.get(f"/api/v1/episodes/{episode_id}").json()
    assert episode["extraction_status"] == "done"
    assert "$: Invalid JSON" in episode["extraction_fallback_reason"]
    contents = {fact["content"]: fact["source_messages"] for fact in episode["facts"]}
    assert contents["Prefers green tea in the morning"] == [2]  # the second range, by the chat model
    assert set(offline_contents(TURN_1)) <= contents.keys()  # the first range, offline
