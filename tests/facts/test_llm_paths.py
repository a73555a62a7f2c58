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


def test_the_model_extracts_atomic_facts_that_wait_for_review(tenant, fake_openai, settings):
    settings.FACTS_EXTRACTED_AUTO_APPROVE_CONFIDENCE = 0.95
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


def offline_contents() -> list[str]:
    return [candidate.content for candidate in extract_by_rules(MESSAGES, reference_time=WHEN)]


def test_a_chat_model_failing_for_good_falls_back_to_the_rules_and_says_why(tenant, fake_openai):
    fake_openai.reply_next("not json", "{still not")
    reasons = []

    results = extract(tenant, on_fallback=reasons.append)

    assert [r.fact.content for r in results] == offline_contents()
    assert results, "the rules find the Lisbon move and the PostgreSQL preference"
    [reason] = reasons
    assert reason.startswith("The chat model failed, so the facts were extracted offline: ")
    assert "fake-chat returned invalid JSON twice: $: Invalid JSON" in reason


def test_a_chat_endpoint_down_falls_back_to_the_rules_and_says_why(tenant, fake_openai):
    fake_openai.go_down("/v1/chat/completions")  # the embeddings still answer
    reasons = []

    results = extract(tenant, on_fallback=reasons.append)

    assert [r.fact.content for r in results] == offline_contents()
    [reason] = reasons
    assert "extracted offline" in reason
    assert "503" in reason


def test_a_malformed_answer_then_a_valid_one_is_used_without_falling_back(tenant, fake_openai):
    fake_openai.reply_next(
        "{oops", json.dumps({"facts": [{"content": "Lives in Lisbon", "category": "profile", "confidence": 0.9}]})
    )
    reasons = []

    assert [r.fact.content for r in extract(tenant, on_fallback=reasons.append)] == ["Lives in Lisbon"]
    assert reasons == []


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


def test_the_answer_contract_becomes_facts_with_their_day_and_messages(tenant, fake_openai):
    """Content without its subject, category, calibrated confidence, the day it refers to, the messages."""
    fake_openai.reply_next(
        json.dumps(
            {
                "facts": [
                    {
                        "content": "The user moved to Lisbon on 2023-04-05",
                        "category": "profile",
                        "confidence": 0.9,
                        "refers_to": "2023-04-05",
                        "messages": [0],
                    },
                    {
                        "content": "I prefer PostgreSQL for new projects",
                        "category": "preference",
                        "confidence": 0.65,
                        "refers_to": None,
                        "messages": [0],
                    },
                    {"content": "我不再喜欢爬山", "category": "preference", "confidence": 0.8},
                ]
            }
        )
    )
    messages = [{**message, "index": 4 + n} for n, message in enumerate(MESSAGES)]

    facts_extract(tenant=tenant, user_id="u1", messages=messages, reference_time=WHEN)

    facts = Fact.objects.filter(tenant=tenant).order_by("pk")
    assert [(f.content, f.category, f.confidence, f.metadata, f.source_messages) for f in facts] == [
        ("Moved to Lisbon on 2023-04-05", "profile", 0.9, {"refers_to": "2023-04-05"}, [4]),
        ("Prefers PostgreSQL for new projects", "preference", 0.65, {}, [4]),
        ("不再喜欢爬山", "preference", 0.8, {}, []),
    ]


def test_the_schema_sent_asks_for_a_date_or_null_and_integer_message_numbers(fake_openai):
    fake_openai.reply_next(json.dumps({"facts": []}))

    llm_extract(get_chat(), messages=MESSAGES, reference_time=WHEN, known_facts=[])

    [body] = chat_requests(fake_openai)
    schema = body["response_format"]["json_schema"]["schema"]
    fact = schema["$defs"]["AnsweredFact"]["properties"]
    assert fact["refers_to"]["anyOf"] == [{"format": "date", "type": "string"}, {"type": "null"}]
    assert fact["messages"]["items"] == {"type": "integer"}
    system = body["messages"][0]["content"]
    assert "refers_to" in system
    assert "Conversation time: 2023-05-05T12:00:00+00:00 (Friday)" in body["messages"][1]["content"]


LISBON = {"content": "Has lived in Lisbon since April", "category": "profile", "confidence": 0.9}  # not the rules'


@pytest.mark.parametrize(
    ("wrong", "problem"),
    [
        pytest.param({"category": "location"}, "$.facts[0].category: Input should be 'preference'", id="category"),
        pytest.param({"confidence": 1.5}, "$.facts[0].confidence: Input should be less than or equal to 1", id="1.5"),
        pytest.param({"confidence": -0.1}, "$.facts[0].confidence: Input should be greater than or equal to 0",
                     id="negative"),
        pytest.param({"confidence": "0.9"}, "$.facts[0].confidence: Input should be a valid number", id="a string"),
        pytest.param({"refers_to": "next week"}, "$.facts[0].refers_to: Value error, must be a date written YYYY-MM-DD",
                     id="next week"),
        pytest.param({"refers_to": "2023-13-45"}, "$.facts[0].refers_to: Value error, must be a date written "
                     "YYYY-MM-DD, or null; 2023-13-45 is not a day", id="2023-13-45"),
        pytest.param({"refers_to": "1683244800"}, "$.facts[0].refers_to: Value error", id="a timestamp"),
        pytest.param({"refers_to": "2023-05-05T00:00:00Z"}, "$.facts[0].refers_to: Value error", id="a time"),
        pytest.param({"messages": ["0"]}, "$.facts[0].messages[0]: Input should be a valid integer", id="'0'"),
        pytest.param({"messages": [0.0]}, "$.facts[0].messages[0]: Input should be a valid integer", id="0.0"),
        pytest.param({"messages": 0}, "$.facts[0].messages: Input should be a valid array", id="not a list"),
        pytest.param({"content": "x" * 2001}, "$.facts[0].content: Value error, must be at most 2000", id="too long"),
    ],
)  # fmt: skip
def test_an_answer_outside_the_contract_twice_falls_back_to_the_rules_naming_the_problem(
    tenant, fake_openai, wrong, problem
):
    answer = json.dumps({"facts": [{**LISBON, **wrong}]})
    fake_openai.reply_next(answer, answer)
    reasons = []

    results = extract(tenant, on_fallback=reasons.append)

    assert [r.fact.content for r in results] == offline_contents()
    assert not Fact.objects.filter(content=LISBON["content"]).exists()
    [reason] = reasons
    assert "extracted offline" in reason
    assert problem in reason
    retry = chat_requests(fake_openai)[1]["messages"][-1]["content"]
    assert problem in retry  # the second try was told what was wrong
