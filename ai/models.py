from django.conf import settings
from django.db import models
from pgvector.django import VectorField


class EmbeddingCache(models.Model):
    """Vectors already computed, keyed by (model, sha256 of the text): unchanged text costs no API call."""

    model = models.CharField(max_length=200)
    text_hash = models.CharField(max_length=64)
    embedding = VectorField(dimensions=settings.EMBEDDING_DIMENSIONS)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["model", "text_hash"], name="embeddingcache_unique_text")]

    def __str__(self) -> str:
        return f"{self.model}:{self.text_hash[:12]}"
