"""Chat models that answer with JSON validated by a pydantic model; CHAT_PROVIDER=none means callers use their
rules."""

import functools
import json
import logging
from dataclasses import dataclass
from typing import ClassVar, TypeVar

from django.conf import settings
from pydantic import BaseModel, ValidationError

from .errors import AIProviderError
from .openai_calls import call_openai
from .services import CHAT, provider_failed, provider_succeeded

logger = logging.getLogger(__name__)


class ChatAnswer(BaseModel):
    """What a chat call answers: a pydantic model, defined beside its prompt. Its JSON schema (model_json_schema:
    nested models and enums come as $defs + $ref, which structured output accepts) is shown in the prompt and sent
    as the response_format schema, under `schema_name`, a stable name of our own rather than the class name.
    The schema is not `strict`: that needs additionalProperties: false on every object and not every
    OpenAI-compatible server knows it; the answer is validated here anyway.

    Unknown keys are ignored, as before. Declare numbers with Field(strict=True): in lax mode pydantic takes "0.9"
    or true for a number."""

    schema_name: ClassVar[str]  # ^[a-zA-Z0-9_-]{1,64}$, as OpenAI wants it


Answer = TypeVar("Answer", bound=ChatAnswer)


@dataclass(frozen=True)
class ChatConfig:
    provider: str
    model: str
    response_format: str
    api_key: str
    base_url: str | None
    timeout: float
    max_retries: int

    @classmethod
    def from_settings(cls) -> "ChatConfig":
        return cls(
            provider=settings.CHAT_PROVIDER,
            model=settings.CHAT_MODEL,
            response_format=settings.CHAT_RESPONSE_FORMAT,
            api_key=settings.OPENAI_API_KEY,
            base_url=settings.OPENAI_BASE_URL,
            timeout=settings.OPENAI_TIMEOUT,
            max_retries=settings.OPENAI_MAX_RETRIES,
        )


def get_chat() -> "OpenAIChat | None":
    """The configured chat model, or None when CHAT_PROVIDER=none (callers then use rule-based code)."""
    return _build_chat(ChatConfig.from_settings())


@functools.lru_cache(maxsize=8)
def _build_chat(config: ChatConfig) -> "OpenAIChat | None":
    if config.provider == "none":
        return None
    if config.provider == "openai":
        return OpenAIChat(config)
    raise AIProviderError(f"Unknown CHAT_PROVIDER {config.provider!r}: use openai or none.", code="configuration_error")


class OpenAIChat:
    """An OpenAI-compatible chat-completions endpoint asked for one JSON object per call."""

    def __init__(self, config: ChatConfig):
        import openai

        self.model = config.model
        self.response_format = config.response_format
        self.client = openai.OpenAI(
            api_key=config.api_key or "not-needed",
            base_url=config.base_url,
            timeout=config.timeout,
            max_retries=config.max_retries,
        )

    def complete_json(self, *, system: str, user: str, answer: type[Answer]) -> Answer:
        """Ask for a JSON object matching the `answer` model and return it validated; one more try when the
        answer is not JSON or does not validate (the retry names the problems), then a clear error."""
        try:
            result = self._complete_json(system=system, user=user, answer=answer)
        except AIProviderError as exc:
            provider_failed(CHAT, exc.message)
            raise
        provider_succeeded(CHAT)
        return result

    def _complete_json(self, *, system: str, user: str, answer: type[Answer]) -> Answer:
        schema = answer.model_json_schema()
        messages = [
            # JSON mode needs the word "JSON" in the prompt, and weaker models need the schema spelled out.
            {
                "role": "system",
                "content": f"{system}\n\nAnswer with one JSON object matching this JSON schema:\n{json.dumps(schema)}",
            },
            {"role": "user", "content": user},
        ]
        problem = ""
        for attempt in range(2):
            content = self._complete(messages, schema, answer.schema_name)
            try:
                return answer.model_validate_json(content)
            except ValidationError as exc:
                problem = "; ".join(answer_problems(exc)[:5])
            logger.warning("chat model answered invalid JSON (attempt %d): %s", attempt + 1, problem)
            messages = [
                *messages,
                {"role": "assistant", "content": content},
                {
                    "role": "user",
                    "content": f"That answer was invalid: {problem}. Answer again with only the JSON "
                    "object, matching the schema exactly.",
                },
            ]
        raise AIProviderError(f"The chat model {self.model} returned invalid JSON twice: {problem}")

    def _complete(self, messages: list[dict], schema: dict, schema_name: str) -> str:
        if self.response_format == "json_schema":
            response_format = {"type": "json_schema", "json_schema": {"name": schema_name, "schema": schema}}
            try:
                return self._create(messages, response_format)
            except AIProviderError as exc:
                if exc.upstream_status != 400:
                    raise
                # The endpoint does not do structured output: JSON mode from now on.
                logger.info("chat endpoint refused json_schema (%s); falling back to JSON mode", exc.message)
                self.response_format = "json_object"
        return self._create(messages, {"type": "json_object"})

    def _create(self, messages: list[dict], response_format: dict) -> str:
        response = call_openai(
            "chat",
            self.client,
            lambda: self.client.chat.completions.create(
                model=self.model, messages=messages, response_format=response_format, temperature=0
            ),
        )
        return (response.choices[0].message.content or "") if response.choices else ""


def answer_problems(error: ValidationError) -> list[str]:
    """The problems pydantic found, each naming its path: "$.facts[0].confidence: Input should be less than or
    equal to 1", "$: Invalid JSON: EOF while parsing a value at line 1 column 0"."""
    problems = []
    for item in error.errors(include_url=False):
        path = "$" + "".join(f"[{part}]" if isinstance(part, int) else f".{part}" for part in item["loc"])
        problems.append(f"{path}: {item['msg']}")
    return problems
