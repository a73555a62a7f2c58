"""The chat model's JSON helper, against the local fake OpenAI-compatible server."""

import json

import pytest

from ai.chat import get_chat, schema_errors
from ai.errors import AIProviderError
from tests.fake_openai import Failure

SCHEMA = {
    "type": "object",
    "properties": {
        "facts": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {
                    "content": {"type": "string"},
                    "confidence": {"type": "number", "minimum": 0, "maximum": 1},
                },
                "required": ["content", "confidence"],
            },
        }
    },
    "required": ["facts"],
}
VALID = json.dumps({"facts": [{"content": "prefers PostgreSQL", "confidence": 0.9}]})


def ask():
    return get_chat().complete_json(
        system="Extract facts.", user="I prefer PostgreSQL.", schema=SCHEMA, schema_name="facts"
    )


def test_no_chat_provider_means_none():
    assert get_chat() is None  # CHAT_PROVIDER=none is the offline default


@pytest.mark.usefixtures("openai_settings")
class TestCompleteJson:
    def test_valid_json_is_returned_and_structured_output_requested(self, fake_openai):
        fake_openai.reply_next(VALID)

        assert ask() == json.loads(VALID)
        [request] = fake_openai.requests_to("/v1/chat/completions")
        assert request["body"]["response_format"]["type"] == "json_schema"
        assert request["body"]["response_format"]["json_schema"]["schema"] == SCHEMA

    def test_malformed_json_then_valid_json_succeeds_on_the_retry(self, fake_openai):
        fake_openai.reply_next("{not json", VALID)

        assert ask() == json.loads(VALID)
        first, second = fake_openai.requests_to("/v1/chat/completions")
        assert "invalid" in second["body"]["messages"][-1]["content"]
        assert second["body"]["messages"][-2] == {"role": "assistant", "content": "{not json"}

    def test_malformed_json_twice_is_a_clear_error(self, fake_openai):
        fake_openai.reply_next("{not json", "still not json")

        with pytest.raises(AIProviderError, match="invalid JSON twice"):
            ask()

    def test_json_that_breaks_the_schema_counts_as_invalid(self, fake_openai):
        fake_openai.reply_next(json.dumps({"facts": [{"content": "x", "confidence": 7}]}), VALID)

        assert ask() == json.loads(VALID)
        assert (
            "$.facts[0].confidence should be <= 1"
            in fake_openai.requests_to("/v1/chat/completions")[1]["body"]["messages"][-1]["content"]
        )

    def test_endpoint_without_structured_output_falls_back_to_json_mode(self, fake_openai):
        fake_openai.fail_next(Failure(400))
        fake_openai.reply_next(VALID, VALID)

        assert ask() == json.loads(VALID)
        assert ask() == json.loads(VALID)
        formats = [r["body"]["response_format"]["type"] for r in fake_openai.requests_to("/v1/chat/completions")]
        assert formats == ["json_schema", "json_object", "json_object"]

    def test_server_errors_are_retried_then_reported(self, fake_openai):
        fake_openai.fail_next(*[Failure(500)] * 3)

        with pytest.raises(AIProviderError, match="answered 500 after 2 retries"):
            ask()


def test_schema_errors_name_the_path():
    assert schema_errors({"facts": [{"content": 3}]}, SCHEMA) == [
        "$.facts[0].confidence is required",
        "$.facts[0].content should be string",
    ]
    assert schema_errors({"facts": []}, SCHEMA) == []
    assert schema_errors({"facts": [{"content": "x", "confidence": True}]}, SCHEMA) == [
        "$.facts[0].confidence should be number"
    ]
