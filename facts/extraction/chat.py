"""What the chat model is asked to extract from a conversation, and how its answer becomes candidate facts."""

from datetime import datetime
from typing import ClassVar

from pydantic import BaseModel, Field

from ai.chat import ChatAnswer, OpenAIChat

from ..models import Fact
from .candidate import ExtractedFact


class AnsweredFact(BaseModel):
    content: str
    category: Fact.Category
    confidence: float = Field(strict=True, ge=0, le=1)  # strict: no "0.9", no true
    messages: list[int] = Field(default_factory=list)  # the numbers of the messages it was said in


class ExtractedFacts(ChatAnswer):
    schema_name: ClassVar[str] = "extracted_facts"

    facts: list[AnsweredFact]


EXTRACT_SYSTEM = """You extract long-term memory about the USER from a conversation between the user and an
assistant. Return atomic facts, each one short statement that stays useful in future conversations.
Extract: preferences, profile (name, location, role, employer), projects and their technical choices, decisions,
constraints, and procedures the user wants followed.
Do not extract: small talk, one-off questions or requests, code, what the assistant said unless the user
confirmed it, anything the user asked to keep secret or not to remember, facts already known (listed below).
Write each fact without "I"/"the user" at the start (e.g. "Prefers PostgreSQL for JSONB support"), in the
language the user used. Resolve relative dates ("yesterday", "next Friday") to absolute dates (YYYY-MM-DD)
using the conversation time given. category is one of preference, profile, project, decision, procedure, other;
confidence (0..1) is how explicit and lasting the statement is; messages lists the numbers ([n]) of the messages it
was said in. Return {"facts": []} when there is nothing."""


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
            content=item.content.strip(),
            category=item.category.value,
            confidence=item.confidence,
            messages=tuple(n for n in dict.fromkeys(item.messages) if 0 <= n < len(messages)),
        )
        for item in answer.facts
        if item.content.strip()
    ]
