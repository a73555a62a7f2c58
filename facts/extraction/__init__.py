"""Candidate facts from a conversation: by the chat model when one is configured (chat), else by rules (offline)."""

from .candidate import ExtractedFact
from .chat import llm_extract
from .rules import extract_by_rules

__all__ = ["ExtractedFact", "extract_by_rules", "llm_extract"]
