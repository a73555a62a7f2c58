"""Writes to the knowledge base: index documents (chunk, embed, replace atomically), delete and prune them.

Indexing is incremental: a document whose text and chunking parameters are unchanged costs two small reads and
no embedding call, and inside a changed document only chunk texts the embedding cache has not seen are embedded.

A long upload (over KB_INLINE_INDEX_MAX_CHARS) is not indexed on the request: its text is stored beside the
document (DocumentIndexing, status indexing) and the worker indexes it (document_index_queued), embedding in
batches; the new chunks replace the old ones in one transaction at the end, so searches see the previous version
until then, and a new document has no chunks (is not found) until it is ready.
"""

import fnmatch
import hashlib
import logging
import os
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field, replace
from datetime import timedelta
from http import HTTPStatus
from pathlib import Path

from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import connection, transaction
from django.db.models import F
from django.utils import timezone
from django_q.conf import Conf
from django_q.tasks import async_task

from ai.errors import AIProviderError
from ai.services import TENANT_TEXT, active_embedding_model, embed_texts
from core.backoff import retry_delay
from core.errors import ApplicationError
from core.locks import LockNamespace, is_locked, session_lock, xact_lock
from core.statistics import tenant_statistics_refresh_after_commit
from tenancy.models import Tenant

from .chunking import CONTENT_TYPES, MIN_MAX_TOKENS, Chunk, chunk_document
from .loaders import (
    SUPPORTED_EXTENSIONS,
    DocumentLoadError,
    LoadedDocument,
    UnsupportedFileType,
    load_bytes,
    load_document,
    resolve_content_type,
)
from .models import Document, DocumentIndexing, KBChunk, document_label
from .parsing import ParseLimits, parse_bounded, too_many_chunks
from .selectors import document_by_doc_id, document_chunks, document_get, documents_under_root

logger = logging.getLogger(__name__)
Status = Document.Status
INDEX_TASK = "kb.tasks.document_index"

CHUNKING_KEY = "_chunking"  # reserved Document.metadata key: the parameters the stored chunks were cut with
# Bump when kb.chunking changes how it cuts, so the next run re-chunks every document.
CHUNKER_VERSION = 2
CHUNK_INSERT_BATCH = 1000
# Fields describing a document that may change without its text changing (a moved tree, new metadata).
DESCRIPTIVE_FIELDS = ("title", "source_path", "content_type", "size_bytes", "metadata")
SKIPPED_DIRECTORIES = frozenset({"node_modules", "__pycache__", "site-packages", "venv"})
_HEADING_PATH_MAX = KBChunk._meta.get_field("heading_path").max_length
# Formats whose reading is more than decoding (a parser, a PDF's streams): an upload of one is read by the worker, in a
# bounded child process, never in the request.
READ_BY_WORKER = frozenset({"html", "pdf"})


@dataclass(frozen=True)
class IndexResult:
    doc_id: str
    outcome: str  # new | changed | unchanged
    document: Document | None  # None on a dry run
    chunks: int  # chunks written (on a dry run: that would be written); 0 when unchanged or queued
    written: bool  # whether the database was changed
    queued: bool = False  # left to the worker: the document is indexing (its chunks are still the previous ones)


# --- one document -----------------------------------------------------------------------------------------------


def document_index(
    *,
    tenant: Tenant,
    doc_id: str,
    text: str,
    content_type: str,
    title: str = "",
    source_path: str = "",
    metadata: dict | None = None,
    size_bytes: int | None = None,
    max_tokens: int = 400,
    overlap_tokens: int = 50,
    dry_run: bool = False,
    background: bool = False,
    queue_when_embedding_fails: bool = False,
) -> IndexResult:
    """Store `text` as the tenant's document `doc_id`, replacing its previous chunks in one transaction.

    Unchanged (same text, same chunking, chunks embedded by the active model): nothing is embedded or rewritten;
    only descriptive fields that differ (e.g. source_path after the tree moved) are updated in place.
    A dry run reads but writes nothing and embeds nothing. size_bytes defaults to the UTF-8 size of `text`.
    background: validate and store the text, and leave chunking and embedding to the worker (result.queued).
    queue_when_embedding_fails: an upload's text is not lost to an embedding outage: the worker indexes it later.
    """
    fields = _document_fields(
        text=text,
        content_type=content_type,
        title=title,
        source_path=source_path,
        metadata=metadata,
        size_bytes=size_bytes,
        max_tokens=max_tokens,
        overlap_tokens=overlap_tokens,
    )
    _validate(tenant=tenant, doc_id=doc_id, fields=fields, text=text, max_tokens=max_tokens, overlap=overlap_tokens)
    existing = document_by_doc_id(tenant=tenant, doc_id=doc_id)
    if existing is not None and _content_unchanged(tenant, existing, fields):
        if dry_run or not _descriptive_fields_differ(existing, fields):
            return IndexResult(doc_id, "unchanged", None if dry_run else existing, chunks=0, written=False)
        document = _document_describe(tenant=tenant, doc_id=doc_id, fields=fields)
        return IndexResult(doc_id, "unchanged", document, chunks=0, written=True)
    if background and not dry_run:
        return _document_queue(tenant=tenant, doc_id=doc_id, fields=fields, text=text)

    chunks = chunk_document(text, content_type=content_type, max_tokens=max_tokens, overlap_tokens=overlap_tokens)
    if len(chunks) > settings.KB_MAX_CHUNKS_PER_DOCUMENT:
        raise ValidationError({"text": too_many_chunks(len(chunks), settings.KB_MAX_CHUNKS_PER_DOCUMENT)})
    if dry_run:
        return IndexResult(doc_id, "changed" if existing else "new", None, chunks=len(chunks), written=False)
    rows = _chunk_rows(tenant, chunks, label=document_label(title=title, doc_id=doc_id))
    try:
        _embed(tenant, rows)  # before the transaction: a slow embedding call must not hold row locks
    except AIProviderError as exc:
        if not queue_when_embedding_fails:
            raise
        logger.warning("embedding unavailable, document %s left to the worker: %s", doc_id, exc.message)
        return _document_queue(tenant=tenant, doc_id=doc_id, fields=fields, text=text)
    document, outcome = _document_replace(tenant=tenant, doc_id=doc_id, fields=fields, rows=rows)
    return IndexResult(doc_id, outcome, document, chunks=len(rows), written=True)


def document_index_loaded(
    *,
    tenant: Tenant,
    doc_id: str,
    loaded: LoadedDocument,
    source_path: str = "",
    size_bytes: int | None = None,
    max_tokens: int = 400,
    overlap_tokens: int = 50,
    dry_run: bool = False,
    background: bool = False,
    queue_when_embedding_fails: bool = False,
) -> IndexResult:
    """document_index for what kb.loaders read; a code file's language goes into metadata."""
    return document_index(
        tenant=tenant,
        doc_id=doc_id,
        text=loaded.text,
        content_type=loaded.content_type,
        title=loaded.title,
        source_path=source_path,
        metadata={"language": loaded.language} if loaded.language else {},
        size_bytes=size_bytes,
        max_tokens=max_tokens,
        overlap_tokens=overlap_tokens,
        dry_run=dry_run,
        background=background,
        queue_when_embedding_fails=queue_when_embedding_fails,
    )


def document_upload(
    *,
    tenant: Tenant,
    doc_id: str,
    data: bytes,
    filename: str,
    content_type: str | None = None,
    title: str = "",
) -> IndexResult:
    """Index uploaded bytes (a file, or text posted to the API) as the tenant's document `doc_id`.

    `filename` picks the type by extension unless content_type is given. Refused with an ApplicationError:
    over KB_MAX_UPLOAD_BYTES (413 payload_too_large), a type the loaders do not read (415
    unsupported_file_type), text they cannot read, e.g. not UTF-8 (400 unreadable_document).
    An HTML or PDF file is stored as it came and read by the worker in a bounded child process (queued: a file it
    cannot read, or one that breaks a limit, ends failed with the reason). A text longer than
    KB_INLINE_INDEX_MAX_CHARS is validated and stored, and indexed by the worker (queued), as is a shorter one
    while the embedding provider fails.
    """
    limit = settings.KB_MAX_UPLOAD_BYTES
    if len(data) > limit:
        raise ApplicationError(
            f"The document is {len(data):,} bytes; the limit is {limit:,} bytes (KB_MAX_UPLOAD_BYTES).",
            code="payload_too_large",
            status_code=HTTPStatus.REQUEST_ENTITY_TOO_LARGE,
            details={"size_bytes": len(data), "max_bytes": limit},
        )
    try:
        resolved = resolve_content_type(filename, content_type)
        _refuse_over_format_limit(len(data), resolved)
        if resolved in READ_BY_WORKER:
            return _document_upload_raw(
                tenant=tenant, doc_id=doc_id, data=data, filename=filename, content_type=resolved, title=title
            )
        loaded = load_bytes(data, filename=filename, content_type=content_type)
    except UnsupportedFileType as error:
        raise ApplicationError(
            f"Cannot index {error.filename}: {error.reason}. Supported extensions: "
            f"{', '.join(sorted(SUPPORTED_EXTENSIONS))} (and none, read as text).",
            code="unsupported_file_type",
            status_code=HTTPStatus.UNSUPPORTED_MEDIA_TYPE,
        ) from error
    except DocumentLoadError as error:
        raise ApplicationError(f"Cannot read {error.filename}: {error.reason}.", code="unreadable_document") from error
    if title:
        loaded = replace(loaded, title=title)
    background = len(loaded.text) > settings.KB_INLINE_INDEX_MAX_CHARS
    return document_index_loaded(
        tenant=tenant,
        doc_id=doc_id,
        loaded=loaded,
        size_bytes=len(data),
        background=background,
        queue_when_embedding_fails=True,
    )


def _refuse_over_format_limit(size: int, content_type: str) -> None:
    limit = settings.KB_MAX_UPLOAD_BYTES_BY_TYPE.get(content_type)
    if limit is not None and size > limit:
        raise ApplicationError(
            f"The {content_type} document is {size:,} bytes; the limit for {content_type} is {limit:,} bytes "
            "(KB_MAX_UPLOAD_BYTES_BY_TYPE).",
            code="payload_too_large",
            status_code=HTTPStatus.REQUEST_ENTITY_TOO_LARGE,
            details={"size_bytes": size, "max_bytes": limit},
        )


def _document_upload_raw(
    *, tenant: Tenant, doc_id: str, data: bytes, filename: str, content_type: str, title: str
) -> IndexResult:
    """Store an uploaded file as it came, for the worker to read (document_index_queued). The same bytes as the ready
    document's are unchanged: nothing is read or queued (a new title is still taken)."""
    fields = _document_fields(
        text="",
        content_type=content_type,
        title=title,
        source_path="",
        metadata=None,
        size_bytes=len(data),
        max_tokens=400,
        overlap_tokens=50,
    )
    fields["content_hash"] = hashlib.sha256(data).hexdigest()  # of the file: known before it is read
    _validate(tenant=tenant, doc_id=doc_id, fields=fields, text="", max_tokens=400, overlap=50)
    existing = document_by_doc_id(tenant=tenant, doc_id=doc_id)
    if existing is not None and _content_unchanged(tenant, existing, fields):
        if not title or title == existing.title:
            return IndexResult(doc_id, "unchanged", existing, chunks=0, written=False)
        described = {name: getattr(existing, name) for name in DESCRIPTIVE_FIELDS} | {"title": title}
        document = _document_describe(tenant=tenant, doc_id=doc_id, fields=described)
        return IndexResult(doc_id, "unchanged", document, chunks=0, written=True)
    return _document_queue(tenant=tenant, doc_id=doc_id, fields=fields, text="", raw=data, filename=filename)


def document_reindex(*, tenant: Tenant, document_id: int) -> IndexResult:
    """Re-read the document's source file and index it again with the chunking it was cut with.

    Raises Http404 for a document of another tenant, ApplicationError when there is no file to read (uploaded
    through the API) or it cannot be read (gone, unsupported, broken) or stored.
    """
    document = document_get(tenant=tenant, document_id=document_id)
    if not document.source_path:
        message = f"{document.doc_id} was uploaded, not indexed from a file: nothing to re-read."
        raise ApplicationError(message, code="no_source_file")
    path = Path(document.source_path)
    chunking = document.metadata.get(CHUNKING_KEY) or {}
    try:
        return document_index_loaded(
            tenant=tenant,
            doc_id=document.doc_id,
            loaded=load_document(path),
            source_path=str(path),
            size_bytes=_file_size(path),
            max_tokens=chunking.get("max_tokens", 400),
            overlap_tokens=chunking.get("overlap_tokens", 50),
        )
    except DocumentLoadError as error:
        raise ApplicationError(f"Cannot read {error.filename}: {error.reason}.", code="unreadable_document") from error
    except ValidationError as error:
        raise ApplicationError(_validation_reason(error), code="validation_error") from error


def document_delete_by_id(*, tenant: Tenant, document_id: int) -> None:
    """Delete one document of `tenant` and its chunks; Http404 when the tenant has no such document."""
    with transaction.atomic():
        document = document_get(tenant=tenant, document_id=document_id)
        document.delete()


def document_delete(*, tenant: Tenant, doc_id: str) -> bool:
    """Delete the document and its chunks; False when the tenant has no such document."""
    with transaction.atomic():
        deleted, _ = Document.objects.filter(tenant=tenant, doc_id=doc_id).delete()
    return deleted > 0


def documents_prune(
    *,
    tenant: Tenant,
    keep_doc_ids: Iterable[str],
    source_root: Path | str,
    keep_source_paths: Iterable[str] = (),
    dry_run: bool = False,
) -> list[str]:
    """Delete the tenant's documents under the directory `source_root` that are in neither keep list.

    keep_source_paths spares documents by their file (index_docs passes the files that still exist, whatever
    their doc id or the filters of the run). Returns the (would-be) deleted doc ids, sorted. Documents outside
    the root and of other tenants are never touched.
    """
    keep_ids, keep_paths = set(keep_doc_ids), set(keep_source_paths)
    with transaction.atomic():
        candidates = documents_under_root(tenant=tenant, source_root=source_root).select_for_update().order_by("pk")
        # Compared in Python: the keep lists may hold more values than a query can take as parameters.
        doomed = {
            pk: doc_id
            for pk, doc_id, source_path in candidates.values_list("pk", "doc_id", "source_path")
            if doc_id not in keep_ids and source_path not in keep_paths
        }
        if doomed and not dry_run:
            Document.objects.filter(tenant=tenant, pk__in=list(doomed)).delete()
    return sorted(doomed.values())


def _document_fields(
    *,
    text: str,
    content_type: str,
    title: str,
    source_path: str,
    metadata: dict | None,
    size_bytes: int | None,
    max_tokens: int,
    overlap_tokens: int,
) -> dict:
    chunking = {"version": CHUNKER_VERSION, "max_tokens": max_tokens, "overlap_tokens": overlap_tokens}
    return {
        "title": title,
        "source_path": source_path,
        "content_type": content_type,
        "content_hash": _sha256(text),
        "size_bytes": len(text.encode()) if size_bytes is None else size_bytes,
        "metadata": {**(metadata or {}), CHUNKING_KEY: chunking},
    }


def chunking_problems(*, max_tokens: int, overlap_tokens: int) -> dict[str, str]:
    """What is wrong with these chunking parameters, by parameter ({} when nothing is)."""
    if max_tokens < MIN_MAX_TOKENS:
        return {"max_tokens": f"Must be at least {MIN_MAX_TOKENS}."}
    if not 0 <= overlap_tokens < max_tokens:
        return {"overlap_tokens": f"Must be at least 0 and less than max_tokens ({max_tokens})."}
    return {}


def _validate(*, tenant: Tenant, doc_id: str, fields: dict, text: str, max_tokens: int, overlap: int) -> None:
    """Refuse bad input before any embedding call is paid for."""
    errors: dict[str, str] = {}
    if fields["content_type"] not in CONTENT_TYPES:
        errors["content_type"] = f"Must be one of {', '.join(sorted(CONTENT_TYPES))}."
    if "\x00" in text:
        errors["text"] = "Must not contain NUL characters."
    errors |= chunking_problems(max_tokens=max_tokens, overlap_tokens=overlap)
    if errors:
        raise ValidationError(errors)
    Document(tenant=tenant, doc_id=doc_id, **fields).full_clean(exclude=["tenant"], validate_constraints=False)


def _content_unchanged(tenant: Tenant, document: Document, fields: dict) -> bool:
    return (
        document.status == Status.READY  # else its chunks are not (yet) those of its fields
        and document.content_hash == fields["content_hash"]
        and document.metadata.get(CHUNKING_KEY) == fields["metadata"][CHUNKING_KEY]
        # Chunks embedded by another model are invisible to search: re-index them.
        and not document_chunks(tenant=tenant, document=document)
        .exclude(embedding_model=active_embedding_model())
        .exists()
    )


def _descriptive_fields_differ(document: Document, fields: dict) -> bool:
    return any(getattr(document, name) != fields[name] for name in DESCRIPTIVE_FIELDS)


def _chunk_rows(tenant: Tenant, chunks: Sequence[Chunk], *, label: str) -> list[KBChunk]:
    rows = [
        KBChunk(
            tenant=tenant,
            ordinal=ordinal,
            text=chunk.text,
            heading_path=_fit_heading_path(chunk.heading_path),
            line_start=chunk.line_start,
            line_end=chunk.line_end,
            token_count=chunk.token_count,
            content_hash=_sha256(chunk.text),
        )
        for ordinal, chunk in enumerate(chunks)
    ]
    for row in rows:
        row.refresh_search_text(label)
    return rows


def _embed(tenant: Tenant, rows: list[KBChunk]) -> None:
    """One embed_texts call for the document; it batches, and the cache spares chunks whose text the tenant's
    documents have had before. The chunks are the tenant's text, not one user's: a user's erasure keeps them."""
    model_name = active_embedding_model()
    vectors = embed_texts([row.embedding_text() for row in rows], tenant=tenant, user_id=TENANT_TEXT)
    for row, vector in zip(rows, vectors, strict=True):
        row.embedding = vector
        row.embedding_model = model_name


def _document_replace(*, tenant: Tenant, doc_id: str, fields: dict, rows: list[KBChunk]) -> tuple[Document, str]:
    """Upsert the document and swap its chunks in one transaction: searches see the old or the new version."""
    with transaction.atomic():
        document = _document_locked(tenant, doc_id)
        outcome = "new" if document is None or _never_indexed(document) else "changed"
        document = _document_save(
            document or Document(tenant=tenant, doc_id=doc_id), {**fields, "status": Status.READY, "error": ""}
        )
        # A text still waiting for the worker is older than this one: its run finds it gone and stops.
        DocumentIndexing.objects.filter(document=document).delete()
        _chunks_swap(tenant, document, rows)
        tenant_statistics_refresh_after_commit(models=[KBChunk, Document], tenant_id=tenant.pk)
    return document, outcome


def _chunks_swap(tenant: Tenant, document: Document, rows: list[KBChunk]) -> None:
    KBChunk.objects.filter(tenant=tenant, document=document).delete()
    for row in rows:
        row.document = document
    KBChunk.objects.bulk_create(rows, batch_size=CHUNK_INSERT_BATCH)


def _never_indexed(document: Document) -> bool:
    # The chunking key names what the stored chunks were cut with: a document queued before it ever had chunks
    # has none.
    return CHUNKING_KEY not in document.metadata


def _document_describe(*, tenant: Tenant, doc_id: str, fields: dict) -> Document | None:
    """Update the descriptive fields of an unchanged document, leaving its chunks alone."""
    with transaction.atomic():
        document = _document_locked(tenant, doc_id)
        if document is None:  # deleted meanwhile: nothing left to describe
            return None
        old_label = document_label(title=document.title, doc_id=doc_id)
        descriptive = {name: fields[name] for name in DESCRIPTIVE_FIELDS}
        document = _document_save(document, descriptive, update_fields=[*DESCRIPTIVE_FIELDS, "updated_at"])
        label = document_label(title=document.title, doc_id=doc_id)
        if label != old_label:  # the chunks' keyword text names the document
            chunks = list(document_chunks(tenant=tenant, document=document).only("pk", "heading_path", "text"))
            for chunk in chunks:
                chunk.refresh_search_text(label)
            KBChunk.objects.bulk_update(chunks, ["search_text"], batch_size=CHUNK_INSERT_BATCH)
        return document


def _document_locked(tenant: Tenant, doc_id: str) -> Document | None:
    """The document row, locked; also serialises two writers of a doc id that does not exist yet."""
    xact_lock(LockNamespace.KB_DOCUMENT, tenant.pk, doc_id)
    return Document.objects.select_for_update().filter(tenant=tenant, doc_id=doc_id).first()


def _document_save(document: Document, fields: dict, update_fields: list[str] | None = None) -> Document:
    for name, value in fields.items():
        setattr(document, name, value)
    document.full_clean(exclude=["tenant"], validate_constraints=False)
    document.save(update_fields=update_fields)
    return document


def _fit_heading_path(heading_path: str) -> str:
    # Deeply nested long headings can exceed the column; the innermost headings are the ones cut.
    if len(heading_path) <= _HEADING_PATH_MAX:
        return heading_path
    return heading_path[: _HEADING_PATH_MAX - 1] + "…"


def _sha256(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


# --- indexing by the worker --------------------------------------------------------------------------------------


def _document_queue(
    *, tenant: Tenant, doc_id: str, fields: dict, text: str, raw: bytes | None = None, filename: str = ""
) -> IndexResult:
    """Store the text (or the file to read, `raw`) for the worker and queue its indexing after commit; the document
    shows status indexing.

    The same text already waiting (or failed: a re-upload retries it) is not queued twice."""
    with transaction.atomic():
        document = _document_locked(tenant, doc_id)
        if document is None:
            unindexed = {**fields, "metadata": _without_chunking(fields["metadata"]), "status": Status.INDEXING}
            document = _document_save(Document(tenant=tenant, doc_id=doc_id), unindexed)
        outcome = "new" if _never_indexed(document) else "changed"
        job = DocumentIndexing.objects.select_for_update().filter(document=document).first()
        if job is not None and job.fields == fields and document.status == Status.INDEXING:
            return IndexResult(doc_id, outcome, document, chunks=0, written=False, queued=True)
        if job is None:
            job = DocumentIndexing(document=document, tenant=tenant, version=0)
        job.text, job.raw, job.filename = text, raw, filename[: DocumentIndexing._meta.get_field("filename").max_length]
        job.fields, job.version = fields, job.version + 1
        _job_restart(document, job)
    return IndexResult(doc_id, outcome, document, chunks=0, written=True, queued=True)


def _job_restart(document: Document, job: DocumentIndexing) -> None:
    """A fresh budget of attempts, status indexing, queued after commit (the caller holds the transaction)."""
    job.attempts = job.chunks_total = job.chunks_embedded = 0
    job.next_attempt_at = timezone.now() + timedelta(seconds=settings.KB_INDEX_STALL_SECONDS)
    job.save()
    document.status, document.error = Status.INDEXING, ""
    document.save(update_fields=["status", "error", "updated_at"])
    document_id = document.pk
    transaction.on_commit(lambda: _enqueue(document_id), robust=Conf.SYNC)


def _enqueue(document_id: int) -> bool:
    """Queue the document's indexing; False when the broker cannot take it (the sweep queues it later)."""
    try:
        async_task(INDEX_TASK, document_id, task_name=f"kb_document_index-{document_id}", group="kb")
    except Exception as exc:  # noqa: BLE001 - whatever the broker raises (redis, database), the answer is the same
        if Conf.SYNC:  # the task ran inline (the tests): this is its own failure
            raise
        logger.warning("document %s stored, its indexing not queued (the sweep will): %s", document_id, exc)
        # Due at once: the next sweep (every minute) queues it as soon as the broker is back.
        DocumentIndexing.objects.filter(pk=document_id).update(next_attempt_at=timezone.now())
        return False
    return True


def _without_chunking(metadata: dict) -> dict:
    return {key: value for key, value in metadata.items() if key != CHUNKING_KEY}


def document_index_retry(*, tenant: Tenant, document_id: int) -> Document:
    """Queue the indexing of a failed document again, with a fresh budget of attempts (or a stalled one at once).

    Http404 for a document of another tenant; 409 when there is nothing to retry (it is ready)."""
    with transaction.atomic():
        document = document_get(tenant=tenant, document_id=document_id)
        document = _document_locked(tenant, document.doc_id)
        job = DocumentIndexing.objects.select_for_update().defer("text", "raw").filter(document=document).first()
        if job is None or document.status == Status.READY:
            raise ApplicationError(
                f"Only a failed or unfinished indexing can be retried; this document is {document.status}.",
                code="conflict",
                status_code=HTTPStatus.CONFLICT,
            )
        _job_restart(document, job)
    return document


def documents_indexing_requeue() -> int:
    """Queue again every indexing that is due: retries whose backoff has passed, and runs lost on the way (the
    broker was down, a worker died). A run still alive is left alone. Across tenants: the scheduler runs it.
    Returns how many were queued; a broker still down leaves the rest for the next run."""
    now = timezone.now()
    due = DocumentIndexing.objects.filter(next_attempt_at__lte=now, document__status=Status.INDEXING)
    queued = 0
    for document_id, due_at in list(due.order_by("next_attempt_at").values_list("document_id", "next_attempt_at")):
        if is_locked(LockNamespace.KB_DOCUMENT, *_run_lock(document_id)):
            continue  # a run is alive: it sets the next attempt itself
        if not _enqueue(document_id):
            break  # the broker is down: every later one would fail the same way
        # Pushed back, so the next sweeps wait for this run; unless the run already set it (claimed, or failed).
        DocumentIndexing.objects.filter(pk=document_id, next_attempt_at=due_at).update(
            next_attempt_at=now + timedelta(seconds=settings.KB_INDEX_STALL_SECONDS)
        )
        queued += 1
    return queued


def _run_lock(document_id: int) -> tuple[str, int]:
    return ("indexing", document_id)  # hashed: never the key of (tenant id, doc id) that writers take


def document_index_queued(*, document_id: int) -> str:
    """The worker's run (the django-q task): chunk and embed the document's waiting text in batches of
    KB_INDEX_BATCH_CHUNKS (progress written after each), then swap the chunks in one transaction and mark it ready.

    Idempotent: chunks are written only by the swap, so a run that dies mid-way leaves the previous chunks and no
    partial ones; the vectors it made are in the embedding cache, so the next run embeds only the rest. Runs of
    one document never overlap. A failure is kept on the document (error) and retried with backoff by the sweep;
    after KB_INDEX_MAX_ATTEMPTS runs the document is failed until retried (or uploaded again).
    Returns what happened: ready, superseded (a newer text came meanwhile), failed, retrying, running, idle."""
    with session_lock(LockNamespace.KB_DOCUMENT, *_run_lock(document_id), wait=False) as acquired:
        if not acquired:
            return "running"
        version = _claim(document_id)
        if version is None:
            return "idle"
        job = DocumentIndexing.objects.select_related("document", "tenant").filter(pk=document_id).first()
        if job is None:  # replaced inline or deleted since the claim
            return "idle"
        try:
            rows = _rows_embedded(job)
        except DocumentLoadError as exc:  # the file itself: reading it again would fail the same way
            logger.warning("document %s cannot be read: %s", document_id, exc.reason)
            return _record_failure(document_id, version, exc, permanent=True)
        except Exception as exc:
            logger.warning("indexing of document %s failed (attempt %s): %s", document_id, job.attempts, exc)
            return _record_failure(document_id, version, exc)
        return _publish(job, rows)


def _claim(document_id: int) -> int | None:
    """One attempt more, and the stall timeout from now; the text's version, or None when nothing is waiting."""
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(
            """
            UPDATE kb_documentindexing i
            SET attempts = attempts + 1, next_attempt_at = %(stalled_at)s, chunks_embedded = 0
            FROM kb_document d
            WHERE i.document_id = %(id)s AND d.id = i.document_id AND d.status = %(indexing)s
            RETURNING i.version
            """,
            {
                "id": document_id,
                "indexing": Status.INDEXING,
                "stalled_at": timezone.now() + timedelta(seconds=settings.KB_INDEX_STALL_SECONDS),
            },
        )
        row = cursor.fetchone()
    return None if row is None else row[0]


def _rows_embedded(job: DocumentIndexing) -> list[KBChunk]:
    """Read (an uploaded file) and chunk the waiting text in a bounded child process, then embed the chunks. What the
    file says of itself (its title, a code file's language) goes into job.fields, which the swap saves."""
    fields, tenant = job.fields, job.tenant
    chunking = fields["metadata"][CHUNKING_KEY]
    parsed = parse_bounded(
        bytes(job.raw) if job.raw is not None else job.text.encode(),
        filename=job.filename or job.document.doc_id,
        content_type=fields["content_type"],
        max_tokens=chunking["max_tokens"],
        overlap_tokens=chunking["overlap_tokens"],
        limits=ParseLimits(
            seconds=settings.KB_PARSE_TIMEOUT_SECONDS,
            memory_mb=settings.KB_PARSE_MAX_MEMORY_MB,
            pdf_pages=settings.KB_MAX_PDF_PAGES,
            chunks=settings.KB_MAX_CHUNKS_PER_DOCUMENT,
        ),
    )
    if job.raw is not None:
        fields["title"] = fields["title"] or parsed.title
        if parsed.language:
            fields["metadata"] = {**fields["metadata"], "language": parsed.language}
    label = document_label(title=fields["title"], doc_id=job.document.doc_id)
    rows = _chunk_rows(tenant, parsed.chunks, label=label)
    current = DocumentIndexing.objects.filter(pk=job.pk, version=job.version)
    current.update(chunks_total=len(rows))
    size = max(settings.KB_INDEX_BATCH_CHUNKS, 1)
    for start in range(0, len(rows), size):
        batch = rows[start : start + size]
        _embed(tenant, batch)  # its vectors are cached (committed) at once: a later run does not pay for them again
        current.update(chunks_embedded=F("chunks_embedded") + len(batch))
    return rows


def _publish(job: DocumentIndexing, rows: list[KBChunk]) -> str:
    """Swap the new chunks in and mark the document ready, unless a newer text or a deletion came meanwhile."""
    tenant, fields = job.tenant, job.fields
    with transaction.atomic():
        document = _document_locked(tenant, job.document.doc_id)
        current = None
        if document is not None and document.pk == job.pk:
            current = DocumentIndexing.objects.select_for_update().defer("text", "raw").filter(pk=job.pk).first()
        if current is None or current.version != job.version:
            return "superseded"
        document = _document_save(document, {**fields, "status": Status.READY, "error": ""})
        _chunks_swap(tenant, document, rows)
        current.delete()
    return "ready"


def _record_failure(document_id: int, version: int, exc: Exception, *, permanent: bool = False) -> str:
    """Keep the error; with attempts left, the sweep retries after base x 2^(attempts - 1), else (or when the
    failure is `permanent`) it is failed."""
    message = (getattr(exc, "message", None) or str(exc) or type(exc).__name__)[:4000]
    with transaction.atomic():
        # The document's row first, then the text's: the order every writer of both takes them in.
        document = Document.objects.select_for_update().filter(pk=document_id).first()
        job = DocumentIndexing.objects.select_for_update().defer("text", "raw").filter(pk=document_id).first()
        if document is None or job is None or job.version != version:
            return "superseded"
        if permanent or job.attempts >= settings.KB_INDEX_MAX_ATTEMPTS:
            document.status = Status.FAILED
        else:
            job.next_attempt_at = timezone.now() + retry_delay(
                job.attempts, base_seconds=settings.KB_INDEX_RETRY_BASE_SECONDS
            )
            job.save(update_fields=["next_attempt_at", "updated_at"])
        document.error = message
        document.save(update_fields=["status", "error", "updated_at"])
    return "failed" if document.status == Status.FAILED else "retrying"


# --- files and directory trees ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class IndexSource:
    path: Path  # absolute
    doc_id: str


@dataclass(frozen=True)
class IndexPlan:
    sources: list[IndexSource]
    roots: list[Path]  # the directory arguments, absolute: what --prune may clean up


@dataclass(frozen=True)
class IndexFailure:
    path: str
    reason: str


@dataclass
class IndexRun:
    dry_run: bool
    results: list[IndexResult] = field(default_factory=list)
    failures: list[IndexFailure] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)

    def count(self, outcome: str) -> int:
        return sum(1 for result in self.results if result.outcome == outcome)

    @property
    def chunks(self) -> int:
        """Chunks written (on a dry run: that would be written)."""
        return sum(result.chunks for result in self.results)


def index_plan_build(
    *, paths: Sequence[str | Path], include: Sequence[str] = (), exclude: Sequence[str] = (), doc_id: str | None = None
) -> IndexPlan:
    """The files to index and their doc ids: a directory's files by path relative to it, a file by its name.

    include/exclude are fnmatch globs tried on the relative path and on the name; they select among loadable
    files of directories (default: every supported extension). Files named explicitly are always taken.
    Touches only the file system.
    """
    resolved = [_existing_path(path) for path in paths]
    if doc_id is not None and (len(resolved) != 1 or resolved[0].is_dir()):
        raise ApplicationError(f"--doc-id needs exactly one file argument, got: {', '.join(map(str, paths))}")
    sources: list[IndexSource] = []
    roots: list[Path] = []
    for path in resolved:
        if path.is_dir():
            roots.append(path)
            sources += _directory_sources(path, include, exclude)
        else:
            sources.append(IndexSource(path, path.name if doc_id is None else doc_id))
    return IndexPlan(sources, roots)


def documents_index_plan(
    *,
    tenant: Tenant,
    plan: IndexPlan,
    max_tokens: int = 400,
    overlap_tokens: int = 50,
    prune: bool = False,
    dry_run: bool = False,
    on_source: Callable[[], None] = lambda: None,
) -> IndexRun:
    """Index every file of the plan (one transaction per document), then optionally prune its directory roots.

    A file that cannot be loaded or stored is recorded as a failure and skipped; it is not pruned either.
    An embedding provider failure (AIProviderError) stops the run; what was indexed before it stays.
    """
    if prune and not plan.roots:
        raise ApplicationError("--prune needs at least one directory argument.")
    problems = chunking_problems(max_tokens=max_tokens, overlap_tokens=overlap_tokens)
    if problems:  # refused once for the run, not once per file
        raise ValidationError(problems)
    run = IndexRun(dry_run=dry_run)
    taken_by: dict[str, Path] = {}
    for source in plan.sources:
        if source.doc_id in taken_by:
            run.failures.append(
                IndexFailure(str(source.path), f"doc id {source.doc_id!r} already comes from {taken_by[source.doc_id]}")
            )
        else:
            taken_by[source.doc_id] = source.path
            _index_source(run, tenant, source, max_tokens=max_tokens, overlap_tokens=overlap_tokens)
        on_source()
    if prune:
        run.removed = _prune_roots(tenant, plan, keep_doc_ids=taken_by.keys(), dry_run=dry_run)
    return run


def _prune_roots(tenant: Tenant, plan: IndexPlan, *, keep_doc_ids: Iterable[str], dry_run: bool) -> list[str]:
    """Delete the documents under the plan's roots whose files are gone; files the filters skip are kept."""
    removed: set[str] = set()  # nested roots may both find the same document
    for root in plan.roots:
        indexed = documents_under_root(tenant=tenant, source_root=root).values_list("source_path", flat=True)
        still_there = {path for path in indexed if os.path.exists(path)}
        removed.update(
            documents_prune(
                tenant=tenant,
                keep_doc_ids=keep_doc_ids,
                keep_source_paths=still_there,
                source_root=root,
                dry_run=dry_run,
            )
        )
    return sorted(removed)


def _index_source(run: IndexRun, tenant: Tenant, source: IndexSource, *, max_tokens: int, overlap_tokens: int) -> None:
    try:
        loaded = load_document(source.path)
        result = document_index_loaded(
            tenant=tenant,
            doc_id=source.doc_id,
            loaded=loaded,
            source_path=str(source.path),
            size_bytes=_file_size(source.path),
            max_tokens=max_tokens,
            overlap_tokens=overlap_tokens,
            dry_run=run.dry_run,
        )
    except DocumentLoadError as error:
        run.failures.append(IndexFailure(str(source.path), error.reason))
    except ValidationError as error:
        run.failures.append(IndexFailure(str(source.path), _validation_reason(error)))
    else:
        run.results.append(result)


def _existing_path(path: str | Path) -> Path:
    # Absolute but not resolved: a symlinked file keeps its own name as doc id.
    absolute = Path(os.path.abspath(Path(path).expanduser()))
    if not absolute.exists():
        raise ApplicationError(f"No such file or directory: {path}")
    return absolute


def _directory_sources(root: Path, include: Sequence[str], exclude: Sequence[str]) -> list[IndexSource]:
    sources = []
    for directory, subdirectories, names in os.walk(root):
        relative_dir = Path(directory).relative_to(root)
        # Pruned in place, so os.walk never descends into hidden, junk or excluded directories.
        subdirectories[:] = sorted(
            name
            for name in subdirectories
            if not _hidden_or_junk(name) and not _matches((relative_dir / name).as_posix(), name, exclude)
        )
        for name in sorted(names):
            relative = (relative_dir / name).as_posix()
            if _selected(relative, name, include, exclude):
                sources.append(IndexSource(root / relative, relative))
    return sources


def _hidden_or_junk(name: str) -> bool:
    return name.startswith(".") or name in SKIPPED_DIRECTORIES


def _selected(relative: str, name: str, include: Sequence[str], exclude: Sequence[str]) -> bool:
    if name.startswith(".") or _matches(relative, name, exclude):
        return False
    extension = Path(name).suffix.lower()
    if include:
        # Extensionless files (README) load as text, but only when a glob asks for them.
        return (extension in SUPPORTED_EXTENSIONS or not extension) and _matches(relative, name, include)
    return extension in SUPPORTED_EXTENSIONS


def _matches(relative: str, name: str, globs: Sequence[str]) -> bool:
    return any(fnmatch.fnmatchcase(relative, glob) or fnmatch.fnmatchcase(name, glob) for glob in globs)


def _file_size(path: Path) -> int | None:
    try:
        return path.stat().st_size
    except OSError:
        return None  # gone since it was read: the text's size will do


def _validation_reason(error: ValidationError) -> str:
    if hasattr(error, "error_dict"):
        return "; ".join(f"{name}: {' '.join(messages)}" for name, messages in error.message_dict.items())
    return " ".join(error.messages)
