"""What the rest of the project calls to embed text: batched, cached per owner, one model at a time."""

import hashlib
import logging
import threading
from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import datetime

import numpy as np
from django.conf import settings
from django.db import transaction
from django.utils import timezone

from tenancy.models import Tenant

from .embedders import get_embedder
from .errors import AIProviderError
from .models import EmbeddingCache

logger = logging.getLogger(__name__)

# The user_id of text that belongs to the tenant rather than to one of its users (knowledge-base chunks): cached
# for the tenant, and kept when a user is erased.
TENANT_TEXT = ""


@dataclass
class CacheStats:
    hits: int = 0
    misses: int = 0


_stats: dict[int, CacheStats] = {}  # per process, by tenant id; GET /api/v1/embedding-cache shows a tenant its own
_stats_lock = threading.Lock()


def active_embedding_model() -> str:
    """The model whose vectors searches use; rows embedded by any other model count as stale."""
    return get_embedder().model_name


def embed_texts(texts: Sequence[str], *, tenant: Tenant | None, user_id: str | Sequence[str] | None) -> np.ndarray:
    """Unit vectors for `texts` (one row each) from the active model; repeated texts are embedded once.

    `tenant` and `user_id` name whose text it is: one user id for all of them, one per text, or TENANT_TEXT for the
    tenant's own documents. The cache keeps a vector under its owner only, so no other tenant or user ever hits it
    (nor sees an answer come faster), and erasing the user removes it. No tenant (maintenance across tenants) or
    user_id None (text nobody owns, such as a knowledge-base query asked without a user) skips the cache."""
    embedder = get_embedder()
    if not texts:
        return np.zeros((0, embedder.dimensions), dtype=np.float32)
    owners = _owners(texts, user_id)
    if tenant is not None and owners is not None and settings.EMBEDDING_CACHE and embedder.cacheable:
        keys = list(zip(owners, texts, strict=True))
        by_key = _embed_through_cache(embedder, tenant, list(dict.fromkeys(keys)))
        return np.vstack([by_key[key] for key in keys])
    unique = list(dict.fromkeys(texts))
    by_text = dict(zip(unique, _embed(embedder, unique), strict=True))
    return np.vstack([by_text[text] for text in texts])


def _embed(embedder, texts: list[str]) -> np.ndarray:
    """The embedder's call, its outcome recorded for the health probes."""
    try:
        vectors = embedder.embed(texts)
    except AIProviderError as exc:
        provider_failed(EMBEDDINGS, exc.message)
        raise
    provider_succeeded(EMBEDDINGS)
    return vectors


def embed_query(text: str, *, tenant: Tenant | None, user_id: str | None) -> np.ndarray:
    return embed_texts([text], tenant=tenant, user_id=user_id)[0]


# What a search answer lists under "degraded" when it ranked by keywords alone (the embedding provider failing).
DEGRADED_EMBEDDINGS = "embeddings"


def degraded_without(vector: np.ndarray | None) -> list[str]:
    """A search answer's "degraded" list: empty when the query had its vector, else DEGRADED_EMBEDDINGS."""
    return [] if vector is not None else [DEGRADED_EMBEDDINGS]


def query_vector_or_none(text: str, *, tenant: Tenant | None, user_id: str | None) -> np.ndarray | None:
    """The query's vector, or None while the embedding provider fails for good: a search then ranks by keywords
    alone and its answer says so (DEGRADED_EMBEDDINGS) instead of failing the request."""
    try:
        return embed_query(text, tenant=tenant, user_id=user_id)
    except AIProviderError as exc:
        logger.warning("embedding unavailable, searching by keywords alone: %s", exc.message)
        return None


def _owners(texts: Sequence[str], user_id: str | Sequence[str] | None) -> list[str] | None:
    if user_id is None or isinstance(user_id, str):
        return None if user_id is None else [user_id] * len(texts)
    if len(user_id) != len(texts):
        raise ValueError(f"{len(user_id)} user ids for {len(texts)} texts")
    return list(user_id)


def _embed_through_cache(embedder, tenant: Tenant, keys: list[tuple[str, str]]) -> dict[tuple[str, str], np.ndarray]:
    """Vectors of (user_id, text) keys of `tenant`: from its rows where they are cached, else from the embedder."""
    hashes = {key: hashlib.sha256(key[1].encode()).hexdigest() for key in keys}
    rows = EmbeddingCache.objects.filter(
        tenant=tenant,
        model=embedder.model_name,
        user_id__in={user_id for user_id, _ in keys},
        text_hash__in=set(hashes.values()),
    ).values_list("user_id", "text_hash", "embedding")
    cached = {(user_id, digest): vector for user_id, digest, vector in rows}
    found = {
        key: np.asarray(cached[key[0], digest], dtype=np.float32)
        for key, digest in hashes.items()
        if (key[0], digest) in cached
    }
    missing = [key for key in keys if key not in found]
    if missing:
        texts = list(dict.fromkeys(text for _, text in missing))  # one owner's call: owners may share a text
        by_text = dict(zip(texts, _embed(embedder, texts), strict=True))
        found.update((key, by_text[key[1]]) for key in missing)
        with transaction.atomic():
            EmbeddingCache.objects.bulk_create(
                [
                    EmbeddingCache(
                        tenant=tenant,
                        user_id=key[0],
                        model=embedder.model_name,
                        text_hash=hashes[key],
                        embedding=by_text[key[1]],
                    )
                    for key in missing
                ],
                ignore_conflicts=True,  # a concurrent caller may have cached the same text
                batch_size=1000,
            )
    with _stats_lock:
        stats = _stats.setdefault(tenant.pk, CacheStats())
        stats.hits += len(keys) - len(missing)
        stats.misses += len(missing)
    logger.debug(
        "embedding cache (%s, tenant %s): %d hits, %d misses",
        embedder.model_name,
        tenant.pk,
        len(keys) - len(missing),
        len(missing),
    )
    return found


def cache_stats_of(*, tenant: Tenant) -> CacheStats:
    """This process's cache hits and misses for `tenant`'s texts (a copy)."""
    with _stats_lock:
        stats = _stats.get(tenant.pk, CacheStats())
        return CacheStats(hits=stats.hits, misses=stats.misses)


def embedding_cache_erase_user(*, tenant: Tenant, user_id: str) -> int:
    """Delete the cached vectors of one user's texts (part of the user's erasure; the caller holds the transaction).
    Returns how many. One statement through the (tenant, user_id, ...) unique index."""
    if user_id == TENANT_TEXT:
        raise ValueError("The tenant's own texts belong to no user.")
    deleted, _ = EmbeddingCache.objects.filter(tenant=tenant, user_id=user_id).delete()
    return deleted


def embedding_cache_clear(*, model: str | None = None) -> int:
    """Delete cached vectors (of one model, or all); returns how many."""
    queryset = EmbeddingCache.objects.all() if model is None else EmbeddingCache.objects.filter(model=model)
    with transaction.atomic():
        deleted, _ = queryset.delete()
    return deleted


# --- provider health ------------------------------------------------------------------------------------------------

EMBEDDINGS = "embeddings"
CHAT = "chat"


@dataclass(frozen=True)
class ProviderState:
    """What this process saw of one provider's calls (each call counted after the client's own retries)."""

    last_success_at: datetime | None = None
    last_failure_at: datetime | None = None
    last_error: str = ""
    consecutive_failures: int = 0
    failing_since: datetime | None = None  # the first failure of the current run of failures

    @property
    def failing(self) -> bool:
        return self.consecutive_failures > 0


_providers: dict[str, ProviderState] = {}  # per process: a probe sees what the process serving it saw
_providers_lock = threading.Lock()


def provider_succeeded(kind: str) -> None:
    with _providers_lock:
        _providers[kind] = replace(
            _providers.get(kind, ProviderState()),
            last_success_at=timezone.now(),
            consecutive_failures=0,
            failing_since=None,
        )


def provider_failed(kind: str, error: str) -> None:
    now = timezone.now()
    with _providers_lock:
        state = _providers.get(kind, ProviderState())
        _providers[kind] = replace(
            state,
            last_failure_at=now,
            last_error=error,
            consecutive_failures=state.consecutive_failures + 1,
            failing_since=state.failing_since or now,
        )


def provider_state(kind: str) -> ProviderState:
    """The recorded outcomes of `kind` (EMBEDDINGS or CHAT) in this process; nothing yet when it made no call."""
    with _providers_lock:
        return _providers.get(kind, ProviderState())


def provider_report(kind: str) -> dict:
    """For the health probes: {"status": "ok"} or {"status": "failing", "error", "since", ...}, with the last
    success; "ok" too when this process made no call yet (nothing failed)."""
    state = provider_state(kind)
    report = {"status": "failing" if state.failing else "ok", "last_success_at": _iso(state.last_success_at)}
    if state.failing:
        report |= {
            "error": state.last_error,
            "since": _iso(state.failing_since),
            "last_failure_at": _iso(state.last_failure_at),
            "consecutive_failures": state.consecutive_failures,
        }
    return report


PROBE_AFTER_SECONDS = 15  # a probe calls a failing provider at most this often (the call may take the client's timeout)


def embedding_probe() -> None:
    """One embedding call of a fixed text, cached nowhere, its outcome recorded: how a probe finds out that a failing
    provider answers again before any request needed it. Not within PROBE_AFTER_SECONDS of the last failure."""
    last_failure = provider_state(EMBEDDINGS).last_failure_at
    if last_failure and (timezone.now() - last_failure).total_seconds() < PROBE_AFTER_SECONDS:
        return
    try:
        embed_texts(["health check"], tenant=None, user_id=None)
    except AIProviderError:
        pass  # recorded


def _iso(moment: datetime | None) -> str | None:
    return moment.isoformat() if moment else None


def provider_states_reset() -> None:
    """Forget every recorded outcome (tests)."""
    with _providers_lock:
        _providers.clear()
