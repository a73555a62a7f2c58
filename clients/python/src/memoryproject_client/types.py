"""What the API answers, as dataclasses.

Built tolerantly: a field the server adds later is ignored (it stays readable in `raw`, the object as received),
a field an older server does not send keeps its default, timestamps become aware `datetime`s. Field names are the
API's own.
"""

from __future__ import annotations

import dataclasses
import types
import typing
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Generic, TypeVar

T = TypeVar("T")


def from_json(cls: type[T], data: Mapping[str, Any]) -> T:
    """An instance of the dataclass `cls` from a JSON object: known fields converted by their annotation, unknown
    ones left in `raw`."""
    hints = _hints(cls)
    values = {
        item.name: _convert(hints[item.name], data[item.name])
        for item in dataclasses.fields(cls)  # type: ignore[arg-type]
        if item.name != "raw" and item.name in data
    }
    return cls(**values, raw=dict(data))  # type: ignore[call-arg]  # every answer dataclass has `raw`


_HINTS: dict[type, dict[str, Any]] = {}


def _hints(cls: type) -> dict[str, Any]:
    if cls not in _HINTS:
        _HINTS[cls] = typing.get_type_hints(cls)
    return _HINTS[cls]


def _convert(annotation: Any, value: Any) -> Any:
    if value is None:
        return None
    origin = typing.get_origin(annotation)
    if origin is typing.Union or origin is types.UnionType:
        arms = [arm for arm in typing.get_args(annotation) if arm is not type(None)]
        return _convert(arms[0], value) if len(arms) == 1 else value
    if origin is list and isinstance(value, list):
        (item_type,) = typing.get_args(annotation)
        return [_convert(item_type, item) for item in value]
    if dataclasses.is_dataclass(annotation) and isinstance(value, Mapping):
        return from_json(annotation, value)  # type: ignore[arg-type]
    if annotation is datetime and isinstance(value, str):
        try:
            return datetime.fromisoformat(value)
        except ValueError:
            return value  # tolerant: an unexpected format stays as sent
    if annotation is float and isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    return value


def _raw() -> Any:
    return field(default_factory=dict, repr=False, compare=False)


# --- facts -----------------------------------------------------------------------------------------------------


@dataclass
class Fact:
    """One statement about a user. `status`: active, pending (awaiting review), rejected, archived; `valid_to` and
    `superseded_by` are set once a newer fact replaced it; `embedding`: "ready" or "pending"."""

    id: int = 0
    user_id: str = ""
    agent_id: str = ""
    category: str = "other"
    content: str = ""
    confidence: float = 1.0
    status: str = "active"
    source: str = ""
    source_episode: int | None = None
    pinned: bool = False
    usage_count: int = 0
    last_used_at: datetime | None = None
    valid_from: datetime | None = None
    valid_to: datetime | None = None
    superseded_by: int | None = None
    occurred_at: datetime | None = None
    metadata: dict[str, Any] = field(default_factory=dict)
    embedding: str = "ready"
    embedding_model: str = ""
    reviewed_at: datetime | None = None
    archived_at: datetime | None = None
    proposal: dict[str, Any] | None = None
    source_messages: Any = None
    created_at: datetime | None = None
    updated_at: datetime | None = None
    raw: dict[str, Any] = _raw()


@dataclass
class RememberResult:
    """What saving a fact did. `outcome`: created, merged (into an existing fact, which `fact` is), superseded
    (older facts retired: `superseded_ids`), pending (waits for review), conflict (waits for `conflict_ids`)."""

    outcome: str = ""
    fact: Fact = field(default_factory=Fact)
    superseded_ids: list[int] = field(default_factory=list)
    conflict_ids: list[int] = field(default_factory=list)
    raw: dict[str, Any] = _raw()


@dataclass
class FactEvent:
    """One change of a fact's history: `action` (created, merged, superseded, approved, ...), who did it, and the
    fields before and after."""

    id: int = 0
    fact_id: int = 0
    action: str = ""
    actor: str = ""
    before: dict[str, Any] | None = None
    after: dict[str, Any] | None = None
    created_at: datetime | None = None
    raw: dict[str, Any] = _raw()


@dataclass
class ScoredFact:
    """A search hit: the fact, its final score and the parts of it (`scores`: vector, keyword, decay, final)."""

    fact: Fact = field(default_factory=Fact)
    score: float = 0.0
    scores: dict[str, Any] = field(default_factory=dict)
    raw: dict[str, Any] = _raw()


@dataclass
class FactImportResult:
    imported: int = 0
    ids: list[int] = field(default_factory=list)
    raw: dict[str, Any] = _raw()


@dataclass
class FactsDeleted:
    """What a delete by filter removed."""

    deleted: int = 0
    fact_ids: list[int] = field(default_factory=list)
    raw: dict[str, Any] = _raw()


@dataclass
class Conflict:
    """Two facts that contradict each other, waiting for (or settled by) a resolution: keep_new, keep_old, keep_both
    or merge."""

    id: int = 0
    user_id: str = ""
    status: str = ""
    reason: str = ""
    resolution: str | None = None
    resolved_by: str | None = None
    resolved_at: datetime | None = None
    created_at: datetime | None = None
    existing_fact: Fact | None = None
    new_fact: Fact | None = None
    raw: dict[str, Any] = _raw()


class _Results(Generic[T]):
    """Search answers iterate, index and count as their `results`."""

    results: list[T]

    def __iter__(self) -> Iterator[T]:
        return iter(self.results)

    def __len__(self) -> int:
        return len(self.results)

    def __getitem__(self, index: int) -> T:
        return self.results[index]


@dataclass
class FactSearchResults(_Results[ScoredFact]):
    """`degraded` is ["embeddings"] when the query could not be embedded and the facts were ranked by keywords."""

    results: list[ScoredFact] = field(default_factory=list)
    degraded: list[str] = field(default_factory=list)
    raw: dict[str, Any] = _raw()


# --- knowledge base ----------------------------------------------------------------------------------------------


@dataclass
class DocumentHit:
    """A knowledge-base passage, with where it comes from (`citation`: "doc:<doc_id> §<heading>, lines a-b")."""

    document_id: int = 0
    doc_id: str = ""
    heading_path: str = ""
    line_start: int = 0
    line_end: int = 0
    text: str = ""
    citation: str = ""
    score: float = 0.0
    scores: dict[str, Any] = field(default_factory=dict)
    raw: dict[str, Any] = _raw()


@dataclass
class Chunk:
    ordinal: int = 0
    heading_path: str = ""
    line_start: int = 0
    line_end: int = 0
    token_count: int = 0
    text: str = ""
    raw: dict[str, Any] = _raw()


@dataclass
class IndexingProgress:
    """The worker's progress on a document's waiting text."""

    attempts: int = 0
    max_attempts: int = 0
    chunks_total: int = 0
    chunks_embedded: int = 0
    next_attempt_at: datetime | None = None
    raw: dict[str, Any] = _raw()


@dataclass
class Document:
    """A knowledge-base document. `status`: ready, indexing or failed (`error` says why). `chunks` and `indexing`
    come with `kb.get` only (None in lists)."""

    id: int = 0
    doc_id: str = ""
    title: str = ""
    content_type: str = ""
    source_path: str = ""
    size_bytes: int = 0
    content_hash: str = ""
    metadata: dict[str, Any] = field(default_factory=dict)
    chunk_count: int = 0
    status: str = ""
    error: str = ""
    created_at: datetime | None = None
    updated_at: datetime | None = None
    indexing: IndexingProgress | None = None
    chunks: list[Chunk] | None = None
    raw: dict[str, Any] = _raw()


@dataclass
class UploadResult:
    """`outcome`: new, changed or unchanged. A long text is indexed by the worker: `document.status` is then
    "indexing" and `poll` the document's URL (`kb.get(document.id)` shows the progress)."""

    outcome: str = ""
    chunks_written: int = 0
    document: Document = field(default_factory=Document)
    poll: str | None = None
    raw: dict[str, Any] = _raw()


@dataclass
class KBSearchResults(_Results[DocumentHit]):
    results: list[DocumentHit] = field(default_factory=list)
    degraded: list[str] = field(default_factory=list)
    raw: dict[str, Any] = _raw()


# --- context -----------------------------------------------------------------------------------------------------


@dataclass
class Context:
    """What to put in the prompt before an LLM call: `text` (facts and passages, with citations) within the token
    budget, and the facts and documents it was made of. `cold_start`: nothing is known about the user yet."""

    text: str = ""
    token_count: int = 0
    cold_start: bool = False
    facts: list[ScoredFact] = field(default_factory=list)
    documents: list[DocumentHit] = field(default_factory=list)
    degraded: list[str] = field(default_factory=list)
    raw: dict[str, Any] = _raw()


# --- episodes ----------------------------------------------------------------------------------------------------


@dataclass
class Message:
    role: str = ""
    content: str = ""
    timestamp: datetime | None = None
    raw: dict[str, Any] = _raw()


@dataclass
class MessageMatch:
    """A message of an episode that matched a search; `index` is its position in the session."""

    index: int = 0
    role: str = ""
    content: str = ""
    timestamp: datetime | None = None
    raw: dict[str, Any] = _raw()


@dataclass
class Episode:
    """A stored conversation. `messages` and `facts` (those extracted from it) come with `episodes.get` only (None
    in lists and search results). `extraction_status`: pending, running, done, failed or skipped."""

    id: int = 0
    user_id: str = ""
    agent_id: str = ""
    session_id: str = ""
    message_count: int = 0
    summary: str = ""
    metadata: dict[str, Any] = field(default_factory=dict)  # carried by every fact extracted from it
    extraction_status: str = ""
    extraction_error: str = ""
    extraction_skip_reason: str = ""
    extraction_fallback_reason: str = ""  # why the latest run extracted offline instead of with the chat model
    extraction_next_attempt_at: datetime | None = None
    last_message_at: datetime | None = None
    created_at: datetime | None = None
    updated_at: datetime | None = None
    messages: list[Message] | None = None
    facts: list[Fact] | None = None
    summarized_message_count: int | None = None
    extracted_message_count: int | None = None
    extraction_attempts: int | None = None
    raw: dict[str, Any] = _raw()


@dataclass
class EpisodeStoreResult:
    """`created`: a new episode for this session; `appended`: how many of the posted messages were new (those already
    stored are skipped)."""

    id: int = 0
    session_id: str = ""
    extraction_status: str = ""
    created: bool = False
    appended: int = 0
    message_count: int = 0
    raw: dict[str, Any] = _raw()


@dataclass
class ScoredEpisode:
    episode: Episode = field(default_factory=Episode)
    score: float = 0.0
    scores: dict[str, Any] = field(default_factory=dict)
    matches: list[MessageMatch] = field(default_factory=list)
    raw: dict[str, Any] = _raw()


@dataclass
class EpisodeSearchResults(_Results[ScoredEpisode]):
    results: list[ScoredEpisode] = field(default_factory=list)
    degraded: list[str] = field(default_factory=list)
    raw: dict[str, Any] = _raw()


# --- forgetting --------------------------------------------------------------------------------------------------


@dataclass
class ForgetPolicy:
    """The tenant's forgetting rules; `is_default` while it follows the server's FORGET_* settings."""

    enabled: bool = False
    max_unused_days: int | None = None
    min_usage_count: int = 0
    max_facts_per_user: int | None = None
    archive_retention_days: int = 0
    exempt_categories: list[str] = field(default_factory=list)
    is_default: bool = True
    updated_at: datetime | None = None
    raw: dict[str, Any] = _raw()


@dataclass
class ForgetRun:
    """One application of the forget policy (or a dry run of it): how many facts it archived, evicted and purged."""

    id: int = 0
    dry_run: bool = False
    status: str = ""
    as_of: datetime | None = None
    started_at: datetime | None = None
    duration_ms: int | None = None
    archived: int = 0
    evicted: int = 0
    purged: int = 0
    superseded_purged: int = 0
    timings: dict[str, Any] = field(default_factory=dict)
    policy: dict[str, Any] = field(default_factory=dict)
    error: str = ""
    raw: dict[str, Any] = _raw()


# --- users, tools, the server ------------------------------------------------------------------------------------


@dataclass
class Erasure:
    """What erasing a user deleted, by kind (`deleted["facts"]`, `deleted["episodes"]`, ...)."""

    user_id: str = ""
    deleted: dict[str, int] = field(default_factory=dict)
    raw: dict[str, Any] = _raw()


@dataclass
class ImportCounts:
    created: int = 0
    merged: int = 0
    skipped: int = 0
    raw: dict[str, Any] = _raw()


@dataclass
class ImportReport:
    """What importing a user's JSON Lines did: the format recognised, the lines read, and per kind how many
    records were created, merged into existing ones, or skipped."""

    format: str = ""
    lines: int = 0
    facts: ImportCounts = field(default_factory=ImportCounts)
    episodes: ImportCounts = field(default_factory=ImportCounts)
    conflicts: ImportCounts = field(default_factory=ImportCounts)
    raw: dict[str, Any] = _raw()


@dataclass
class ToolResult:
    """A tool call's answer: `content` is the text for the model, `data` the structured result. A bad call
    (unknown tool, wrong arguments) is `is_error=True` with `content` saying what was wrong, not an exception."""

    content: str = ""
    data: Any = None
    is_error: bool = False
    raw: dict[str, Any] = _raw()


@dataclass
class WhoAmI:
    tenant: str = ""
    key_prefix: str = ""
    key_name: str = ""
    raw: dict[str, Any] = _raw()


@dataclass
class Health:
    """The server's health: `status` ok, degraded (an AI provider fails; searches rank by keywords) or unavailable;
    `database`, `embedding` and `providers` as the server reports them."""

    status: str = ""
    database: dict[str, Any] = field(default_factory=dict)
    embedding: dict[str, Any] = field(default_factory=dict)
    providers: dict[str, Any] = field(default_factory=dict)
    raw: dict[str, Any] = _raw()


@dataclass
class EmbeddingCacheStats:
    enabled: bool = False
    model: str = ""
    hits: int = 0
    misses: int = 0
    rows: int = 0
    raw: dict[str, Any] = _raw()


@dataclass
class Page(Generic[T]):
    """One page of a list: its items and the cursor of the next page (None on the last)."""

    items: list[T]
    next_cursor: str | None
