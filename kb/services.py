"""Writes to the knowledge base: index documents (chunk, embed, replace atomically), delete and prune them.

Indexing is incremental: a document whose text and chunking parameters are unchanged costs two small reads and
no embedding call, and inside a changed document only chunk texts the embedding cache has not seen are embedded.
"""

import fnmatch
import hashlib
import os
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field, replace
from http import HTTPStatus
from pathlib import Path

from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import transaction

from ai.services import TENANT_TEXT, active_embedding_model, embed_texts
from core.errors import ApplicationError
from core.locks import LockNamespace, xact_lock
from tenancy.models import Tenant

from .chunking import CONTENT_TYPES, MIN_MAX_TOKENS, Chunk, chunk_document
from .loaders import (
    SUPPORTED_EXTENSIONS,
    DocumentLoadError,
    LoadedDocument,
    UnsupportedFileType,
    load_bytes,
    load_document,
)
from .models import Document, KBChunk, document_label
from .selectors import document_by_doc_id, document_chunks, document_get, documents_under_root

CHUNKING_KEY = "_chunking"  # reserved Document.metadata key: the parameters the stored chunks were cut with
# Bump when kb.chunking changes how it cuts, so the next run re-chunks every document.
CHUNKER_VERSION = 2
CHUNK_INSERT_BATCH = 1000
# Fields describing a document that may change without its text changing (a moved tree, new metadata).
DESCRIPTIVE_FIELDS = ("title", "source_path", "content_type", "size_bytes", "metadata")
SKIPPED_DIRECTORIES = frozenset({"node_modules", "__pycache__", "site-packages", "venv"})
_HEADING_PATH_MAX = KBChunk._meta.get_field("heading_path").max_length


@dataclass(frozen=True)
class IndexResult:
    doc_id: str
    outcome: str  # new | changed | unchanged
    document: Document | None  # None on a dry run
    chunks: int  # chunks written (on a dry run: that would be written); 0 when unchanged
    written: bool  # whether the database was changed


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
) -> IndexResult:
    """Store `text` as the tenant's document `doc_id`, replacing its previous chunks in one transaction.

    Unchanged (same text, same chunking, chunks embedded by the active model): nothing is embedded or rewritten;
    only descriptive fields that differ (e.g. source_path after the tree moved) are updated in place.
    A dry run reads but writes nothing and embeds nothing. size_bytes defaults to the UTF-8 size of `text`.
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

    chunks = chunk_document(text, content_type=content_type, max_tokens=max_tokens, overlap_tokens=overlap_tokens)
    if dry_run:
        return IndexResult(doc_id, "changed" if existing else "new", None, chunks=len(chunks), written=False)
    rows = _chunk_rows(tenant, chunks, label=document_label(title=title, doc_id=doc_id))
    _embed(tenant, rows)  # before the transaction: a slow embedding call must not hold row locks
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
    unsupported_file_type), content they cannot read, e.g. not UTF-8 or a broken PDF (400 unreadable_document).
    """
    limit = settings.KB_MAX_UPLOAD_BYTES
    if len(data) > limit:
        raise ApplicationError(
            f"The document is {len(data):,} bytes; the limit is {limit:,} bytes.",
            code="payload_too_large",
            status_code=HTTPStatus.REQUEST_ENTITY_TOO_LARGE,
            details={"size_bytes": len(data), "max_bytes": limit},
        )
    try:
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
    return document_index_loaded(tenant=tenant, doc_id=doc_id, loaded=loaded, size_bytes=len(data))


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
        document.content_hash == fields["content_hash"]
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
        outcome = "new" if document is None else "changed"
        document = _document_save(document or Document(tenant=tenant, doc_id=doc_id), fields)
        KBChunk.objects.filter(tenant=tenant, document=document).delete()
        for row in rows:
            row.document = document
        KBChunk.objects.bulk_create(rows, batch_size=CHUNK_INSERT_BATCH)
    return document, outcome


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
