"""Extraction and judging with a chat model: the real openai client against the local fake server."""

import json
from datetime import UTC, datetime

import pytest

from ai.errors import AIProviderError
from facts.models import Fact
from facts.services import fact_remember, facts_extract

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("openai_settings")]

WHEN = datetime(2023, 5, 5, 12, tzinfo=UTC)
MESSAGES = [
    {"role": "user", "content": "I moved to Lisbon last month and I prefer PostgreSQL for new projects."},
    {"role": "assistant", "content": "Noted!"},
]


def extract(tenant):
    return facts_extract(tenant=tenant, user_id="u1", messages=MESSAGES, reference_time=WHEN)


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


def test_malformed_answers_twice_store_nothing_and_raise(tenant, fake_openai):
    fake_openai.reply_next("not json", "{still not")

    with pytest.raises(AIProviderError, match="invalid JSON twice"):
        extract(tenant)
    assert not Fact.objects.exists()


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
