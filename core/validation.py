"""The identifiers callers choose (user, session, agent and document ids): what they may look like."""

import re

from django.core.exceptions import ValidationError

# User and session ids: the caller's own ids, 1-255 characters, no spaces or control characters.
IDENTIFIER_PATTERN = re.compile(r"^[^\s\x00-\x1f]{1,255}$")
IDENTIFIER_MESSAGE = "Must be 1-255 characters without spaces or control characters."
# Document ids are often paths ("guides/setup.md") and may contain spaces.
DOC_ID_PATTERN = re.compile(r"^[^\x00-\x1f\x7f]{1,500}$")
DOC_ID_MESSAGE = "Must be 1-500 characters without control characters."


def validate_identifier(value, *, field: str) -> str:
    if not isinstance(value, str) or not IDENTIFIER_PATTERN.match(value):
        raise ValidationError({field: IDENTIFIER_MESSAGE})
    return value


def validate_user_id(user_id) -> str:
    return validate_identifier(user_id, field="user_id")
