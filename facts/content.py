"""What the text of a fact may be, and when two texts say the same words."""

from django.conf import settings
from django.core.exceptions import ValidationError

from core.instructions import instruction_signal
from core.validation import VISIBLE_TEXT_MESSAGE, has_visible_text

INSTRUCTION_LIKE = "instruction-like"


def clean_content(content: str) -> str:
    if content is not None and not isinstance(content, str):
        raise ValidationError({"content": "Must be text."})
    content = " ".join((content or "").split())
    if not content:
        raise ValidationError({"content": "Must not be empty."})
    if not has_visible_text(content):
        raise ValidationError({"content": VISIBLE_TEXT_MESSAGE})
    if len(content) > settings.FACTS_MAX_CONTENT_CHARS:
        raise ValidationError({"content": f"Must be at most {settings.FACTS_MAX_CONTENT_CHARS} characters."})
    return content


def hold_reason(content: str) -> str:
    """Why a fact with this text must wait for a person whatever its source and confidence ("" when nothing holds
    it): text that reads as instructions to an assistant, which a prompt would otherwise obey."""
    signal = instruction_signal(content)
    return f"{INSTRUCTION_LIKE}: {signal}" if signal else ""


def normalised(content: str) -> str:
    """What counts as "the same words": case, spacing and trailing punctuation aside."""
    return " ".join(content.lower().split()).rstrip(".!。！ ")
