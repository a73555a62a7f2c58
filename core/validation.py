"""The identifiers callers choose (user, session, agent and document ids): what they may look like."""

import re
import unicodedata

from django.core.exceptions import ValidationError

# User and session ids: the caller's own ids, 1-255 characters, no spaces or control characters.
IDENTIFIER_PATTERN = re.compile(r"^[^\s\x00-\x1f]{1,255}$")
IDENTIFIER_MESSAGE = "Must be 1-255 characters without spaces or control characters."
# Document ids are often paths ("guides/setup.md") and may contain spaces.
DOC_ID_PATTERN = re.compile(r"^[^\x00-\x1f\x7f]{1,500}$")
DOC_ID_MESSAGE = "Must be 1-500 characters without control characters."


def validate_identifier(value, *, field: str) -> str:
    # fullmatch: the pattern's "$" (kept for the OpenAPI schema) would let a trailing newline through.
    if not isinstance(value, str) or not IDENTIFIER_PATTERN.fullmatch(value):
        raise ValidationError({field: IDENTIFIER_MESSAGE})
    return value


def validate_user_id(user_id) -> str:
    return validate_identifier(user_id, field="user_id")


# Categories that draw nothing: controls, format characters (zero-width space and joiners, BOM), separators,
# unassigned and private-use code points.
_INVISIBLE_CATEGORIES = frozenset({"Cc", "Cf", "Cs", "Co", "Cn", "Zs", "Zl", "Zp"})
VISIBLE_TEXT_MESSAGE = "Must contain visible characters."


def has_visible_text(text: str) -> bool:
    return any(unicodedata.category(char) not in _INVISIBLE_CATEGORIES for char in text)


def validate_visible_text(text: str) -> None:
    """For serializer fields: text of only spaces and zero-width characters says nothing."""
    if not has_visible_text(text):
        raise ValidationError(VISIBLE_TEXT_MESSAGE)
