from django.conf import settings
from django.db import models
from pgvector.django import VectorField

from tenancy.models import Tenant


class EmbeddingCache(models.Model):
    """Vectors already computed, keyed by their owner, the model and the sha256 of the text: unchanged text costs
    no API call. The owner is part of the key so that no tenant (and no user) can learn, from a hit or its speed,
    that someone else embedded the same text, and so that erasing a user removes the vectors of their text."""

    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, related_name="+", db_index=False)
    user_id = models.CharField(max_length=255, blank=True)  # "" for the tenant's own text (knowledge-base chunks)
    model = models.CharField(max_length=200)
    text_hash = models.CharField(max_length=64)
    embedding = VectorField(dimensions=settings.EMBEDDING_DIMENSIONS)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            # Also the index of a tenant's or a user's rows (statistics, erasure).
            models.UniqueConstraint(
                fields=["tenant", "user_id", "model", "text_hash"], name="embeddingcache_unique_owner_text"
            )
        ]

    def __str__(self) -> str:
        return f"{self.model}:{self.text_hash[:12]}"
