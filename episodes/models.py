from django.conf import settings
from django.contrib.postgres.search import SearchVectorField
from django.db import models
from pgvector.django import VectorField

from core.timestamps import timestamp_text
from tenancy.models import Tenant


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
    # How many messages (EpisodeMessage rows, positions 0..n-1), kept in step by episode_store.
    message_count = models.PositiveIntegerField(default=0)
    # Characters of all messages' content, kept in step by episode_store (EPISODES_MAX_EPISODE_CHARS).
    content_chars = models.PositiveIntegerField(default=0)
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
    # Why the latest run extracted offline instead of with the chat model (its answer failed twice, or the provider
    # did); empty when it did not fall back.
    extraction_fallback_reason = models.TextField(blank=True)
    # Watermark: messages before this index have been through fact extraction.
    extracted_message_count = models.PositiveIntegerField(default=0)
    # [start, end) index ranges of messages posted with extraction switched off: never mined for facts.
    extraction_excluded = models.JSONField(default=list, blank=True)
    # The caller's, merged from every post that appended messages; each fact extracted from the episode carries it.
    metadata = models.JSONField(default=dict, blank=True)
    # Failed runs in a row (0 after a run that finished): the exponent of the retry backoff.
    extraction_attempts = models.PositiveSmallIntegerField(default=0)
    # When a failed extraction is due again (the episodes-requeue schedule queues it then); None unless failed.
    extraction_next_attempt_at = models.DateTimeField(null=True, blank=True)
    # Keyword search over what was said (message text plus date words, core.text.search_text): episode_store
    # appends each post's new messages in SQL (tsvector ||), so a post never re-reads nor re-parses the session.
    search_vector = SearchVectorField(default="", editable=False)
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


class EpisodeMessage(models.Model):
    """One message of an episode, in the order it was said: appended, never changed."""

    class Role(models.TextChoices):
        USER = "user"
        ASSISTANT = "assistant"
        SYSTEM = "system"
        TOOL = "tool"

    # No index of its own: rows are always reached through their episode (Citus would shard by it).
    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, related_name="+", db_index=False)
    # No index of its own: the unique (episode, position) index serves every read.
    episode = models.ForeignKey(Episode, on_delete=models.CASCADE, related_name="message_rows", db_index=False)
    position = models.PositiveIntegerField()  # 0-based place in the episode (the "index" of the API and provenance)
    role = models.CharField(max_length=20, choices=Role.choices)
    content = models.TextField()
    timestamp = models.DateTimeField(null=True, blank=True)  # when it was said, as posted (None: not given)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["episode", "position"], name="episode_message_position"),
        ]

    def __str__(self) -> str:
        return f"{self.episode_id} #{self.position} {self.role}"

    def as_dict(self) -> dict:
        """The message as posted and as the matching rules and extractors read it."""
        return {
            "role": self.role,
            "content": self.content,
            "timestamp": self.timestamp and timestamp_text(self.timestamp),
        }
