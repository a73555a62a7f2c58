"""What callers choose may look like: identifiers (user, session, agent and document ids), text, metadata."""

import json
import re
import unicodedata

from django.conf import settings
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


def validate_metadata(value, *, field: str = "metadata") -> dict:
    """A caller's metadata object within METADATA_MAX_BYTES (as compact JSON), METADATA_MAX_KEYS (keys at every
    level) and METADATA_MAX_DEPTH (levels of nested objects and lists); ValidationError names the limit broken and
    its setting. None is an empty object."""
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise ValidationError({field: "Must be an object."})
    keys, depth = _keys_and_depth(value)
    if depth > settings.METADATA_MAX_DEPTH:
        raise ValidationError(
            {field: f"Nested {depth} levels deep; the limit is {settings.METADATA_MAX_DEPTH} (METADATA_MAX_DEPTH)."}
        )
    if keys > settings.METADATA_MAX_KEYS:
        raise ValidationError({field: f"{keys:,} keys; the limit is {settings.METADATA_MAX_KEYS} (METADATA_MAX_KEYS)."})
    size = len(json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode())
    if size > settings.METADATA_MAX_BYTES:
        raise ValidationError(
            {field: f"{size:,} bytes as JSON; the limit is {settings.METADATA_MAX_BYTES:,} (METADATA_MAX_BYTES)."}
        )
    return value


def metadata_within_limits(value: dict) -> bool:
    try:
        validate_metadata(value)
    except ValidationError:
        return False
    return True


def _keys_and_depth(value) -> tuple[int, int]:
    """Keys of every object inside `value`, and how many levels of objects and lists it nests (iteratively: a
    hostile value could be deep enough to exhaust recursion)."""
    keys, deepest = 0, 0
    stack = [(value, 1)]
    while stack:
        item, level = stack.pop()
        if isinstance(item, dict):
            keys += len(item)
            deepest = max(deepest, level)
            stack.extend((child, level + 1) for child in item.values())
        elif isinstance(item, list):
            deepest = max(deepest, level)
            stack.extend((child, level + 1) for child in item)
    return keys, deepest
