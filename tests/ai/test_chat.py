"""The chat model's JSON helper, against the local fake OpenAI-compatible server."""

import json
from typing import ClassVar

import pytest
from pydantic import BaseModel, Field, ValidationError

from ai.chat import ChatAnswer, answer_problems, get_chat
from ai.errors import AIProviderError
from tests.fake_openai import Failure


class Item(BaseModel):
    content: str
    confidence: float = Field(strict=True, ge=0, le=1)


class Facts(ChatAnswer):
    schema_name: ClassVar[str] = "test_facts"

    facts: list[Item]


VALID = json.dumps({"facts": [{"content": "prefers PostgreSQL", "confidence": 0.9}]})
EXPECTED = Facts(facts=[Item(content="prefers PostgreSQL", confidence=0.9)])


def ask() -> Facts:
    return get_chat().complete_json(system="Extract facts.", user="I prefer PostgreSQL.", answer=Facts)


def test_no_chat_provider_means_none():
    assert get_chat() is None  # CHAT_PROVIDER=none is the offline default


@pytest.mark.usefixtures("openai_settings")
class TestCompleteJson:
    def test_valid_json_is_returned_as_the_model_and_structured_output_requested(self, fake_openai):
        fake_openai.reply_next(VALID)

        answer = ask()

        assert isinstance(answer, Facts)
        assert answer == EXPECTED
        [request] = fake_openai.requests_to("/v1/chat/completions")
        schema = Facts.model_json_schema()
        assert request["body"]["response_format"] == {
            "type": "json_schema",
            "json_schema": {"name": "test_facts", "schema": schema},
        }
        assert json.dumps(schema) in request["body"]["messages"][0]["content"]  # spelled out for JSON mode too

    def test_the_generated_schema_resolves_nested_models_and_keeps_the_constraints(self, fake_openai):
        fake_openai.reply_next(VALID)

        ask()

        schema = fake_openai.requests_to("/v1/chat/completions")[0]["body"]["response_format"]["json_schema"]["schema"]
        assert (schema["type"], schema["required"]) == ("object", ["facts"])
        ref = schema["properties"]["facts"]["items"]["$ref"]
        assert ref.startswith("#/$defs/")
        item = schema["$defs"][ref.removeprefix("#/$defs/")]
        assert item["required"] == ["content", "confidence"]
        assert item["properties"]["confidence"] == {"type": "number", "minimum": 0, "maximum": 1, "title": "Confidence"}
        assert "strict" not in fake_openai.requests_to("/v1/chat/completions")[0]["body"]["response_format"]

    def test_malformed_json_then_valid_json_succeeds_on_the_retry(self, fake_openai):
        fake_openai.reply_next("{not json", VALID)

        assert ask() == EXPECTED
        first, second = fake_openai.requests_to("/v1/chat/completions")
        assert second["body"]["messages"][-1]["content"].startswith("That answer was invalid: $: Invalid JSON")
        assert second["body"]["messages"][-2] == {"role": "assistant", "content": "{not json"}

    def test_malformed_json_twice_is_a_clear_error(self, fake_openai):
        fake_openai.reply_next("{not json", "still not json")

        with pytest.raises(AIProviderError, match="invalid JSON twice: \\$: Invalid JSON"):
            ask()

    def test_json_that_breaks_the_model_is_retried_naming_the_problem(self, fake_openai):
        fake_openai.reply_next(json.dumps({"facts": [{"content": "x", "confidence": 7}]}), VALID)

        assert ask() == EXPECTED
        retry = fake_openai.requests_to("/v1/chat/completions")[1]["body"]["messages"][-1]["content"]
        assert "$.facts[0].confidence: Input should be less than or equal to 1" in retry

    def test_json_that_breaks_the_model_twice_is_an_error_naming_the_path(self, fake_openai):
        fake_openai.reply_next(
            json.dumps({"facts": [{"content": "x", "confidence": 7}]}),
            json.dumps({"facts": [{"content": "x", "confidence": "0.9"}]}),
        )

        with pytest.raises(AIProviderError, match="invalid JSON twice") as raised:
            ask()
        assert "$.facts[0].confidence: Input should be a valid number" in raised.value.message

    def test_endpoint_without_structured_output_falls_back_to_json_mode(self, fake_openai):
        fake_openai.fail_next(Failure(400))
        fake_openai.reply_next(VALID, VALID)

        assert ask() == EXPECTED
        assert ask() == EXPECTED
        formats = [r["body"]["response_format"]["type"] for r in fake_openai.requests_to("/v1/chat/completions")]
        assert formats == ["json_schema", "json_object", "json_object"]

    def test_server_errors_are_retried_then_reported(self, fake_openai):
        fake_openai.fail_next(*[Failure(500)] * 3)

        with pytest.raises(AIProviderError, match="answered 500 after 2 retries"):
            ask()


def problems(raw) -> list[str]:
    with pytest.raises(ValidationError) as raised:
        Facts.model_validate_json(json.dumps(raw) if not isinstance(raw, str) else raw)
    return answer_problems(raised.value)


def test_problems_name_the_path():
    assert problems({"facts": [{"content": 3}]}) == [
        "$.facts[0].content: Input should be a valid string",
        "$.facts[0].confidence: Field required",
    ]
    assert problems({"facts": [{"content": "x", "confidence": 0.5}, {"content": "y", "confidence": -1}]}) == [
        "$.facts[1].confidence: Input should be greater than or equal to 0"
    ]
    assert problems([]) == ["$: Input should be an object"]
    assert problems({}) == ["$.facts: Field required"]
    assert problems("") == ["$: Invalid JSON: EOF while parsing a value at line 1 column 0"]


@pytest.mark.parametrize("confidence", [True, "0.9", None, [0.9]])
def test_a_strict_number_refuses_what_is_not_a_json_number(confidence):
    assert problems({"facts": [{"content": "x", "confidence": confidence}]}) == [
        "$.facts[0].confidence: Input should be a valid number"
    ]


def test_integers_count_as_numbers_and_unknown_keys_are_ignored():
    answer = Facts.model_validate_json(json.dumps({"facts": [{"content": "x", "confidence": 1, "why": "?"}], "n": 1}))

    assert answer == Facts(facts=[Item(content="x", confidence=1.0)])
