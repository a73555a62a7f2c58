from datetime import date

from django.conf import settings
from django.contrib.postgres.search import SearchVector, SearchVectorField
from django.db import models
from pgvector.django import VectorField

from core.text import search_text
from tenancy.models import Tenant

MAX_DATES_IN_SEARCH_TEXT = 20


class Episode(models.Model):
    """One conversation (a session's messages), kept verbatim, with a summary (episodic memory)."""

    class ExtractionStatus(models.TextChoices):
        PENDING = "pending"
        RUNNING = "running"
        DONE = "done"
        FAILED = "failed"
        SKIPPED = "skipped"

    # No index of its own: the table's composite indexes start with tenant.
    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, related_name="episodes", db_index=False)
    user_id = models.CharField(max_length=255)
    agent_id = models.CharField(max_length=255, blank=True, default="")
    session_id = models.CharField(max_length=255)
    # [{"role": "user", "content": "...", "timestamp": "..."}, ...] in the order they were said.
    messages = models.JSONField(default=list, blank=True)
    # len(messages), kept in step by episode_store so that lists and status checks never load the messages.
    message_count = models.PositiveIntegerField(default=0)
    # The latest message's timestamp (or the time it was received when it had none): the episode's time.
    last_message_at = models.DateTimeField(null=True, blank=True)
    summary = models.TextField(blank=True)
    # How many messages the summary (and its embedding) covers; less than message_count means it is stale.
    summarized_message_count = models.PositiveIntegerField(default=0)
    embedding = VectorField(dimensions=settings.EMBEDDING_DIMENSIONS, null=True, blank=True)
    embedding_model = models.CharField(max_length=200, blank=True, default="")
    extraction_status = models.CharField(
        max_length=20, choices=ExtractionStatus.choices, default=ExtractionStatus.PENDING
    )
    extraction_error = models.TextField(blank=True)
    extraction_skip_reason = models.TextField(blank=True)
    # Watermark: messages before this index have been through fact extraction.
    extracted_message_count = models.PositiveIntegerField(default=0)
    # [start, end) index ranges of messages posted with extraction switched off: never mined for facts.
    extraction_excluded = models.JSONField(default=list, blank=True)
    extraction_attempts = models.PositiveSmallIntegerField(default=0)
    # Keyword search over what was said: message text plus date words, prepared in Python by
    # refresh_search_text(); PostgreSQL keeps the tsvector in step.
    search_text = models.TextField(blank=True, default="", editable=False)
    search_vector = models.GeneratedField(
        expression=SearchVector("search_text", config="english"),
        output_field=SearchVectorField(),
        db_persist=True,
    )
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        constraints = [
            models.UniqueConstraint(fields=["tenant", "user_id", "session_id"], name="episode_unique_session"),
        ]
        indexes = [models.Index(fields=["tenant", "user_id", "created_at"], name="episode_tenant_user")]

    def __str__(self) -> str:
        return f"{self.user_id} / {self.session_id}"

    def embedding_text(self) -> str:
        return self.summary

    def refresh_search_text(self) -> None:
        """Call after changing messages (save() does not: most saves only move the status)."""
        days = {date.fromisoformat(message["timestamp"][:10]) for message in self.messages if message.get("timestamp")}
        if self.last_message_at:
            days.add(self.last_message_at.date())
        # Date words let "May 2023" find what was said then; a handful of days is enough to say when.
        dates = tuple(sorted(days)[:MAX_DATES_IN_SEARCH_TEXT])
        self.search_text = search_text("\n".join(message["content"] for message in self.messages), dates=dates)
