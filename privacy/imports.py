"""Import of memories: this service's own export (privacy.exports) or Mem0's memories, as JSON Lines or as one JSON
document. docs/export-import.md describes the formats and what is created, merged or skipped.

Two steps, so that nothing of a bad file is written: import_read parses and checks the whole file, naming every
problem by its line, and writes nothing; user_import then embeds one user's part (outside any transaction) and writes
it in one transaction: all or nothing per user."""

import logging
import re
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime

from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import transaction
from django.utils import timezone
from rest_framework.utils import json  # refuses NaN and Infinity

from ai.errors import AIProviderError
from ai.services import active_embedding_model, embed_texts
from core.errors import ApplicationError
from core.locks import LockNamespace, xact_lock
from core.parsers import json_problem_check
from core.timestamps import parse_timestamp
from core.validation import IDENTIFIER_MESSAGE, IDENTIFIER_PATTERN, validate_metadata, validate_user_id
from episodes.messages import clean_messages
from episodes.models import Episode
from episodes.selectors import episodes_list
from episodes.services import episodes_insert_restored
from facts.content import clean_content, normalised
from facts.judging import Relation
from facts.models import Fact, FactConflict, FactEvent
from facts.selectors import conflicts_list, facts_list
from facts.services import (
    MERGED_FIELDS,
    fact_conflicts_insert,
    fact_events_insert,
    fact_merge_restored,
    facts_insert_restored,
    facts_link_restored,
    merged_values,
    snapshot,
)
from tenancy.models import Tenant

from .exports import FORMAT, VERSION

logger = logging.getLogger(__name__)

MEM0 = "mem0"
EMBED_BATCH = 1000  # texts per embedding call
MAX_PROBLEMS = 50  # lines reported at most: a wrong file fails on every line, and the first ones say why
LIVE = (Fact.Status.ACTIVE, Fact.Status.PENDING)


class _Invalid(Exception):
    """One problem of one record: the field and what is wrong with it."""

    def __init__(self, message: str, field_name: str = ""):
        super().__init__(f"{field_name}: {message}" if field_name else message)


# --- what a file holds, read and checked ----------------------------------------------------------------------------


@dataclass
class FactRecord:
    where: str  # "line 7", or "results[6]" in a JSON document
    ref: int | str  # the exporting side's id
    fact: Fact  # unsaved: everything but tenant, user, vector and the fields naming other records
    superseded_by: int | str | None = None
    source_episode: int | str | None = None
    proposal: dict | None = None
    events: list[dict] = field(default_factory=list)  # {"action", "actor", "before", "after", "created_at"}


@dataclass
class EpisodeRecord:
    where: str
    ref: int | str
    episode: Episode  # unsaved: everything but tenant, user, vector and the counters (from its messages)
    messages: list[dict]


@dataclass
class ConflictRecord:
    where: str
    ref: int | str
    existing_fact: int | str
    new_fact: int | str
    conflict: FactConflict  # unsaved: reason, status, resolution, times


@dataclass
class UserPart:
    """What the file holds for one target user."""

    facts: list[FactRecord] = field(default_factory=list)
    episodes: list[EpisodeRecord] = field(default_factory=list)
    conflicts: list[ConflictRecord] = field(default_factory=list)


@dataclass
class ImportFile:
    format: str  # "memoryproject" or "mem0"
    lines: int  # records read (headers included; blank lines are not counted)
    parts: dict[str, UserPart]  # by target user id, in the order the file names them


def import_read(data: bytes | str, *, user_id: str | None) -> ImportFile:
    """Parse and check a whole file. `user_id` is the target (every record goes to that user, whatever the file
    says); None takes the users the file names (its headers, or each Mem0 memory's user_id). Raises
    ValidationError with one entry per bad line ({"line 7": ["content: Must not be empty."]}), writing nothing."""
    if user_id is not None:
        validate_user_id(user_id)
    items = _items(data)
    if not items:
        raise ValidationError({"non_field_errors": ["The file holds no records."]})
    reader = _Reader(user_id)
    for where, value in items:
        reader.read(where, value)
    reader.check_references()
    if reader.problems:
        order = {where: index for index, (where, _) in enumerate(items)}
        first = sorted(reader.problems.items(), key=lambda problem: order[problem[0]])[:MAX_PROBLEMS]
        raise ValidationError({where: [message] for where, message in first})
    return ImportFile(reader.format, len(items), reader.parts)


def _items(data: bytes | str) -> list[tuple[str, object]]:
    """(where, parsed value or _Invalid) of every record: the lines of JSON Lines, or the items of a JSON document
    (a list, or Mem0's {"results": [...]})."""
    if isinstance(data, bytes):
        try:
            data = data.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise ValidationError(
                {"non_field_errors": [f"The file is not UTF-8 text (byte {exc.start} cannot be read)."]}
            ) from None
    text = data.removeprefix("\ufeff")
    if text.lstrip()[:1] in ("[", "{"):
        try:
            document = json.loads(text)
        except (ValueError, RecursionError):
            document = None  # JSON Lines: several documents, one a line
        if isinstance(document, list):
            return [(f"[{index}]", _checked(item)) for index, item in enumerate(document)]
        if isinstance(document, dict) and isinstance(document.get("results"), list):
            return [(f"results[{index}]", _checked(item)) for index, item in enumerate(document["results"])]
    items = []
    for number, line in enumerate(text.split("\n"), start=1):
        if line.strip():
            items.append((f"line {number}", _parsed(line)))
    return items


# Only an escape can put a NUL or a lone surrogate into a parsed line (the JSON parser refuses raw control
# characters, UTF-8 decoding refuses surrogates), and a line nests no deeper than it has brackets: other lines skip
# the walk, which cost 10 times the parsing.
_UNSTORABLE_ESCAPE = re.compile(r"\\u(?:0000|[dD][89a-fA-F])")


def _parsed(line: str):
    try:
        value = json.loads(line)
    except RecursionError:
        return _Invalid(f"Nested deeper than {settings.API_MAX_JSON_DEPTH} levels.")
    except ValueError as exc:
        return _Invalid(f"Not valid JSON: {exc}.")
    if _UNSTORABLE_ESCAPE.search(line) or line.count("{") + line.count("[") > settings.API_MAX_JSON_DEPTH:
        return _checked(value)
    return value


def _checked(value):
    """What PostgreSQL cannot store (NUL, lone surrogates) and nesting past API_MAX_JSON_DEPTH, as for any body."""
    try:
        json_problem_check(value)
    except ApplicationError as exc:
        return _Invalid(exc.message)
    return value


class _Reader:
    """Reads records in order: the format from the first, the target user from the headers (or the Mem0 records)."""

    def __init__(self, user_id: str | None):
        self.target = user_id
        self.format: str | None = None
        self.parts: dict[str, UserPart] = {}
        self.current: str | None = None  # the user of the latest header
        self.headers = 0
        self.problems: dict[str, str] = {}
        self.seen: dict[str, dict[tuple[str, int | str], str]] = {}  # by user: (kind, id) -> where

    def read(self, where: str, value) -> None:
        try:
            if isinstance(value, _Invalid):
                raise value
            if not isinstance(value, dict):
                raise _Invalid("Must be a JSON object.")
            if self.format is None:
                self.format = _format_of(value)
            if self.format == MEM0:
                self._add(where, _mem0_user(value, self.target), "fact", _mem0_fact(where, value))
            else:
                self._read_ours(where, value)
        except _Invalid as exc:
            self.problems[where] = str(exc)
        except ValidationError as exc:  # from a shared cleaner (content, messages)
            self.problems[where] = _sentence(exc)
        except ApplicationError as exc:  # a size limit of a shared cleaner (a message's length)
            self.problems[where] = exc.message

    def _read_ours(self, where: str, record: dict) -> None:
        kind = record.get("type")
        if kind == "header":
            self._header(record)
            return
        if kind not in READERS:
            raise _Invalid("Must be one of: header, fact, episode, conflict.", "type")
        if self.current is None:
            # A header whose problem was reported already: its records are not checked against a user.
            if self.headers:
                return
            raise _Invalid("A memoryproject file starts with its header line.")
        self._add(where, self.current, kind, READERS[kind](where, record))

    def _header(self, record: dict) -> None:
        self.headers += 1
        self.current = None
        _known(record, HEADER_FIELDS)
        if record.get("format") != FORMAT:
            raise _Invalid(f'Must be "{FORMAT}".', "format")
        version = record.get("version")
        if not _is_int(version) or not 1 <= version <= VERSION:
            raise _Invalid(f"Must be {VERSION}: this server reads version {VERSION} of the format.", "version")
        if self.target is not None:
            if self.headers > 1:
                raise _Invalid(
                    "A second header: the file holds several users' memories, and this import has one target user. "
                    "Import one user's part at a time, or import the whole file without a target user "
                    "(manage.py import_memories without --user)."
                )
            self.current = self.target
        else:
            self.current = _identifier(record, "user_id", required=True)
        _time(record, "exported_at")
        _text(record, "embedding_model")
        if "filtered" in record:  # an export of the facts a filter selected (it imports as any other)
            _boolean(record, "filtered")

    def _add(self, where: str, user_id: str, kind: str, record) -> None:
        seen = self.seen.setdefault(user_id, {})
        if (kind, record.ref) in seen:
            raise _Invalid(f"The {kind} id {record.ref!r} is already used by {seen[kind, record.ref]}.", "id")
        seen[kind, record.ref] = where
        part = self.parts.setdefault(user_id, UserPart())
        getattr(part, f"{kind}s").append(record)

    def check_references(self) -> None:
        """Every id a record names is a record of the same user in the file; a session appears once per user."""
        for user_id, part in self.parts.items():
            seen = self.seen[user_id]
            sessions: dict[str, str] = {}
            for episode in part.episodes:
                if episode.episode.session_id in sessions:
                    self._problem(
                        episode.where,
                        f"session_id: {episode.episode.session_id!r} is already the session of "
                        f"{sessions[episode.episode.session_id]}.",
                    )
                sessions.setdefault(episode.episode.session_id, episode.where)
            for fact in part.facts:
                for name, kind in (("superseded_by", "fact"), ("source_episode", "episode")):
                    ref = getattr(fact, name)
                    if ref is not None and (kind, ref) not in seen:
                        self._problem(fact.where, f"{name}: no {kind} with id {ref!r} among this user's records.")
                if fact.superseded_by is not None and fact.superseded_by == fact.ref:
                    self._problem(fact.where, "superseded_by: A fact cannot be superseded by itself.")
            for conflict in part.conflicts:
                for name in ("existing_fact", "new_fact"):
                    ref = getattr(conflict, name)
                    if ("fact", ref) not in seen:
                        self._problem(conflict.where, f"{name}: no fact with id {ref!r} among this user's records.")

    def _problem(self, where: str, message: str) -> None:
        self.problems.setdefault(where, message)


def _format_of(record: dict) -> str:
    if record.get("type") == "header":
        return FORMAT
    if "memory" in record and "type" not in record:
        return MEM0
    raise _Invalid(
        'Neither a memoryproject export (its first line is a header: {"type": "header", "format": "memoryproject", '
        '...}) nor Mem0 memories (objects with "id" and "memory").'
    )


def _sentence(exc: ValidationError) -> str:
    """A Django ValidationError (from a shared cleaner) as "field: message"."""
    if hasattr(exc, "error_dict"):
        name, messages = next(iter(exc.message_dict.items()))
        return f"{name}: {messages[0]}"
    return exc.messages[0]


# --- field readers: a value of the right type, or _Invalid naming the field ---------------------------------------


def _known(record: dict, allowed: frozenset[str]) -> None:
    unknown = sorted(set(record) - allowed)
    if unknown:
        raise _Invalid("Unknown field.", unknown[0])


def _is_int(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _text(record: dict, name: str, *, default: str = "", max_length: int | None = None) -> str:
    value = record.get(name)
    if value is None:
        return default
    if not isinstance(value, str):
        raise _Invalid("Must be a string.", name)
    if max_length is not None and len(value) > max_length:
        raise _Invalid(f"Must be at most {max_length} characters.", name)
    return value


def _identifier(record: dict, name: str, *, required: bool = False) -> str | None:
    value = record.get(name)
    if value is None and not required:
        return None
    if not isinstance(value, str) or not IDENTIFIER_PATTERN.match(value):
        raise _Invalid("This field is required." if value is None else IDENTIFIER_MESSAGE, name)
    return value


def _choice(record: dict, name: str, choices: tuple[str, ...], default: str) -> str:
    value = record.get(name, default)
    if value is None:
        value = default
    if value not in choices:
        raise _Invalid(f"Must be one of: {', '.join(choices)}.", name)
    return value


def _count(record: dict, name: str, default: int = 0) -> int:
    value = record.get(name, default)
    if value is None:
        return default
    if not _is_int(value) or not 0 <= value <= 2**31 - 1:
        raise _Invalid("Must be a whole number from 0 to 2147483647.", name)
    return value


def _boolean(record: dict, name: str) -> bool:
    value = record.get(name, False)
    if value is None:
        return False
    if not isinstance(value, bool):
        raise _Invalid("Must be true or false.", name)
    return value


def _object(record: dict, name: str) -> dict | None:
    value = record.get(name)
    if value is not None and not isinstance(value, dict):
        raise _Invalid("Must be an object.", name)
    return value


def _metadata(record: dict) -> dict:
    try:
        return validate_metadata(_object(record, "metadata"))
    except ValidationError as exc:
        raise _Invalid(exc.message_dict["metadata"][0], "metadata") from None


def _time(record: dict, name: str) -> datetime | None:
    value = record.get(name)
    if value is not None and not isinstance(value, str):
        raise _Invalid("Must be an ISO 8601 date and time, e.g. 2024-05-01T14:30:00Z.", name)
    try:
        return parse_timestamp(value, field=name)
    except ValidationError as exc:
        raise _Invalid(exc.message_dict[name][0], name) from None


def _ref(record: dict, name: str, *, required: bool = False) -> int | str | None:
    value = record.get(name)
    if value is None:
        if required:
            raise _Invalid("This field is required.", name)
        return None
    if not (_is_int(value) or (isinstance(value, str) and value)):
        raise _Invalid("Must be an id (a number or a non-empty string).", name)
    return value


# --- our own format -------------------------------------------------------------------------------------------------

HEADER_FIELDS = frozenset({"type", "format", "version", "user_id", "exported_at", "embedding_model", "filtered"})
FACT_FIELDS = frozenset(
    {"type", "id", "user_id", "agent_id", "content", "category", "confidence", "status", "source", "pinned",
     "usage_count", "last_used_at", "valid_from", "valid_to", "superseded_by", "occurred_at", "metadata",
     "source_episode", "source_messages", "reviewed_at", "archived_at", "proposal", "created_at", "updated_at",
     "events"}
)  # fmt: skip
EVENT_FIELDS = frozenset({"action", "actor", "before", "after", "created_at"})
EPISODE_FIELDS = frozenset(
    {"type", "id", "user_id", "agent_id", "session_id", "summary", "metadata", "extraction_status",
     "extraction_skip_reason", "extraction_excluded", "last_message_at", "created_at", "updated_at", "messages"}
)  # fmt: skip
CONFLICT_FIELDS = frozenset(
    {"type", "id", "user_id", "existing_fact", "new_fact", "status", "reason", "resolution", "resolved_by",
     "resolved_at", "created_at"}
)  # fmt: skip
PROPOSAL_ACTIONS = ("create", "merge", "refine", "supersede")
# Once: a TextChoices' .values is a new list at every call, a second of a 10,000-fact import.
CATEGORIES, STATUSES, SOURCES = tuple(Fact.Category.values), tuple(Fact.Status.values), tuple(Fact.Source.values)
ACTIONS, EXTRACTION_STATUSES = tuple(FactEvent.Action.values), tuple(Episode.ExtractionStatus.values)
CONFLICT_STATUSES, RESOLUTIONS = tuple(FactConflict.Status.values), ("", *FactConflict.Resolution.values)
RELATIONS = frozenset(relation.value for relation in Relation)


def _fact_record(where: str, record: dict) -> FactRecord:
    _known(record, FACT_FIELDS)
    ref = _ref(record, "id", required=True)
    if "content" not in record:
        raise _Invalid("This field is required.", "content")
    content = clean_content(record["content"])
    confidence = record.get("confidence", 1.0)
    if not isinstance(confidence, int | float) or isinstance(confidence, bool) or not 0.0 <= confidence <= 1.0:
        raise _Invalid("Must be a number from 0 to 1.", "confidence")
    created_at = _time(record, "created_at") or timezone.now()
    occurred_at = _time(record, "occurred_at")
    valid_from = _time(record, "valid_from") or occurred_at or created_at
    valid_to = _time(record, "valid_to")
    if valid_to is not None and valid_to < valid_from:
        raise _Invalid("Must not be before valid_from.", "valid_to")
    source_messages = record.get("source_messages") or []
    if not isinstance(source_messages, list) or not all(
        _is_int(index) and 0 <= index <= 2**31 - 1 for index in source_messages
    ):
        raise _Invalid("Must be a list of message indexes (whole numbers from 0).", "source_messages")
    fact = Fact(
        agent_id=_text(record, "agent_id", max_length=255),
        content=content,
        category=_choice(record, "category", CATEGORIES, Fact.Category.OTHER),
        confidence=float(confidence),
        status=_choice(record, "status", STATUSES, Fact.Status.ACTIVE),
        source=_choice(record, "source", SOURCES, Fact.Source.IMPORT),
        pinned=_boolean(record, "pinned"),
        usage_count=_count(record, "usage_count"),
        last_used_at=_time(record, "last_used_at"),
        valid_from=valid_from,
        valid_to=valid_to,
        occurred_at=occurred_at,
        metadata=_metadata(record),
        source_messages=source_messages,
        reviewed_at=_time(record, "reviewed_at"),
        archived_at=_time(record, "archived_at"),
        created_at=created_at,
        updated_at=_time(record, "updated_at") or created_at,
    )
    return FactRecord(
        where,
        ref,
        fact,
        superseded_by=_ref(record, "superseded_by"),
        source_episode=_ref(record, "source_episode"),
        proposal=_proposal(record),
        events=_events(record),
    )


def _events(record: dict) -> list[dict]:
    events = record.get("events") or []
    if not isinstance(events, list):
        raise _Invalid("Must be a list of events.", "events")
    read = []
    for index, event in enumerate(events):
        name = f"events[{index}]"
        if not isinstance(event, dict):
            raise _Invalid("Must be an object.", name)
        try:
            _known(event, EVENT_FIELDS)
            read.append(
                {
                    "action": _choice(event, "action", ACTIONS, ""),
                    "actor": _text(event, "actor", default="import", max_length=100) or "import",
                    "before": _object(event, "before"),
                    "after": _object(event, "after"),
                    "created_at": _time(event, "created_at") or timezone.now(),
                }
            )
        except _Invalid as exc:
            raise _Invalid(str(exc), name) from None
    return read


def _proposal(record: dict) -> dict | None:
    """A pending fact's stored judgement: the review console and approval read these keys."""
    proposal = _object(record, "proposal")
    if proposal is None:
        return None
    if proposal.get("action") not in PROPOSAL_ACTIONS:
        raise _Invalid(f"Must be one of: {', '.join(PROPOSAL_ACTIONS)}.", "proposal.action")
    for key in ("targets", "conflicts"):
        items = proposal.get(key, [])
        if not isinstance(items, list) or not all(_proposal_item(item) for item in items):
            raise _Invalid(
                "Must be a list of objects with fact, content, relation, certainty, reason and version.",
                f"proposal.{key}",
            )
    return proposal


def _proposal_item(item) -> bool:
    return (
        isinstance(item, dict)
        and (item.get("fact") is None or _is_int(item["fact"]) or isinstance(item["fact"], str))
        and isinstance(item.get("content"), str)
        and item.get("relation") in RELATIONS
        and isinstance(item.get("certainty"), int | float)
        and isinstance(item.get("reason"), str)
        and isinstance(item.get("version"), str)
    )


def _episode_record(where: str, record: dict) -> EpisodeRecord:
    _known(record, EPISODE_FIELDS)
    ref = _ref(record, "id", required=True)
    session_id = _identifier(record, "session_id", required=True)
    if "messages" not in record:
        raise _Invalid("This field is required.", "messages")
    messages = clean_messages(record["messages"], per_request_limit=False)
    if len(messages) > settings.EPISODES_MAX_MESSAGES_PER_EPISODE:
        raise _Invalid(
            f"The episode holds {len(messages):,} messages, at most {settings.EPISODES_MAX_MESSAGES_PER_EPISODE:,} "
            "(EPISODES_MAX_MESSAGES_PER_EPISODE).",
            "messages",
        )
    chars = sum(len(message["content"]) for message in messages)
    if chars > settings.EPISODES_MAX_EPISODE_CHARS:
        raise _Invalid(
            f"The episode holds {chars} characters, at most {settings.EPISODES_MAX_EPISODE_CHARS} "
            "(EPISODES_MAX_EPISODE_CHARS).",
            "messages",
        )
    excluded = record.get("extraction_excluded") or []
    if not isinstance(excluded, list) or not all(
        isinstance(span, list) and len(span) == 2 and all(_is_int(end) for end in span) and 0 <= span[0] < span[1]
        for span in excluded
    ):
        raise _Invalid("Must be a list of [start, end] message index ranges.", "extraction_excluded")
    created_at = _time(record, "created_at") or timezone.now()
    status = _choice(record, "extraction_status", EXTRACTION_STATUSES, Episode.ExtractionStatus.DONE)
    skipped = status == Episode.ExtractionStatus.SKIPPED
    episode = Episode(
        agent_id=_text(record, "agent_id", max_length=255),
        session_id=session_id,
        summary=_text(record, "summary"),
        metadata=_metadata(record),
        # Its facts come with the file: never extracted again (a skipped one keeps its reason).
        extraction_status=Episode.ExtractionStatus.SKIPPED if skipped else Episode.ExtractionStatus.DONE,
        extraction_skip_reason=_text(record, "extraction_skip_reason") if skipped else "",
        extraction_excluded=excluded,
        last_message_at=_time(record, "last_message_at"),
        created_at=created_at,
        updated_at=_time(record, "updated_at") or created_at,
    )
    return EpisodeRecord(where, ref, episode, messages)


def _conflict_record(where: str, record: dict) -> ConflictRecord:
    _known(record, CONFLICT_FIELDS)
    conflict = FactConflict(
        reason=_text(record, "reason"),
        status=_choice(record, "status", CONFLICT_STATUSES, FactConflict.Status.OPEN),
        resolution=_choice(record, "resolution", RESOLUTIONS, ""),
        resolved_by=_text(record, "resolved_by", max_length=100),
        resolved_at=_time(record, "resolved_at"),
        created_at=_time(record, "created_at") or timezone.now(),
    )
    return ConflictRecord(
        where,
        _ref(record, "id", required=True),
        _ref(record, "existing_fact", required=True),
        _ref(record, "new_fact", required=True),
        conflict,
    )


READERS: dict[str, Callable] = {"fact": _fact_record, "episode": _episode_record, "conflict": _conflict_record}


# --- Mem0's memories (get_all results, export files) --------------------------------------------------------------

# Mem0's own categories that say what ours do; any other keeps "other" (all of them stay in the metadata).
MEM0_CATEGORIES = {
    "user_preferences": Fact.Category.PREFERENCE,
    "personal_details": Fact.Category.PROFILE,
    "family": Fact.Category.PROFILE,
    "professional_details": Fact.Category.PROFILE,
}


def _mem0_user(record: dict, target: str | None) -> str:
    if target is not None:
        return target
    return _identifier(record, "user_id", required=True)


def _mem0_fact(where: str, record: dict) -> FactRecord:
    """A Mem0 memory as a current active fact. Fields Mem0 adds over versions (hash, score, owner...) are ignored;
    its id, categories and run id are kept under metadata["mem0"]."""
    ref = _ref(record, "id", required=True)
    if not isinstance(record.get("memory"), str):
        raise _Invalid("Must be a string.", "memory")
    try:
        content = clean_content(record["memory"])
    except ValidationError as exc:
        raise _Invalid(exc.message_dict["content"][0], "memory") from None
    categories = record.get("categories") or []
    if not isinstance(categories, list) or not all(isinstance(name, str) for name in categories):
        raise _Invalid("Must be a list of strings.", "categories")
    metadata = dict(_metadata(record))
    metadata["mem0"] = {"id": ref} | ({"categories": categories} if categories else {})
    if record.get("run_id") is not None:
        metadata["mem0"]["run_id"] = _text(record, "run_id")
    category = next(
        (
            name if name in CATEGORIES else MEM0_CATEGORIES[name]
            for name in categories
            if name in CATEGORIES or name in MEM0_CATEGORIES
        ),
        Fact.Category.OTHER,
    )
    created_at = _time(record, "created_at") or timezone.now()
    fact = Fact(
        agent_id=_text(record, "agent_id", max_length=255),
        content=content,
        category=category,
        source=Fact.Source.IMPORT,
        valid_from=created_at,
        metadata=metadata,
        created_at=created_at,
        updated_at=_time(record, "updated_at") or created_at,
    )
    return FactRecord(where, ref, fact)


# --- writing one user's part ---------------------------------------------------------------------------------------


@dataclass
class UserImportReport:
    user_id: str
    facts: Counter = field(default_factory=lambda: Counter(created=0, merged=0, skipped=0))
    episodes: Counter = field(default_factory=lambda: Counter(created=0, skipped=0))
    conflicts: Counter = field(default_factory=lambda: Counter(created=0))
    embedding_pending: int = 0  # facts stored without their vector (the embedder failed): embedded later


# What a record becomes: created, merged into a fact the user holds (skipped if that changes nothing), or skipped.
CREATE, MERGE, SKIP = "create", "merge", "skip"


@dataclass(frozen=True)
class _Plan:
    facts: list[tuple[str, int | None]]  # per fact record: (CREATE | MERGE | SKIP, the user's fact it matches)
    episodes: list[int | None]  # per episode record: the user's episode of that session, or None (created)


def user_import(*, tenant: Tenant, user_id: str, part: UserPart, actor: str) -> UserImportReport:
    """Write one user's part of a file read by import_read: all of it, or (on any failure) nothing.

    Facts are re-embedded with the active model first, outside any transaction, one call per EMBED_BATCH (while
    the embedder fails they are stored without vectors and embedded later). Then, in one transaction under the
    user's memory lock: episodes (marked extracted: their facts are in the file), facts as given (statuses,
    validity, history, usage; never judged against each other: the file is already clean), the references between
    them mapped to the new ids, conflicts. A fact or session the user already holds is merged or skipped."""
    validate_user_id(user_id)
    planned = _plan(tenant, user_id, part)
    vectors = _vectors(tenant, user_id, part, planned)
    with transaction.atomic():
        xact_lock(LockNamespace.USER_MEMORY, tenant.pk, user_id)
        plan = _plan(tenant, user_id, part)  # again under the lock: what arrived meanwhile is matched too
        return _write(tenant, user_id, part, plan, vectors, actor)


def _plan(tenant: Tenant, user_id: str, part: UserPart) -> _Plan:
    """Match each record against what the user holds now (see docs/export-import.md, "Created, merged, skipped")."""
    by_content: dict[str, list[Fact]] = {}
    held = ("id", "content", "status", "valid_from", "valid_to", *MERGED_FIELDS)
    stored = facts_list(tenant=tenant, user_id=user_id, validity="all").only(*held)
    for fact in stored.order_by("id"):
        by_content.setdefault(normalised(fact.content), []).append(fact)
    facts = []
    for record in part.facts:
        same = by_content.get(normalised(record.fact.content), [])
        facts.append(_fact_plan(record.fact, same))
    sessions = dict(episodes_list(tenant=tenant, user_id=user_id).values_list("session_id", "id"))
    return _Plan(facts, [sessions.get(record.episode.session_id) for record in part.episodes])


def _fact_plan(incoming: Fact, same_words: list[Fact]) -> tuple[str, int | None]:
    if incoming.valid_to is not None:  # history: skipped only when the very same interval is there
        for fact in same_words:
            if fact.valid_from == incoming.valid_from and fact.valid_to == incoming.valid_to:
                return SKIP, fact.pk
        return CREATE, None
    current = [fact for fact in same_words if fact.valid_to is None]
    held = next((fact for fact in current if fact.status == incoming.status), None)
    if held is None:
        # The user holds it live: a live copy strengthens it, a retired one adds nothing.
        held = next((fact for fact in current if fact.status in LIVE), None)
        if held is not None and incoming.status not in LIVE:
            return SKIP, held.pk
    if held is None:
        return CREATE, None
    return (MERGE if merged_values(held, incoming) else SKIP), held.pk


@dataclass(frozen=True)
class _Vectors:
    model: str
    facts: dict[int, object]  # index of the fact record -> its vector (missing: stored awaiting it)
    episodes: dict[int, object]  # index of the episode record -> its summary's vector


def _vectors(tenant: Tenant, user_id: str, part: UserPart, plan: _Plan) -> _Vectors:
    """The vectors of what will be created: fact contents and episode summaries, EMBED_BATCH per call. The first
    failed call stops the embedding (the provider is down): the rest is stored without vectors."""
    texts = [(("fact", index), record.fact.embedding_text()) for index, record in enumerate(part.facts)
             if plan.facts[index][0] == CREATE]  # fmt: skip
    texts += [(("episode", index), record.episode.summary) for index, record in enumerate(part.episodes)
              if plan.episodes[index] is None and record.episode.summary]  # fmt: skip
    found: dict[str, dict[int, object]] = {"fact": {}, "episode": {}}
    for start in range(0, len(texts), EMBED_BATCH):
        batch = texts[start : start + EMBED_BATCH]
        try:
            vectors = embed_texts([text for _, text in batch], tenant=tenant, user_id=user_id)
        except AIProviderError as exc:
            logger.warning("embedding unavailable: %d imported records stored awaiting vectors: %s",
                           len(texts) - start, exc.message)  # fmt: skip
            break
        for ((kind, index), _), vector in zip(batch, vectors, strict=True):
            found[kind][index] = vector
    return _Vectors(active_embedding_model(), found["fact"], found["episode"])


def _write(
    tenant: Tenant, user_id: str, part: UserPart, plan: _Plan, vectors: _Vectors, actor: str
) -> UserImportReport:
    report = UserImportReport(user_id)
    now = timezone.now()

    episode_ids: dict[int | str, int] = {}
    new_episodes = []
    for index, (record, existing) in enumerate(zip(part.episodes, plan.episodes, strict=True)):
        if existing is not None:
            episode_ids[record.ref] = existing
            report.episodes["skipped"] += 1
            continue
        vector = vectors.episodes.get(index)
        record.episode.embedding = vector
        record.episode.embedding_model = vectors.model if vector is not None else ""
        new_episodes.append(record)
    episodes_insert_restored(
        tenant=tenant,
        user_id=user_id,
        episodes=[record.episode for record in new_episodes],
        messages=[record.messages for record in new_episodes],
    )
    episode_ids |= {record.ref: record.episode.pk for record in new_episodes}
    report.episodes["created"] += len(new_episodes)

    fact_ids: dict[int | str, int] = {}
    created: list[FactRecord] = []
    merges = []
    for index, (record, (action, existing)) in enumerate(zip(part.facts, plan.facts, strict=True)):
        if action != CREATE:
            fact_ids[record.ref] = existing
            if action == MERGE:
                merges.append((record, existing))
            else:
                report.facts["skipped"] += 1
            continue
        fact = record.fact
        fact.tenant, fact.user_id = tenant, user_id
        fact.source_episode_id = episode_ids.get(record.source_episode)
        fact.embedding = vectors.facts.get(index)
        if fact.embedding is None:
            fact.embedding_model, fact.embedding_pending = "", Fact.EmbeddingPending.EMBED
            fact.embedding_next_attempt_at = now
            report.embedding_pending += 1
        else:
            fact.embedding_model = vectors.model
        created.append(record)
    facts_insert_restored(facts=[record.fact for record in created])
    fact_ids |= {record.ref: record.fact.pk for record in created}
    report.facts["created"] += len(created)
    for record, existing in merges:
        changed = fact_merge_restored(tenant=tenant, fact_id=existing, incoming=record.fact, actor=actor)
        report.facts["merged" if changed else "skipped"] += 1

    conflict_ids: dict[int | str, int] = {}
    pairs = {
        (existing, new): pk
        for pk, existing, new in conflicts_list(tenant=tenant, user_id=user_id)
        .select_related(None)
        .values_list("pk", "existing_fact_id", "new_fact_id")
    }
    new_conflicts = []
    for record in part.conflicts:
        pair = (fact_ids[record.existing_fact], fact_ids[record.new_fact])
        if pair in pairs or pair[0] == pair[1]:  # already there, or both sides are one fact the user holds
            if pair in pairs:
                conflict_ids[record.ref] = pairs[pair]
            continue
        conflict = record.conflict
        conflict.tenant, conflict.user_id = tenant, user_id
        conflict.existing_fact_id, conflict.new_fact_id = pair
        new_conflicts.append(record)
        pairs[pair] = None  # twice in the file: created once
    fact_conflicts_insert(conflicts=[record.conflict for record in new_conflicts])
    conflict_ids |= {record.ref: record.conflict.pk for record in new_conflicts}
    report.conflicts["created"] += len(new_conflicts)

    ids = _Ids(fact_ids, conflict_ids)
    facts_link_restored(
        tenant=tenant,
        links=[
            (record.fact.pk, fact_ids.get(record.superseded_by), ids.proposal(record.proposal))
            for record in created
            if record.superseded_by is not None or record.proposal is not None
        ],
    )
    fact_events_insert(events=[event for record in created for event in _history(record, ids, actor)])
    return report


@dataclass(frozen=True)
class _Ids:
    """The exporting side's ids mapped to this side's; an id of nothing in the file becomes None (never another
    fact that happens to carry that id here)."""

    facts: dict
    conflicts: dict

    # The keys of events' snapshots that name a fact or a conflict (facts.services.history, transitions).
    FACT_KEYS = ("superseded_by", "into", "was", "existing_fact", "new_fact")

    def snapshot(self, values: dict | None) -> dict | None:
        if not values:
            return values
        mapped = dict(values)
        for key in self.FACT_KEYS:
            if mapped.get(key) is not None:
                mapped[key] = self.facts.get(mapped[key])
        if mapped.get("conflict") is not None:
            mapped["conflict"] = self.conflicts.get(mapped["conflict"])
        return mapped

    def proposal(self, proposal: dict | None) -> dict | None:
        if proposal is None:
            return None
        return {
            **proposal,
            "targets": [{**item, "fact": self.facts.get(item["fact"])} for item in proposal.get("targets", [])],
            "conflicts": [
                {**item, "fact": self.facts.get(item["fact"]), "conflict": self.conflicts.get(item.get("conflict"))}
                for item in proposal.get("conflicts", [])
            ],
        }


def _history(record: FactRecord, ids: _Ids, actor: str) -> list[FactEvent]:
    """The fact's events as exported; a fact that comes without any (a Mem0 memory) gets its "created" event."""
    fact = record.fact
    events = record.events or [
        {"action": FactEvent.Action.CREATED, "actor": actor, "before": None,
         "after": {**snapshot(fact), "source": "import"}, "created_at": timezone.now()}
    ]  # fmt: skip
    return [
        FactEvent(
            tenant_id=fact.tenant_id,
            fact_id=fact.pk,
            user_id=fact.user_id,
            action=event["action"],
            actor=event["actor"],
            before=ids.snapshot(event["before"]),
            after=ids.snapshot(event["after"]),
            created_at=event["created_at"],
        )
        for event in events
    ]


@dataclass(frozen=True)
class ImportReport:
    format: str
    lines: int
    users: list[UserImportReport]

    def total(self, kind: str) -> Counter:
        """The counts of one kind of record ("facts", "episodes", "conflicts") summed over the users."""
        counts = Counter(dict.fromkeys(getattr(UserImportReport(""), kind), 0))
        for user in self.users:
            counts.update(getattr(user, kind))
        return counts


def memories_import(
    *,
    tenant: Tenant,
    data: bytes | str,
    user_id: str | None,
    actor: str,
    on_user: Callable[[UserImportReport], None] | None = None,
    max_facts: int | None = None,
) -> ImportReport:
    """Import a file (import_read) into `tenant`: into `user_id`, or (None) into the users it names. Nothing is written
    unless the whole file reads; then each user's part is written all or nothing, one user after the other.
    max_facts: a file holding more facts is refused (413) before anything is embedded or written."""
    read = import_read(data, user_id=user_id)
    facts = sum(len(part.facts) for part in read.parts.values())
    if max_facts is not None and facts > max_facts:
        raise ApplicationError(
            f"The file holds {facts:,} facts; an import over the API takes at most {max_facts:,} "
            "(FACTS_IMPORT_MAX_BATCH). Import it in parts, or with manage.py import_memories.",
            code="payload_too_large",
            status_code=413,
            details={"facts": facts, "max_facts": max_facts},
        )
    users = []
    for target, part in read.parts.items():
        users.append(user_import(tenant=tenant, user_id=target, part=part, actor=actor))
        if on_user is not None:
            on_user(users[-1])
    return ImportReport(read.format, read.lines, users)
