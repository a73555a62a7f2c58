"""What a stored message is: posted messages checked and cleaned, their times, what the user said."""

from datetime import datetime

from django.conf import settings
from django.core.exceptions import ValidationError

from core.errors import ApplicationError
from core.timestamps import parse_timestamp, timestamp_text

from .models import EpisodeMessage

ROLES = tuple(EpisodeMessage.Role.values)


def too_large(message: str, field: str) -> ApplicationError:
    return ApplicationError(message, code="payload_too_large", status_code=413, details={field: [message]})


def clean_messages(messages, *, per_request_limit: bool = True) -> list[dict]:
    """Posted messages as stored: {"role", "content", "timestamp" (ISO 8601 in UTC, or None)}. An import, which
    brings whole sessions, passes per_request_limit=False (EPISODES_MAX_MESSAGES_PER_REQUEST bounds one post).

    Raises ValidationError (400) naming the message index, or ApplicationError 413 over a size limit."""
    if not isinstance(messages, list) or not messages:
        raise ValidationError({"messages": "Must be a non-empty list of messages."})
    limit = settings.EPISODES_MAX_MESSAGES_PER_REQUEST
    if per_request_limit and len(messages) > limit:
        raise too_large(
            f"Too many messages in one request: {len(messages)}, at most {limit} "
            "(EPISODES_MAX_MESSAGES_PER_REQUEST). Post the session in parts: stored messages are skipped.",
            "messages",
        )
    cleaned = []
    for index, message in enumerate(messages):
        field = f"messages[{index}]"
        if not isinstance(message, dict):
            raise ValidationError({field: "Must be an object with role and content."})
        if message.get("role") not in ROLES:
            raise ValidationError({f"{field}.role": f"Must be one of {', '.join(ROLES)}."})
        content = message.get("content")
        if not isinstance(content, str) or not content.strip():
            raise ValidationError({f"{field}.content": "Must be a non-empty string."})
        if len(content) > settings.EPISODES_MAX_MESSAGE_CHARS:
            raise too_large(
                f"{field}.content has {len(content)} characters, at most {settings.EPISODES_MAX_MESSAGE_CHARS} "
                "(EPISODES_MAX_MESSAGE_CHARS).",
                f"{field}.content",
            )
        timestamp = parse_timestamp(message.get("timestamp"), field=f"{field}.timestamp")
        cleaned.append(
            {"role": message["role"], "content": content, "timestamp": timestamp and timestamp_text(timestamp)}
        )
    return cleaned


def time_of(message: dict) -> datetime | None:
    return parse_timestamp(message.get("timestamp"), field="timestamp")


def user_chars(messages: list[dict]) -> int:
    return sum(len(message["content"].strip()) for message in messages if message["role"] == "user")
