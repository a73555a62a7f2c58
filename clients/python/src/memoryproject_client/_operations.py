"""Every API operation, once: a function of the operation's arguments (named as the API names its fields) that
describes the request. `_sync` and `_async` turn each into a method that sends it and returns the parsed answer.

Arguments left at None (or NOT_GIVEN) are not sent, so the server's defaults apply.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime
from pathlib import Path
from typing import IO, Any

import httpx2

from ._core import (
    NOT_GIVEN,
    Filter,
    LinesRequest,
    PageRequest,
    Plan,
    Request,
    choices,
    fields,
    filter_text,
    list_of,
    nothing,
    object_of,
    patch_fields,
    query_bool,
    retry_after,
    segment,
)
from .errors import error_from_response
from .types import (
    Conflict,
    Context,
    Document,
    EmbeddingCacheStats,
    Episode,
    EpisodeSearchResults,
    EpisodeStoreResult,
    Erasure,
    Fact,
    FactEvent,
    FactImportResult,
    FactsDeleted,
    FactSearchResults,
    ForgetPolicy,
    ForgetRun,
    Health,
    ImportReport,
    KBSearchResults,
    Message,
    RememberResult,
    ToolResult,
    UploadResult,
    WhoAmI,
    from_json,
)

API = "/api/v1"
Moment = datetime | str  # a datetime (aware, or taken as UTC by the server) or an ISO 8601 string
Choices = str | Sequence[str]  # one value, or several ("active,pending" or ["active", "pending"])
FACTS_IMPORT_BATCH = 1000  # the server's FACTS_IMPORT_MAX_BATCH default


# --- facts -------------------------------------------------------------------------------------------------------


def facts_remember(
    user_id: str,
    content: str,
    *,
    category: str | None = None,
    confidence: float | None = None,
    pinned: bool | None = None,
    occurred_at: Moment | None = None,
    metadata: Mapping[str, Any] | None = None,
    agent_id: str | None = None,
) -> Request[RememberResult]:
    """Save a fact about a user: deduplicated against the user's facts (merged into a near-identical one), checked
    for contradictions (an older fact superseded, or a conflict opened), or left pending review. `category`:
    preference, profile, project, decision, procedure or other."""
    body = fields(
        user_id=user_id,
        content=content,
        category=category,
        confidence=confidence,
        pinned=pinned,
        occurred_at=occurred_at,
        metadata=metadata,
        agent_id=agent_id,
    )
    return Request("POST", f"{API}/facts", object_of(RememberResult), json=body)


def facts_list(
    user_id: str,
    *,
    status: Choices | None = None,
    category: Choices | None = None,
    source: Choices | None = None,
    pinned: bool | None = None,
    agent_id: str | None = None,
    validity: str | None = None,
    filters: Filter | None = None,
    page_size: int | None = None,
) -> PageRequest[Fact]:
    """Iterate over a user's facts, newest first, fetching pages as needed. `validity`: current (the default),
    superseded or all; `status`, `category`, `source`: one value or several; `filters`: the filter language
    ({"metadata.project": "atlas"}, with AND / OR / NOT); `page_size` up to 500."""
    params = fields(
        user_id=user_id,
        status=choices(status),
        category=choices(category),
        source=choices(source),
        pinned=query_bool(pinned),
        agent_id=agent_id,
        validity=validity,
        filters=filter_text(filters),
        limit=page_size,
    )
    return PageRequest(f"{API}/facts", Fact, params)


def facts_get(fact_id: int) -> Request[Fact]:
    return Request("GET", f"{API}/facts/{segment(fact_id)}", object_of(Fact), idempotent=True)


def facts_update(
    fact_id: int,
    *,
    content: str = NOT_GIVEN,
    category: str = NOT_GIVEN,
    confidence: float = NOT_GIVEN,
    pinned: bool = NOT_GIVEN,
    occurred_at: Moment | None = NOT_GIVEN,
    metadata: Mapping[str, Any] = NOT_GIVEN,
    agent_id: str = NOT_GIVEN,
) -> Request[Fact]:
    """Change some of a fact's fields (only those given; `occurred_at=None` clears it). New content is embedded
    again."""
    body = patch_fields(
        content=content,
        category=category,
        confidence=confidence,
        pinned=pinned,
        occurred_at=occurred_at,
        metadata=metadata,
        agent_id=agent_id,
    )
    return Request("PATCH", f"{API}/facts/{segment(fact_id)}", object_of(Fact), json=body)


def facts_delete(fact_id: int) -> Request[None]:
    return Request("DELETE", f"{API}/facts/{segment(fact_id)}", nothing, idempotent=True)


def facts_delete_where(user_id: str, filters: Filter, *, agent_id: str | None = None) -> Request[FactsDeleted]:
    """Delete the user's facts `filters` selects (current, pending and history alike); the ids deleted come back."""
    body = fields(user_id=user_id, filters=filters, agent_id=agent_id)
    return Request("POST", f"{API}/facts/delete", object_of(FactsDeleted), json=body)


def facts_history(fact_id: int) -> Request[list[FactEvent]]:
    """The fact's events, oldest first: created, merged, superseded, approved, edited, ..."""
    return Request("GET", f"{API}/facts/{segment(fact_id)}/history", list_of(FactEvent), idempotent=True)


def facts_approve(fact_id: int) -> Request[Fact]:
    """Approve a pending fact: it becomes active, and the proposal stored on it (merge, supersede) is applied."""
    return Request("POST", f"{API}/facts/{segment(fact_id)}/approve", object_of(Fact))


def facts_reject(fact_id: int) -> Request[Fact]:
    return Request("POST", f"{API}/facts/{segment(fact_id)}/reject", object_of(Fact))


def facts_restore(fact_id: int) -> Request[Fact]:
    """Bring an archived fact back (until it is purged) with the status it had before."""
    return Request("POST", f"{API}/facts/{segment(fact_id)}/restore", object_of(Fact))


def facts_undo_supersession(fact_id: int) -> Request[Fact]:
    """The fact was superseded wrongly: make it current again and reject the fact that superseded it."""
    return Request("POST", f"{API}/facts/{segment(fact_id)}/undo-supersession", object_of(Fact))


def facts_import(facts: Iterable[Mapping[str, Any]], *, batch_size: int = FACTS_IMPORT_BATCH) -> Plan[FactImportResult]:
    """Bulk-load facts as given (no deduplication or judging): each a mapping with user_id, content and optionally
    category, confidence, status (active or pending), pinned, occurred_at, valid_from, metadata, agent_id.
    Sent in batches of `batch_size` (the server takes up to FACTS_IMPORT_MAX_BATCH, 1,000 by default, per request);
    each batch is imported whole or not at all, so after an error the batches before it are stored."""
    imported: list[int] = []
    batch: list[dict[str, Any]] = []
    for fact in facts:
        batch.append(fields(**fact))
        if len(batch) == batch_size:
            imported += (yield _facts_import_batch(batch)).ids
            batch = []
    if batch:
        imported += (yield _facts_import_batch(batch)).ids
    return FactImportResult(imported=len(imported), ids=imported, raw={"imported": len(imported), "ids": imported})


def _facts_import_batch(batch: list[dict[str, Any]]) -> Request[FactImportResult]:
    return Request("POST", f"{API}/facts/import", object_of(FactImportResult), json={"facts": batch})


def facts_search(
    user_id: str,
    query: str,
    *,
    limit: int | None = None,
    categories: Sequence[str] | None = None,
    agent_id: str | None = None,
    include_pending: bool | None = None,
    as_of: Moment | None = None,
    occurred_after: Moment | None = None,
    occurred_before: Moment | None = None,
    mmr_lambda: float | None = None,
    half_life_days: float | None = None,
    filters: Filter | None = None,
) -> Request[FactSearchResults]:
    """Hybrid search (meaning and keywords, weighted by confidence and recency, diversified) over a user's facts.
    `as_of`: the facts that were valid at that moment; `occurred_after`/`occurred_before`: by when it happened;
    `filters`: only the facts the filter selects (the filter language, as in `facts.list`)."""
    body = fields(
        user_id=user_id,
        query=query,
        limit=limit,
        categories=list(categories) if categories is not None else None,
        agent_id=agent_id,
        include_pending=include_pending,
        as_of=as_of,
        occurred_after=occurred_after,
        occurred_before=occurred_before,
        mmr_lambda=mmr_lambda,
        half_life_days=half_life_days,
        filters=filters,
    )
    return Request("POST", f"{API}/facts/search", object_of(FactSearchResults), json=body, idempotent=True)


# --- context -----------------------------------------------------------------------------------------------------


def context_build(
    user_id: str,
    query: str,
    *,
    max_tokens: int | None = None,
    include_documents: bool | None = None,
    fact_limit: int | None = None,
    document_limit: int | None = None,
    categories: Sequence[str] | None = None,
    agent_id: str | None = None,
    filters: Filter | None = None,
) -> Request[Context]:
    """Before an LLM call: the user's facts and the knowledge-base passages relevant to `query`, as prompt-ready
    text within `max_tokens`. The facts it injects count as used (they live longer under the forget policy).
    `filters`: only facts the filter selects (the filter language, as in `facts.list`)."""
    body = fields(
        user_id=user_id,
        query=query,
        max_tokens=max_tokens,
        include_documents=include_documents,
        fact_limit=fact_limit,
        document_limit=document_limit,
        categories=list(categories) if categories is not None else None,
        agent_id=agent_id,
        filters=filters,
    )
    return Request("POST", f"{API}/context", object_of(Context), json=body, idempotent=True)


# --- episodes ----------------------------------------------------------------------------------------------------

MessageLike = Mapping[str, Any] | Message


def episodes_store(
    user_id: str,
    session_id: str,
    messages: Iterable[MessageLike],
    *,
    agent_id: str | None = None,
    extract: bool | None = None,
    metadata: Mapping[str, Any] | None = None,
) -> Request[EpisodeStoreResult]:
    """Store a conversation (its messages: role user, assistant, system or tool; content; optional timestamp);
    facts are extracted from it in the background unless `extract=False`, each carrying the episode's `metadata`.
    Post the whole session after every turn: messages already stored are skipped, so nothing is duplicated (which
    is also why this call is retried safely)."""
    messages = [_message(message) for message in messages]
    body = fields(
        user_id=user_id,
        session_id=session_id,
        messages=messages,
        agent_id=agent_id,
        extract=extract,
        metadata=dict(metadata) if metadata is not None else None,
    )
    return Request("POST", f"{API}/episodes", object_of(EpisodeStoreResult), json=body, idempotent=True)


def _message(message: MessageLike) -> dict[str, Any]:
    if isinstance(message, Message):
        return fields(role=message.role, content=message.content, timestamp=message.timestamp)
    return fields(**message)


def episodes_list(
    user_id: str,
    *,
    session_id: str | None = None,
    agent_id: str | None = None,
    status: Choices | None = None,
    page_size: int | None = None,
) -> PageRequest[Episode]:
    """Iterate over a user's episodes (without their messages), newest first. `status`: extraction status(es)."""
    params = fields(user_id=user_id, session_id=session_id, agent_id=agent_id, status=choices(status), limit=page_size)
    return PageRequest(f"{API}/episodes", Episode, params)


def episodes_get(episode_id: int) -> Request[Episode]:
    """An episode with its messages (in order) and the facts extracted from it."""
    return Request("GET", f"{API}/episodes/{segment(episode_id)}", object_of(Episode), idempotent=True)


def episodes_search(
    user_id: str,
    query: str,
    *,
    limit: int | None = None,
    session_id: str | None = None,
    agent_id: str | None = None,
) -> Request[EpisodeSearchResults]:
    """Search a user's episodes by their summaries' meaning and by keywords over what was said."""
    body = fields(user_id=user_id, query=query, limit=limit, session_id=session_id, agent_id=agent_id)
    return Request("POST", f"{API}/episodes/search", object_of(EpisodeSearchResults), json=body, idempotent=True)


def episodes_retry(episode_id: int) -> Request[Episode]:
    """Queue a failed (or stalled) episode's fact extraction now."""
    return Request("POST", f"{API}/episodes/{segment(episode_id)}/retry", object_of(Episode))


# --- knowledge base ----------------------------------------------------------------------------------------------

FileLike = str | os.PathLike[str] | bytes | IO[bytes]


def kb_upload(
    doc_id: str | None = None,
    text: str | None = None,
    *,
    file: FileLike | None = None,
    filename: str | None = None,
    title: str | None = None,
    content_type: str | None = None,
) -> Request[UploadResult]:
    """Index a document: a `text` (content_type markdown, the default, text, rst, html or code) under `doc_id`, or a
    `file` (a path, bytes or a binary file; its type from the file name's extension: .md, .txt, .pdf, ...) whose
    doc_id defaults to its name. Uploading the same doc_id again replaces the document (or leaves it unchanged)."""
    path = f"{API}/kb/documents"
    parse = object_of(UploadResult)
    if (text is None) == (file is None):
        raise ValueError("kb.upload takes either text (with doc_id) or file")
    if text is not None:
        if doc_id is None:
            raise ValueError("kb.upload with text needs a doc_id")
        body = fields(doc_id=doc_id, text=text, title=title, content_type=content_type)
        return Request("POST", path, parse, json=body, idempotent=True)
    if content_type is not None:
        raise ValueError("a file's type comes from its name's extension: pass filename=..., not content_type")
    name, data = _file_contents(file, filename)
    return Request(
        "POST",
        path,
        parse,
        files={"file": (name, data)},
        data=fields(doc_id=doc_id, title=title),
        idempotent=True,  # the same doc_id and bytes again: "unchanged"
    )


def _file_contents(file: Any, filename: str | None) -> tuple[str, bytes]:
    """The name and bytes of an upload, read once so that a retry sends them again."""
    if isinstance(file, str | os.PathLike):
        path = Path(file)
        return filename or path.name, path.read_bytes()
    if isinstance(file, bytes):
        if filename is None:
            raise ValueError("kb.upload with bytes needs a filename (its extension gives the document's type)")
        return filename, file
    name = filename or Path(getattr(file, "name", "") or "").name
    if not name:
        raise ValueError("kb.upload of an unnamed file object needs a filename")
    return name, file.read()


def kb_list(*, path_prefix: str | None = None, page_size: int | None = None) -> PageRequest[Document]:
    """Iterate over the tenant's documents in doc_id order (`path_prefix` keeps those whose source path starts
    with it)."""
    return PageRequest(f"{API}/kb/documents", Document, fields(path_prefix=path_prefix, limit=page_size))


def kb_get(document_id: int) -> Request[Document]:
    """A document with its chunks and, while it is being indexed, the worker's progress."""
    return Request("GET", f"{API}/kb/documents/{segment(document_id)}", object_of(Document), idempotent=True)


def kb_delete(document_id: int) -> Request[None]:
    return Request("DELETE", f"{API}/kb/documents/{segment(document_id)}", nothing, idempotent=True)


def kb_retry(document_id: int) -> Request[Document]:
    """Queue a failed (or stalled) document's indexing again (ConflictError when it is ready)."""
    return Request("POST", f"{API}/kb/documents/{segment(document_id)}/retry", object_of(Document))


def kb_search(
    query: str,
    *,
    limit: int | None = None,
    doc_ids: Sequence[str] | None = None,
    path_prefix: str | None = None,
) -> Request[KBSearchResults]:
    """Search the knowledge base (shared by the tenant's users): passages with their citations."""
    body = fields(
        query=query, limit=limit, doc_ids=list(doc_ids) if doc_ids is not None else None, path_prefix=path_prefix
    )
    return Request("POST", f"{API}/kb/search", object_of(KBSearchResults), json=body, idempotent=True)


# --- conflicts ---------------------------------------------------------------------------------------------------


def conflicts_list(
    *, user_id: str | None = None, status: str | None = None, page_size: int | None = None
) -> PageRequest[Conflict]:
    """Iterate over the conflicts between facts (`status`: open or resolved), newest first."""
    return PageRequest(f"{API}/conflicts", Conflict, fields(user_id=user_id, status=status, limit=page_size))


def conflicts_resolve(conflict_id: int, resolution: str, *, content: str | None = None) -> Request[Conflict]:
    """Settle a conflict: keep_new, keep_old, keep_both, or merge (with `content`, the text that replaces both)."""
    body = fields(resolution=resolution, content=content)
    return Request("POST", f"{API}/conflicts/{segment(conflict_id)}/resolve", object_of(Conflict), json=body)


# --- forgetting --------------------------------------------------------------------------------------------------


def forget_policy_get() -> Request[ForgetPolicy]:
    return Request("GET", f"{API}/forget-policy", object_of(ForgetPolicy), idempotent=True)


def forget_policy_replace(
    *,
    enabled: bool,
    max_unused_days: int | None,
    min_usage_count: int,
    max_facts_per_user: int | None,
    archive_retention_days: int,
    exempt_categories: Sequence[str],
) -> Request[ForgetPolicy]:
    """Set the whole policy (PUT). `max_unused_days=None` switches the unused rule off; `max_facts_per_user=None`:
    no cap."""
    body = patch_fields(
        enabled=enabled,
        max_unused_days=max_unused_days,
        min_usage_count=min_usage_count,
        max_facts_per_user=max_facts_per_user,
        archive_retention_days=archive_retention_days,
        exempt_categories=list(exempt_categories),
    )
    return Request("PUT", f"{API}/forget-policy", object_of(ForgetPolicy), json=body, idempotent=True)


def forget_policy_update(
    *,
    enabled: bool = NOT_GIVEN,
    max_unused_days: int | None = NOT_GIVEN,
    min_usage_count: int = NOT_GIVEN,
    max_facts_per_user: int | None = NOT_GIVEN,
    archive_retention_days: int = NOT_GIVEN,
    exempt_categories: Sequence[str] = NOT_GIVEN,
) -> Request[ForgetPolicy]:
    """Change some of the policy's rules (PATCH): only those given."""
    body = patch_fields(
        enabled=enabled,
        max_unused_days=max_unused_days,
        min_usage_count=min_usage_count,
        max_facts_per_user=max_facts_per_user,
        archive_retention_days=archive_retention_days,
        exempt_categories=exempt_categories if exempt_categories is NOT_GIVEN else list(exempt_categories),
    )
    return Request("PATCH", f"{API}/forget-policy", object_of(ForgetPolicy), json=body, idempotent=True)


def forget_policy_delete() -> Request[ForgetPolicy]:
    """Back to the server's defaults (the FORGET_* settings); answers the policy now in force."""
    return Request("DELETE", f"{API}/forget-policy", object_of(ForgetPolicy), idempotent=True)


def forget_policy_dry_run(*, as_of: Moment | None = None) -> Request[ForgetRun]:
    """What the policy would archive, evict and purge now (or at `as_of`), without changing anything."""
    return Request("POST", f"{API}/forget-policy/dry-run", object_of(ForgetRun), json=fields(as_of=as_of))


def forget_runs_list(*, dry_run: bool | None = None, page_size: int | None = None) -> PageRequest[ForgetRun]:
    """Iterate over the recorded forget runs, newest first (`dry_run=False`: the real ones only)."""
    return PageRequest(f"{API}/forget-runs", ForgetRun, fields(dry_run=query_bool(dry_run), limit=page_size))


def forget_runs_get(run_id: int) -> Request[ForgetRun]:
    return Request("GET", f"{API}/forget-runs/{segment(run_id)}", object_of(ForgetRun), idempotent=True)


# --- users -------------------------------------------------------------------------------------------------------


def users_erase(user_id: str) -> Request[Erasure]:
    """Erase everything the tenant holds about the user: facts with their history, conflicts, episodes, cached
    embeddings (idempotent: a second call deletes nothing)."""
    return Request("DELETE", f"{API}/users/{segment(user_id)}", object_of(Erasure), idempotent=True)


def users_export(user_id: str, *, filters: Filter | None = None) -> LinesRequest:
    """The user's memory as JSON Lines, read as it streams: a header record ({"type": "header", ...}), then one
    record per fact (with its history and validity), episode (with its messages) and conflict. With `filters`:
    the facts the filter selects and the conflicts between them, without episodes."""
    params = fields(filters=filter_text(filters))
    return LinesRequest(
        Request("GET", f"{API}/users/{segment(user_id)}/export", nothing, params=params, idempotent=True)
    )


def users_import(
    user_id: str,
    records: Iterable[Mapping[str, Any] | str | bytes] | str | bytes,
    *,
    content_type: str = "application/x-ndjson",
) -> Request[ImportReport]:
    """Import memories into the user from JSON Lines: records (mappings, such as those `users.export` yields, or
    Mem0 memories), lines (strings), or a whole body (str or bytes). A Mem0 JSON document (a list, or
    {"results": [...]} as its get_all answers) goes as bytes with `content_type="application/json"`. The facts are
    embedded again with the server's active model; the report counts what was created, merged and skipped. The
    whole body is checked first: a bad line is a ValidationError naming it, and nothing is imported."""
    body = records if isinstance(records, str | bytes) else b"".join(_line(record) for record in records)
    content = body.encode() if isinstance(body, str) else body
    return Request(
        "POST",
        f"{API}/users/{segment(user_id)}/import",
        object_of(ImportReport),
        content=content,
        headers={"Content-Type": content_type},
        idempotent=True,  # what the user already holds is merged or skipped: importing twice changes nothing
    )


def _line(record: Mapping[str, Any] | str | bytes) -> bytes:
    if isinstance(record, Mapping):
        return json.dumps(record, ensure_ascii=False).encode() + b"\n"
    line = record.encode() if isinstance(record, str) else record
    return line if line.endswith(b"\n") else line + b"\n"


# --- tools -------------------------------------------------------------------------------------------------------


def tools_list(*, format: str | None = None) -> Request[list[dict[str, Any]]]:  # noqa: A002 - the API's name
    """The memory tools' definitions for a model: `format` "openai" (function calling, the default) or "anthropic".
    Pass them as they are to the chat API's `tools`."""
    return Request(
        "GET", f"{API}/tools", lambda response: response.json()["tools"], params=fields(format=format), idempotent=True
    )


def tools_call(
    user_id: str,
    name: str,
    arguments: Mapping[str, Any] | str | None = None,
    *,
    agent_id: str | None = None,
) -> Request[ToolResult]:
    """Run one tool call the model made, for `user_id`: `arguments` as a mapping or the model's JSON string. A bad
    call answers a ToolResult with is_error=True (show its content to the model), not an exception."""
    body = fields(user_id=user_id, name=name, arguments={} if arguments is None else arguments, agent_id=agent_id)
    return Request("POST", f"{API}/tools/call", object_of(ToolResult), json=body)


# --- the server --------------------------------------------------------------------------------------------------


def whoami() -> Request[WhoAmI]:
    """Which tenant and key this client authenticates as: the quickest check that the key works."""
    return Request("GET", f"{API}/whoami", object_of(WhoAmI), idempotent=True)


def health() -> Request[Health]:
    """The server's health (no key needed). An unhealthy server's answer (503) is returned, not raised."""
    return Request("GET", "/api/health", _health, idempotent=True, answers=frozenset({503}))


def _health(response: httpx2.Response) -> Health:
    body = response.json()
    if "error" in body:  # not the health report: the server failed before it (an error in the API's shape)
        raise error_from_response(response, retry_after=retry_after(response))
    return from_json(Health, body)


def embedding_cache() -> Request[EmbeddingCacheStats]:
    """The tenant's embedding cache: hits and misses of the answering server process, rows stored."""
    return Request("GET", f"{API}/embedding-cache", object_of(EmbeddingCacheStats), idempotent=True)
