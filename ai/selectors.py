"""Reads of the ai app: what the embedding cache holds and does for one tenant."""

from dataclasses import dataclass

from django.conf import settings

from tenancy.models import Tenant

from .embedders import get_embedder
from .models import EmbeddingCache
from .services import cache_stats_of


@dataclass(frozen=True)
class EmbeddingCacheStats:
    enabled: bool  # EMBEDDING_CACHE is on and the embedder is worth caching (the hash embedder is not)
    model: str
    hits: int  # this process's lookups of the tenant's texts, since it started
    misses: int
    rows: int  # vectors stored for the tenant and its users, of the active model


def embedding_cache_stats(*, tenant: Tenant) -> EmbeddingCacheStats:
    """The cache as `tenant` sees it: its own rows and lookups only."""
    embedder = get_embedder()
    counts = cache_stats_of(tenant=tenant)
    return EmbeddingCacheStats(
        enabled=settings.EMBEDDING_CACHE and embedder.cacheable,
        model=embedder.model_name,
        hits=counts.hits,
        misses=counts.misses,
        rows=EmbeddingCache.objects.filter(tenant=tenant, model=embedder.model_name).count(),
    )
