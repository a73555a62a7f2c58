"""Test settings: the base settings with fast hashing, synchronous tasks and the deterministic embedder."""

from .settings import *  # noqa: F403
from .settings import Q_CLUSTER

PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
Q_CLUSTER = {**Q_CLUSTER, "sync": True}
EMBEDDING_PROVIDER = "hash"
