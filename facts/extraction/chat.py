"""What the chat model is asked to extract from a conversation, and how its answer becomes candidate facts: the same
output contract as the offline extractor (one short subject-less fact per statement, a category, a confidence, the
day it refers to, the messages it was said in). An answer outside the contract is refused (ai.chat retries once)."""

import re
from datetime import date, datetime
from typing import ClassVar

from django.conf import settings
from pydantic import BaseModel, Field, StrictInt, field_validator

from ai.chat import ChatAnswer, OpenAIChat
from core.validation import has_visible_text

from ..models import Fact
from .candidate import ExtractedFact
from .subject import subjectless

_ISO_DAY = re.compile(r"\d{4}-\d{2}-\d{2}")


class AnsweredFact(BaseModel):
    content: str
    category: Fact.Category
    confidence: float = Field(strict=True, ge=0, le=1)  # strict: no "0.9", no true
    # The day it refers to: a calendar date written YYYY-MM-DD, or null (no "next week", no "2023-13-45").
    refers_to: date | None = Field(default=None, strict=True)
    messages: list[StrictInt] = Field(default_factory=list)  # the numbers of the messages it was said in

    @field_validator("content")
    @classmethod
    def _storable(cls, content: str) -> str:
        if "\x00" in content:
            raise ValueError("must not contain NUL characters")
        if len(" ".join(content.split())) > settings.FACTS_MAX_CONTENT_CHARS:
            raise ValueError(f"must be at most {settings.FACTS_MAX_CONTENT_CHARS} characters")
        return content

    @field_validator("refers_to", mode="before")
    @classmethod
    def _a_day(cls, value) -> date | None:
        # Parsed here: pydantic alone would take a timestamp in a string ("1683244800") for a date.
        if value is None:
            return None
        if not (isinstance(value, str) and _ISO_DAY.fullmatch(value)):
            raise ValueError("must be a date written YYYY-MM-DD, or null")
        try:
            return date.fromisoformat(value)
        except ValueError:
            raise ValueError(f"must be a date written YYYY-MM-DD, or null; {value} is not a day") from None


class ExtractedFacts(ChatAnswer):
    schema_name: ClassVar[str] = "extracted_facts"

    facts: list[AnsweredFact]


EXTRACT_SYSTEM = """You extract long-term memory about the USER from a conversation between the user and an
assistant: the durable statements the user makes about themselves, their work, plans, relationships, events and
preferences, each one stays useful in future conversations.
Write one fact per statement: short, in the third person and WITHOUT a subject, no "I", "the user" or the user's
name, no filler ("Is allergic to shellfish", "Lives in Valencia", "Prefers PostgreSQL for JSONB support",
"不再喜欢爬山"), in the language the user used.
Extract: preferences, profile (location, role, employer, health, family), relationships, events and plans,
projects and their technical choices, decisions, constraints, and procedures the user wants followed.
Do not extract: small talk, questions, one-off requests, code, what the assistant said unless the user confirmed
it, anything the user asked to keep secret or not to remember, facts already known (listed below). Statements about
other people as such are not facts of the user ("My sister lives in Paris" is not "Lives in Paris"); keep only what
they say about the user ("Has a sister in Paris").
refers_to is the day the fact refers to when the conversation says one, as YYYY-MM-DD: resolve relative dates
("yesterday", "last week", "next Friday") against the conversation time given, and write the absolute date in the
fact too if it matters ("Moved to Lisbon on 2023-05-01"); null when no day is said.
category is one of preference, profile, project, decision, procedure, other.
confidence (0..1) is calibrated: about 0.9 for a plain, lasting statement ("I live in Valencia"), 0.6-0.8 for one
that is hedged, passing or inferred, below 0.5 when unsure it is about the user at all.
messages lists the numbers ([n]) of the messages it was said in (integers).
Return {"facts": []} when there is nothing."""


def llm_extract(
    chat: OpenAIChat, *, messages: list[dict], reference_time: datetime, known_facts: list[str]
) -> list[ExtractedFact]:
    transcript = "\n".join(f"[{n}] {message['role']}: {message['content']}" for n, message in enumerate(messages))
    known = "\n".join(f"- {content}" for content in known_facts) or "(none)"
    answer = chat.complete_json(
        system=EXTRACT_SYSTEM,
        user=(
            f"Conversation time: {reference_time.isoformat()} ({reference_time:%A})\n\n"
            f"Facts already known about the user:\n{known}\n\nConversation:\n{transcript}"
        ),
        answer=ExtractedFacts,
    )
    return [
        ExtractedFact(
            content=subjectless(item.content),
            category=item.category.value,
            confidence=item.confidence,
            messages=tuple(n for n in dict.fromkeys(item.messages) if 0 <= n < len(messages)),
            refers_to=item.refers_to,
        )
        for item in answer.facts
        if has_visible_text(item.content)
    ]
