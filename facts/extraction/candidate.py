"""What extraction produces: a candidate fact, before fact_remember judges it against what is known."""

from dataclasses import dataclass, field
from datetime import date


@dataclass(frozen=True)
class ExtractedFact:
    content: str  # "Prefers dark mode", "Lives in Berlin", "喜欢用 Vim", "决定2023-05-12发布"
    category: str  # a Fact.Category value
    confidence: float  # 0..1
    # Positions, in the messages given, of those it was said in: provenance, not part of what the fact is.
    messages: tuple[int, ...] = field(default=(), compare=False)
    # The day it refers to, where the text names one ("last week" resolved against the message time).
    refers_to: date | None = field(default=None, compare=False)
