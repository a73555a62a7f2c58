"""Extraction and judging with a chat model: the real openai client against the local fake server."""

import json
from datetime import UTC, datetime

import pytest

from ai.chat import get_chat
from ai.errors import AIProviderError
from facts.extraction import extract_by_rules
from facts.extraction.candidate import ExtractedFact
from facts.extraction.chat import llm_extract
from facts.judging.chat import FactJudgements, llm_judge
from facts.judging.judgement import Judgement, Relation
from facts.models import Fact
from facts.services import fact_remember, facts_extract

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("openai_settings")]

WHEN = datetime(2023, 5, 5, 12, tzinfo=UTC)
MESSAGES = [
    {"role": "user", "content": "I moved to Lisbon last month and I prefer PostgreSQL for new projects."},
    {"role": "assistant", "content": "Noted!"},
]


def extract(tenant, **options):
    return facts_extract(tenant=tenant, user_id="u1", messages=MESSAGES, reference_time=WHEN, **options)


def test_the_model_extracts_atomic_facts_that_wait_for_review(tenant, fake_openai):
    fake_openai.reply_next(
        json.dumps(
            {
                "facts": [
                    {"content": "Lives in Lisbon", "category": "profile", "confidence": 0.9},
                    {"content": "Prefers PostgreSQL for new projects", "category": "preference", "confidence": 0.8},
                ]
            }
        )
    )

    results = extract(tenant)

    assert [r.outcome for r in results] == ["created", "created"]
    facts = Fact.objects.filter(tenant=tenant).order_by("pk")
    assert [(f.content, f.category, f.source, f.status) for f in facts] == [
        ("Lives in Lisbon", "profile", "extracted", "pending"),
        ("Prefers PostgreSQL for new projects", "preference", "extracted", "pending"),
    ]
    assert all(f.occurred_at == WHEN for f in facts)
    prompt = fake_openai.requests_to("/v1/chat/completions")[0]["body"]["messages"]
    assert "2023-05-05" in prompt[1]["content"]  # relative dates are resolved against the conversation time


def test_the_model_is_shown_known_facts(tenant, fake_openai):
    fact_remember(tenant=tenant, user_id="u1", content="Works at Initech")
    fake_openai.reply_next(json.dumps({"facts": []}))

    assert extract(tenant) == []
    assert "Works at Initech" in fake_openai.requests_to("/v1/chat/completions")[0]["body"]["messages"][1]["content"]


def test_malformed_answers_twice_raise_and_store_nothing_when_asked_to(tenant, fake_openai):
    fake_openai.reply_next("not json", "{still not")

    with pytest.raises(AIProviderError, match="invalid JSON twice"):
        extract(tenant, on_chat_failure="raise")
    assert not Fact.objects.exists()


def test_a_chat_model_failing_for_good_falls_back_to_the_rules(tenant, fake_openai):
    fake_openai.reply_next("not json", "{still not")

    results = extract(tenant)

    assert [r.fact.content for r in results] == [r.content for r in extract_by_rules(MESSAGES, reference_time=WHEN)]
    assert results, "the rules find the Lisbon move and the PostgreSQL preference"


def test_a_malformed_answer_then_a_valid_one_is_used(tenant, fake_openai):
    fake_openai.reply_next(
        "{oops", json.dumps({"facts": [{"content": "Lives in Lisbon", "category": "profile", "confidence": 0.9}]})
    )

    assert [r.fact.content for r in extract(tenant)] == ["Lives in Lisbon"]


def test_the_model_judges_a_contradiction_and_the_old_fact_is_superseded(tenant, fake_openai):
    old = fact_remember(tenant=tenant, user_id="u1", content="Lives in Berlin").fact
    fake_openai.reply_next(
        json.dumps({"judgements": [{"index": 0, "relation": "contradicts", "certainty": 0.95, "reason": "moved"}]})
    )

    result = fact_remember(tenant=tenant, user_id="u1", content="Lives in Lisbon now")

    assert result.outcome == "superseded"
    assert result.superseded_ids == [old.pk]


def test_when_the_chat_judge_fails_the_rules_judge(tenant, fake_openai):
    fact_remember(tenant=tenant, user_id="u1", content="Prefers dark mode in the editor")
    fake_openai.reply_next("bad", "worse")

    result = fact_remember(tenant=tenant, user_id="u1", content="Prefers dark mode in the editor, always")

    assert result.outcome == "merged"


def chat_requests(fake_openai) -> list[dict]:
    return [request["body"] for request in fake_openai.requests_to("/v1/chat/completions")]


def judge(new: str, existing: list[str]):
    return llm_judge(get_chat(), new=new, existing=existing)


def test_the_judge_asks_for_its_generated_schema_under_a_stable_name(fake_openai):
    fake_openai.reply_next(json.dumps({"judgements": []}))

    judge("Lives in Lisbon", ["Lives in Berlin"])

    [body] = chat_requests(fake_openai)
    assert body["response_format"] == {
        "type": "json_schema",
        "json_schema": {"name": "fact_judgements", "schema": FactJudgements.model_json_schema()},
    }
    schema = body["response_format"]["json_schema"]["schema"]
    relation = schema["$defs"][schema["$defs"]["PairJudgement"]["properties"]["relation"]["$ref"].split("/")[-1]]
    assert relation["enum"] == ["duplicate", "refines", "contradicts", "unrelated"]


def test_a_pair_the_judge_skipped_is_unrelated_and_out_of_range_indexes_are_ignored(fake_openai):
    fake_openai.reply_next(
        json.dumps(
            {
                "judgements": [
                    {"index": 1, "relation": "contradicts", "certainty": 0.9, "reason": "moved"},
                    {"index": 3, "relation": "duplicate", "certainty": 1, "reason": "no such fact"},
                    {"index": -1, "relation": "duplicate", "certainty": 1, "reason": "no such fact"},
                ]
            }
        )
    )

    assert judge("Lives in Lisbon", ["Likes tea", "Lives in Berlin", "Works at Initech"]) == [
        Judgement(Relation.UNRELATED, 1.0, "not labelled by the model"),
        Judgement(Relation.CONTRADICTS, 0.9, "moved"),
        Judgement(Relation.UNRELATED, 1.0, "not labelled by the model"),
    ]


def test_the_judge_refuses_coerced_values_and_the_retry_names_them(fake_openai):
    coerced = {"index": True, "relation": "Contradicts", "certainty": "0.9", "reason": "moved"}
    valid = {"index": 0, "relation": "contradicts", "certainty": 0.9, "reason": "moved"}
    fake_openai.reply_next(json.dumps({"judgements": [coerced]}), json.dumps({"judgements": [valid]}))

    assert judge("Lives in Lisbon", ["Lives in Berlin"]) == [Judgement(Relation.CONTRADICTS, 0.9, "moved")]
    retry = chat_requests(fake_openai)[1]["messages"][-1]["content"]
    assert "$.judgements[0].index: Input should be a valid integer" in retry
    assert "$.judgements[0].relation: Input should be 'duplicate', 'refines', 'contradicts' or 'unrelated'" in retry
    assert "$.judgements[0].certainty: Input should be a valid number" in retry


def test_extraction_drops_empty_contents_and_returns_plain_categories(fake_openai):
    fake_openai.reply_next(
        json.dumps(
            {
                "facts": [
                    {"content": "  Lives in Lisbon ", "category": "profile", "confidence": 1},
                    {"content": "   ", "category": "other", "confidence": 0.5},
                ]
            }
        )
    )

    [fact] = llm_extract(get_chat(), messages=MESSAGES, reference_time=WHEN, known_facts=[])

    assert fact == ExtractedFact(content="Lives in Lisbon", category="profile", confidence=1.0)
    assert type(fact.category) is str
    assert chat_requests(fake_openai)[0]["response_format"]["json_schema"]["name"] == "extracted_facts"


def test_an_unknown_category_or_a_boolean_confidence_is_retried_then_an_error_naming_the_path(tenant, fake_openai):
    wrong = json.dumps({"facts": [{"content": "Lives in Lisbon", "category": "location", "confidence": True}]})
    fake_openai.reply_next(wrong, wrong)

    with pytest.raises(AIProviderError, match=r"invalid JSON twice: \$\.facts\[0\]\.category: Input should be"):
        extract(tenant, on_chat_failure="raise")
    retry = chat_requests(fake_openai)[1]["messages"][-1]["content"]
    assert "$.facts[0].category: Input should be 'preference', 'profile', 'project', 'decision'" in retry
    assert "$.facts[0].confidence: Input should be a valid number" in retry  # true is not a confidence
    assert not Fact.objects.exists()


def test_the_model_names_the_messages_each_fact_was_said_in(tenant, fake_openai):
    fake_openai.reply_next(
        json.dumps(
            {
                "facts": [
                    {"content": "Lives in Lisbon", "category": "profile", "confidence": 0.9, "messages": [0, 0]},
                    {"content": "Likes it", "category": "other", "confidence": 0.5, "messages": [1, 7]},
                ]
            }
        )
    )
    messages = [{**message, "index": 10 + n} for n, message in enumerate(MESSAGES)]  # their places in an episode

    facts_extract(tenant=tenant, user_id="u1", messages=messages, reference_time=WHEN)

    provenance = dict(Fact.objects.filter(tenant=tenant).values_list("content", "source_messages"))
    assert provenance == {"Lives in Lisbon": [10], "Likes it": [11]}  # duplicates and unknown numbers dropped
    prompt = fake_openai.requests_to("/v1/chat/completions")[0]["body"]["messages"][1]["content"]
    assert "[0] user: I moved to Lisbon" in prompt
    assert "[1] assistant: Noted!" in prompt
