"""Settings that must be right before anything starts: a wrong one ends the process with one line naming it.

SystemExit rather than ImproperlyConfigured: manage.py, gunicorn and the django-q cluster then all print the
message alone, not a traceback that buries it.
"""

import os
import secrets
from pathlib import Path
from urllib.parse import urlsplit

import environ

# The placeholder of .env.production.example: copying the file without replacing it must not start.
PLACEHOLDER_SECRET_KEYS = {"replace-me", "dev-only-insecure-key-do-not-use-in-production"}


def refuse(message: str) -> None:
    raise SystemExit(f"memoryproject: {message}")


def float_setting(env, name: str, *, default: float | None) -> float | None:
    """The number `name` holds, read as Python reads one ("1e6", "0.75"), or `default` when unset or empty; anything
    else refused in one line. django-environ's own float keeps the digits, commas and dots of any text: "1e18" became
    118.0 and "0.7x" 0.7, silently."""
    raw = env.str(name, default="").strip()
    if not raw:
        return default
    try:
        return float(raw)
    except ValueError:
        refuse(f"{name} must be a number, not {raw!r}.")


def check_production_secret_key(secret_key: str) -> None:
    """Django's own rule for a strong key (check --deploy's security.W009), enforced at start in production."""
    fix = 'generate one: python -c "import secrets; print(secrets.token_urlsafe(50))"'
    if not secret_key:
        refuse(f"DJANGO_SECRET_KEY is not set (DJANGO_ENV=production): {fix}, or set DJANGO_ENV=development.")
    if secret_key in PLACEHOLDER_SECRET_KEYS or secret_key.startswith("django-insecure-"):
        refuse(f"DJANGO_SECRET_KEY is a placeholder: {fix}.")
    if len(secret_key) < 50 or len(set(secret_key)) < 5:
        refuse(f"DJANGO_SECRET_KEY is too weak (at least 50 characters, 5 different ones): {fix}.")


def development_secret_key(path: Path) -> str:
    """The development key kept in `path` (mode 0600), made on first use; processes starting together agree."""
    if path.exists():
        return _read_key(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    draft = path.with_name(f".{path.name}.{os.getpid()}")
    descriptor = os.open(draft, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(descriptor, "w") as stream:
        stream.write(secrets.token_urlsafe(50))
    try:
        os.link(draft, path)  # atomic and exclusive: whoever links first wins, the others read the winner's key
    except FileExistsError:
        pass
    finally:
        draft.unlink()
    return _read_key(path)


def _read_key(path: Path) -> str:
    key = path.read_text().strip()
    if not key:
        refuse(f"{path} is empty: delete it (a new development secret key is made) or set DJANGO_SECRET_KEY.")
    return key


def database_from_url(url: str, *, variable: str = "DATABASE_URL") -> dict:
    """A database URL (`variable` names the setting) parsed, or one line saying why it is not a PostgreSQL URL
    (never echoing its password)."""
    example = "postgres://USER:PASSWORD@HOST:5432/NAME"
    scheme = urlsplit(url).scheme
    if scheme not in ("postgres", "postgresql", "pgsql", "postgis"):
        refuse(f"{variable} must be a PostgreSQL URL like {example} (scheme {scheme or 'missing'!r}).")
    try:
        config = environ.Env.db_url_config(url)
    except (ValueError, KeyError) as exc:
        refuse(f"{variable} is malformed ({exc}): expected {example}.")
    if not config.get("NAME"):
        refuse(f"{variable} names no database: expected {example}.")
    return config


def redis_url_check(url: str) -> str:
    """REDIS_URL as given, or one line saying why redis-py could not use it (never echoing its password)."""
    example = "redis://HOST:6379/0 (rediss:// for TLS, unix:///path/redis.sock)"
    parts = urlsplit(url)
    if parts.scheme not in ("redis", "rediss", "unix"):
        refuse(f"REDIS_URL must be a Redis URL like {example} (scheme {parts.scheme or 'missing'!r}).")
    try:
        parts.port  # noqa: B018 - raises on a port that is not a number
    except ValueError:
        refuse(f"REDIS_URL has a port that is not a number: expected {example}.")
    if parts.scheme != "unix" and not parts.hostname:
        refuse(f"REDIS_URL names no host: expected {example}.")
    if parts.scheme == "unix" and not parts.path:
        refuse(f"REDIS_URL names no socket path: expected {example}.")
    return url
