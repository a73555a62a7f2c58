from django.conf import settings
from django.db import models
from pgvector.django import VectorField

from memoryproject.tenancy.models import Tenant


class Episode(models.Model):
    """One conversation (a session's messages), kept verbatim, with a summary (episodic memory)."""

    class ExtractionStatus(models.TextChoices):
        PENDING = "pending"
        RUNNING = "running"
        DONE = "done"
        FAILED = "failed"
        SKIPPED = "skipped"

    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, related_name="episodes")
    user_id = models.CharField(max_length=255)
    agent_id = models.CharField(max_length=255, blank=True, default="")
    session_id = models.CharField(max_length=255)
    # [{"role": "user", "content": "...", "timestamp": "..."}, ...] in the order they were said.
    messages = models.JSONField(default=list, blank=True)
    summary = models.TextField(blank=True)
    embedding = VectorField(dimensions=settings.EMBEDDING_DIMENSIONS, null=True, blank=True)
    embedding_model = models.CharField(max_length=200, blank=True, default="")
    extraction_status = models.CharField(
        max_length=20, choices=ExtractionStatus.choices, default=ExtractionStatus.PENDING
    )
    extraction_error = models.TextField(blank=True)
    # Watermark: messages before this index have been through fact extraction.
    extracted_message_count = models.PositiveIntegerField(default=0)
    extraction_attempts = models.PositiveSmallIntegerField(default=0)
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
