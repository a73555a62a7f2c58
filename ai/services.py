"""What the rest of the project calls to embed text: batched, cached, one model at a time."""

import hashlib
import logging
import threading
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from django.conf import settings
from django.db import transaction

from .embedders import get_embedder
from .models import EmbeddingCache

logger = logging.getLogger(__name__)


@dataclass
class CacheStats:
    hits: int = 0
    misses: int = 0

    def as_dict(self) -> dict:
        return {"hits": self.hits, "misses": self.misses}


cache_stats = CacheStats()  # per process; shown by /api/health
_stats_lock = threading.Lock()


def active_embedding_model() -> str:
    """The model whose vectors searches use; rows embedded by any other model count as stale."""
    return get_embedder().model_name


def embed_texts(texts: Sequence[str]) -> np.ndarray:
    """Unit vectors for `texts` (one row each) from the active model; repeated texts are embedded once."""
    embedder = get_embedder()
    if not texts:
        return np.zeros((0, embedder.dimensions), dtype=np.float32)
    unique = list(dict.fromkeys(texts))
    if settings.EMBEDDING_CACHE and embedder.cacheable:
        by_text = _embed_through_cache(embedder, unique)
    else:
        by_text = dict(zip(unique, embedder.embed(unique), strict=True))
    return np.vstack([by_text[text] for text in texts])


def embed_query(text: str) -> np.ndarray:
    return embed_texts([text])[0]


def _embed_through_cache(embedder, texts: list[str]) -> dict[str, np.ndarray]:
    hashes = {text: hashlib.sha256(text.encode()).hexdigest() for text in texts}
    cached = dict(
        EmbeddingCache.objects.filter(model=embedder.model_name, text_hash__in=hashes.values()).values_list(
            "text_hash", "embedding"
        )
    )
    found = {text: np.asarray(cached[digest], dtype=np.float32) for text, digest in hashes.items() if digest in cached}
    missing = [text for text in texts if text not in found]
    if missing:
        vectors = embedder.embed(missing)
        found.update(zip(missing, vectors, strict=True))
        with transaction.atomic():
            EmbeddingCache.objects.bulk_create(
                [
                    EmbeddingCache(model=embedder.model_name, text_hash=hashes[text], embedding=vector)
                    for text, vector in zip(missing, vectors, strict=True)
                ],
                ignore_conflicts=True,  # a concurrent caller may have cached the same text
                batch_size=1000,
            )
    with _stats_lock:
        cache_stats.hits += len(texts) - len(missing)
        cache_stats.misses += len(missing)
    logger.debug(
        "embedding cache (%s): %d hits, %d misses", embedder.model_name, len(texts) - len(missing), len(missing)
    )
    return found


def embedding_cache_clear(*, model: str | None = None) -> int:
    """Delete cached vectors (of one model, or all); returns how many."""
    queryset = EmbeddingCache.objects.all() if model is None else EmbeddingCache.objects.filter(model=model)
    with transaction.atomic():
        deleted, _ = queryset.delete()
    return deleted
