"""Chat models that answer with JSON matching a schema; CHAT_PROVIDER=none means callers use their rules."""

import functools
import json
import logging
from dataclasses import dataclass

from django.conf import settings

from .errors import AIProviderError
from .openai_calls import call_openai

logger = logging.getLogger(__name__)


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

    def complete_json(self, *, system: str, user: str, schema: dict, schema_name: str) -> dict:
        """Ask for a JSON object matching `schema`; one more try on invalid JSON, then a clear error."""
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
            content = self._complete(messages, schema, schema_name)
            try:
                value = json.loads(content)
            except ValueError as exc:
                problem = f"not JSON ({exc})"
            else:
                errors = schema_errors(value, schema)
                if not errors:
                    return value
                problem = "; ".join(errors[:5])
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


_JSON_TYPES = {
    "object": dict,
    "array": list,
    "string": str,
    "number": (int, float),
    "integer": int,
    "boolean": bool,
    "null": type(None),
}


def schema_errors(value, schema: dict, path: str = "$") -> list[str]:
    """Check `value` against the JSON-schema subset our prompts use: type, enum, required, properties, items,
    minimum/maximum. Returns the problems found, each naming its path."""
    expected = schema.get("type")
    if expected:
        types = expected if isinstance(expected, list) else [expected]
        python_types = tuple(t for name in types for t in _as_tuple(_JSON_TYPES[name]))
        is_bool = isinstance(value, bool)
        if not isinstance(value, python_types) or (is_bool and "boolean" not in types):
            return [f"{path} should be {' or '.join(types)}"]
    if "enum" in schema and value not in schema["enum"]:
        return [f"{path} should be one of {schema['enum']}"]
    errors = []
    if isinstance(value, dict):
        errors += [f"{path}.{name} is required" for name in schema.get("required", []) if name not in value]
        for name, subschema in schema.get("properties", {}).items():
            if name in value:
                errors += schema_errors(value[name], subschema, f"{path}.{name}")
    if isinstance(value, list) and "items" in schema:
        for index, item in enumerate(value):
            errors += schema_errors(item, schema["items"], f"{path}[{index}]")
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        if "minimum" in schema and value < schema["minimum"]:
            errors.append(f"{path} should be >= {schema['minimum']}")
        if "maximum" in schema and value > schema["maximum"]:
            errors.append(f"{path} should be <= {schema['maximum']}")
    return errors


def _as_tuple(value) -> tuple:
    return value if isinstance(value, tuple) else (value,)
