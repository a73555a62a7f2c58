"""Test settings: the base settings with fast hashing, synchronous tasks and the deterministic embedder."""

import os

# Development: the base settings then accept a missing secret key, here and in the processes tests start.
os.environ.setdefault("DJANGO_ENV", "development")

from .settings import *  # noqa: E402, F403
from .settings import Q_CLUSTER  # noqa: E402

PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
Q_CLUSTER = {**Q_CLUSTER, "sync": True}
EMBEDDING_PROVIDER = "hash"
# A local model a test loads makes its ONNX graphs afresh (tests/ai/test_embedders.py tests the kept ones).
LOCAL_EMBEDDING_GRAPH_CACHE = ""

# No throttling unless a test sets a rate (tests/tenancy/test_throttling.py), whatever REDIS_URL says.
CACHES = {"default": {"BACKEND": "django.core.cache.backends.db.DatabaseCache", "LOCATION": "memoryproject_cache"}}
API_THROTTLE_RATE = API_THROTTLE_BURST = AUTH_FAILURE_THROTTLE_RATE = ""
# Templates render without `collectstatic` having run.
STORAGES = {**STORAGES, "staticfiles": {"BACKEND": "django.contrib.staticfiles.storage.StaticFilesStorage"}}  # noqa: F405
# STATIC_ROOT is looked up per request, not at start: no "No directory" warning where collectstatic never ran.
WHITENOISE_AUTOREFRESH = True
