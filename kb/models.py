from django.conf import settings
from django.contrib.postgres.indexes import GinIndex
from django.contrib.postgres.search import SearchVector, SearchVectorField
from django.db import models
from pgvector.django import HnswIndex, VectorField

from core.text import search_text
from tenancy.models import Tenant


class Document(models.Model):
    """A tenant's reference document (runbook, API reference, wiki page, code), shared by all its users."""

    class Status(models.TextChoices):
        READY = "ready"  # its chunks are the current text's
        INDEXING = "indexing"  # a new text waits in its DocumentIndexing for the worker; chunks are the previous text's
        FAILED = "failed"  # the worker gave up on the new text (error says why); chunks are the previous text's

    # No index of its own: the table's composite indexes start with tenant.
    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, related_name="documents", db_index=False)
    doc_id = models.CharField(max_length=500)  # the caller's id; by default the path below the indexed root
    title = models.CharField(max_length=500, blank=True)
    source_path = models.CharField(max_length=1000, blank=True)
    content_type = models.CharField(max_length=100, blank=True)
    content_hash = models.CharField(max_length=64)  # sha256 of the content: unchanged documents cost nothing
    size_bytes = models.PositiveBigIntegerField(default=0)
    metadata = models.JSONField(default=dict, blank=True)
    status = models.CharField(max_length=20, choices=Status.choices, default=Status.READY)
    error = models.TextField(blank=True, default="")  # why the last indexing attempt failed
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["doc_id"]
        constraints = [models.UniqueConstraint(fields=["tenant", "doc_id"], name="document_unique_doc_id")]

    def __str__(self) -> str:
        return self.doc_id


class DocumentIndexing(models.Model):
    """A text uploaded for a document and not indexed yet: the worker chunks and embeds it, then swaps it in.

    One per document (the latest upload wins: `version` tells a run that a newer text replaced the one it read)."""

    document = models.OneToOneField(Document, on_delete=models.CASCADE, primary_key=True, related_name="indexing")
    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, related_name="+", db_index=False)
    text = models.TextField()  # "" when the upload is `raw`
    # An uploaded file still to be read (HTML, PDF): the worker reads it in a bounded child process (kb.parsing).
    raw = models.BinaryField(null=True, editable=False)
    filename = models.CharField(max_length=500, blank=True, default="")
    fields = models.JSONField()  # the Document fields the text comes with (title, content hash, chunking, ...)
    version = models.PositiveIntegerField(default=1)
    attempts = models.PositiveSmallIntegerField(default=0)
    # When the sweep queues it again: after a failure, the backoff; while queued or running, the stall timeout.
    next_attempt_at = models.DateTimeField()
    chunks_total = models.PositiveIntegerField(default=0)
    chunks_embedded = models.PositiveIntegerField(default=0)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        # No index but the key: the sweep reads every row, and there are only as many as uploads waiting.
        verbose_name_plural = "document indexings"

    def __str__(self) -> str:
        return f"indexing of {self.document_id} (v{self.version})"


class KBChunk(models.Model):
    """A slice of a document that retrieval can return and cite (heading path and line range)."""

    # No index of its own: the table's composite indexes start with tenant.
    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, related_name="kb_chunks", db_index=False)
    document = models.ForeignKey(Document, on_delete=models.CASCADE, related_name="chunks")
    ordinal = models.PositiveIntegerField()
    text = models.TextField()
    heading_path = models.CharField(max_length=1000, blank=True)  # "Guide > Rate limits"
    line_start = models.PositiveIntegerField(default=1)
    line_end = models.PositiveIntegerField(default=1)
    token_count = models.PositiveIntegerField(default=0)
    content_hash = models.CharField(max_length=64)
    embedding = VectorField(dimensions=settings.EMBEDDING_DIMENSIONS, null=True, blank=True)
    embedding_model = models.CharField(max_length=200, blank=True, default="")
    # Keyword search: document title (or doc id), heading path and text, prepared in Python by
    # refresh_search_text() (CJK spaced apart); PostgreSQL keeps the tsvector in step.
    search_text = models.TextField(blank=True, default="", editable=False)
    search_vector = models.GeneratedField(
        expression=SearchVector("search_text", config="english"),
        output_field=SearchVectorField(),
        db_persist=True,
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["document_id", "ordinal"]
        verbose_name = "KB chunk"
        constraints = [models.UniqueConstraint(fields=["document", "ordinal"], name="kbchunk_unique_ordinal")]
        indexes = [
            models.Index(fields=["tenant", "document"], name="kbchunk_tenant_document"),
            # Tenant-wide KB search is large: approximate search with HNSW (iterative scan at query time).
            HnswIndex(
                name="kbchunk_embedding_hnsw",
                fields=["embedding"],
                m=16,
                ef_construction=64,
                opclasses=["vector_cosine_ops"],
            ),
            # Tenant-wide keyword search (kb_search's keyword side). Without a pending list, which every search
            # scans until it is merged (392 pages after 1,952 chunks: 21.9 ms, 19.9 once merged); ~0.3 ms a chunk.
            GinIndex(fields=["search_vector"], name="kbchunk_search_vector_gin", fastupdate=False),
        ]

    def __str__(self) -> str:
        return f"{self.document_id}#{self.ordinal}"

    def embedding_text(self) -> str:
        return self.text

    def refresh_search_text(self, document_label: str) -> None:
        """document_label: the document's title, or its doc id when it has none. Call before bulk writes."""
        self.search_text = search_text(f"{document_label} {self.heading_path} {self.text}")


def document_label(*, title: str, doc_id: str) -> str:
    """What names a document in its chunks' keyword text."""
    return title or doc_id


class KBTermFrequency(models.Model):
    """How many of a tenant's chunks hold each lexeme of their search_vector, and (lexeme "") how many chunks the
    tenant has: kb_search's BM25 statistics, known before any chunk is read, so that a common term's thousands of
    chunks need not be counted (or ranked) on every query. Triggers on kb_kbchunk keep it
    (kb/sql/term_frequency.sql)."""

    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, related_name="+", db_index=False)
    lexeme = models.TextField()  # "" counts the chunks themselves (no lexeme is empty)
    chunks = models.IntegerField()

    class Meta:
        verbose_name = "KB term frequency"
        constraints = [models.UniqueConstraint(fields=["tenant", "lexeme"], name="kbtermfrequency_tenant_lexeme")]

    def __str__(self) -> str:
        return f"{self.lexeme or '(chunks)'}: {self.chunks}"
