"""Test settings: the base settings with fast hashing, synchronous tasks and the deterministic embedder."""

from .settings import *  # noqa: F403
from .settings import Q_CLUSTER

PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
Q_CLUSTER = {**Q_CLUSTER, "sync": True}
EMBEDDING_PROVIDER = "hash"

# No throttling unless a test sets a rate (tests/tenancy/test_throttling.py), whatever REDIS_URL says.
CACHES = {"default": {"BACKEND": "django.core.cache.backends.db.DatabaseCache", "LOCATION": "memoryproject_cache"}}
API_THROTTLE_RATE = API_THROTTLE_BURST = AUTH_FAILURE_THROTTLE_RATE = ""
