"""What the text of a fact may be, and when two texts say the same words."""

from django.conf import settings
from django.core.exceptions import ValidationError


def clean_content(content: str) -> str:
    content = " ".join(str(content or "").split())
    if not content:
        raise ValidationError({"content": "Must not be empty."})
    if len(content) > settings.FACTS_MAX_CONTENT_CHARS:
        raise ValidationError({"content": f"Must be at most {settings.FACTS_MAX_CONTENT_CHARS} characters."})
    return content


def normalised(content: str) -> str:
    """What counts as "the same words": case, spacing and trailing punctuation aside."""
    return " ".join(content.lower().split()).rstrip(".!。！ ")
