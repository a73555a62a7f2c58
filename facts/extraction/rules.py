"""Offline extraction of explicit statements from a conversation: "I prefer…", "my name is…", "我住在…".

Pure functions: no database, no model, no network. Only the user's messages are mined. Each is cut into sentences
(fenced code, code-like lines, questions, small talk and anything secret left out), each sentence into clauses
("I live in Berlin and I work at Google" holds two), and every clause that opens with a known statement pattern
becomes one fact: an atomic statement without its leading "I"/"我" ("Prefers dark mode", "喜欢用 Vim"), with
relative dates made absolute from `reference_time` ("next Friday" -> "on 2023-05-12", "下周五" -> "2023-05-12").
"""

import re
from dataclasses import replace
from datetime import date, datetime

from .candidate import ExtractedFact
from .chinese import CHINESE_STATEMENTS
from .dates import ZH_DAY_WORD, day_referred_to, names_a_day, resolve_dates
from .english import ENGLISH_STATEMENTS
from .filters import (
    DO_NOT_REMEMBER,
    HEDGE,
    HEDGE_PREFIX,
    SMALL_TALK_PREFIX,
    TRAILING_SMALL_TALK,
    VAGUE_OBJECT,
    clauses,
    user_texts,
)
from .patterns import en, third_person
from .statements import KEEP_SCORE, UNNAMED_REFERENCE, later_first_person, self_statement

# English is tried first: a Chinese pattern never matches English text, and the reverse is rare.
STATEMENTS = (*ENGLISH_STATEMENTS, *CHINESE_STATEMENTS)
HEDGED_CONFIDENCE = 0.5
UNNAMED_REFERENCE_CONFIDENCE = 0.6


# "remember that X" keeps X, as its own statement when it is one, else as said.
_REMEMBER_THAT = re.compile(
    r"^(?:please\s+)?(?:also\s+)?(?:remember|note|keep in mind|don't forget|do not forget)"
    r"(?:\s+(?:that|this)\s*:?\s*|\s*:\s*)"
    r"(?P<rest>.+)"
    r"|^(?:请|麻烦)?(?:你)?(?:记住|记得|记一下)[,:，：]?\s*(?P<zh_rest>.+)",
    re.IGNORECASE,
)


REMEMBER_CONFIDENCE = 0.95
_FIRST_PERSON = (
    (en(r"^i(?:'m|\s+am)\s+"), "is "),
    (en(r"^i(?:'ve|\s+have)\s+"), "has "),
    (en(r"^(?:my|our)\s+"), ""),
    (re.compile("^(?:我的|我们的)"), ""),
    (re.compile("^我(?!们)"), ""),
)


_FIRST_PERSON_VERB = en(r"^i\s+(?P<verb>[a-z]+)\b")
_ZH_SUBJECT_THEN_DAY = re.compile(f"^(我们|我)({ZH_DAY_WORD})[，,]?")  # "我们昨天决定…" reads as "昨天我们决定…"


# "Yesterday we switched to Rust", "昨天我们决定…": the day goes after (English) or stays before (Chinese) the fact.
_LEADING_DAY = re.compile(
    r"^(?P<en>today|tonight|tomorrow|yesterday|(?:next|last|this)\s+(?:week|monday|tuesday|wednesday|thursday|friday"
    r"|saturday|sunday))\s*,?\s+"
    rf"|^(?P<zh>{ZH_DAY_WORD})[，,]?\s*",
    re.IGNORECASE,
)


def extract_by_rules(messages: list[dict], *, reference_time: datetime) -> list[ExtractedFact]:
    """Explicit statements the user made in `messages`, in the order said, each once."""
    today = reference_time.date()
    facts: dict[str, ExtractedFact] = {}
    for position, text in user_texts(messages):
        if DO_NOT_REMEMBER.search(text):
            continue
        for clause in clauses(text):
            fact = _extract_clause(clause, today)
            if fact is None:
                continue
            said = facts.setdefault(fact.content.casefold(), replace(fact, messages=(position,)))
            if position not in said.messages:  # said again later: both messages are its provenance
                facts[fact.content.casefold()] = replace(said, messages=(*said.messages, position))
    return list(facts.values())


def _extract_clause(clause: str, today: date) -> ExtractedFact | None:
    hedged = bool(HEDGE.search(clause))
    clause = HEDGE_PREFIX.sub("", SMALL_TALK_PREFIX.sub("", clause)).strip()
    clause = TRAILING_SMALL_TALK.sub("", clause)
    clause = _ZH_SUBJECT_THEN_DAY.sub(r"\2\1", clause)
    leading_day = _LEADING_DAY.match(clause)
    if leading_day:
        clause = clause[leading_day.end() :]
    if not clause:
        return None
    remembered = _REMEMBER_THAT.match(clause)
    if remembered:
        inner = remembered["rest"] or remembered["zh_rest"]
        statement = _match_statement(inner)
        content, category = (statement[0], statement[1]) if statement else (_without_first_person(inner), "other")
        confidence = REMEMBER_CONFIDENCE
    else:
        statement = _match_statement(clause, dated=leading_day is not None) or _self_statement(clause)
        if statement is None:
            return None
        content, category, confidence = statement
    if hedged:
        confidence = min(confidence, HEDGED_CONFIDENCE)
    if leading_day:
        content = f"{leading_day['zh']}{content}" if leading_day["zh"] else f"{content} {leading_day['en']}"
    refers_to = day_referred_to(content, today)
    content = _tidy(resolve_dates(content, today))
    return ExtractedFact(content, category, confidence, refers_to=refers_to) if content else None


def _match_statement(clause: str, *, dated: bool = False) -> tuple[str, str, float] | None:
    """(content, category, confidence) of the first statement pattern the clause opens with."""
    clause = TRAILING_SMALL_TALK.sub("", clause.strip())
    for pattern in STATEMENTS:
        match = pattern.regex.match(clause)
        if match is None or (pattern.needs_date and not (dated or names_a_day(clause))):
            continue
        rest = match.groupdict().get("rest")
        if rest is not None and VAGUE_OBJECT.match(TRAILING_SMALL_TALK.sub("", rest)):
            return None
        category = pattern.category if isinstance(pattern.category, str) else pattern.category(match)
        content = pattern.build(match)
        # "Loves how uncomplicated it is": true, but of what? (bench/extraction.py: such facts are near less often)
        unnamed = UNNAMED_REFERENCE.search(content)
        return (
            content,
            category,
            min(pattern.confidence, UNNAMED_REFERENCE_CONFIDENCE) if unnamed else pattern.confidence,
        )
    return None


def _self_statement(clause: str) -> tuple[str, str, float] | None:
    said = self_statement(clause)
    if said is None or said.score < KEEP_SCORE:
        return None
    return said.content, said.category, said.confidence


def _without_first_person(text: str) -> str:
    """ "I have a meeting on Mondays" -> "has a meeting on Mondays"; "我对花生过敏" -> "对花生过敏"."""
    verb = _FIRST_PERSON_VERB.match(text)
    if verb and verb["verb"].lower() not in ("am", "have"):
        return third_person(verb["verb"]) + text[verb.end() :]
    for pattern, replacement in _FIRST_PERSON:
        if pattern.match(text):
            return pattern.sub(replacement, text, count=1)
    return text


def _tidy(content: str) -> str:
    content = later_first_person(" ".join(TRAILING_SMALL_TALK.sub("", content).split()))
    return content[:1].upper() + content[1:] if content[:1].isascii() else content
