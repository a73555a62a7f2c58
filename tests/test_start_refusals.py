"""Settings that cannot work end the process at start with one line naming the setting, never a traceback; in
development a secret key is made once under var/ instead."""

import os
import secrets
import stat
import subprocess
import sys
from pathlib import Path

import pytest
from django.conf import settings

from memoryproject.settings_checks import development_secret_key

ROOT = Path(settings.BASE_DIR)


def start(tmp_path, command: list[str], **environment) -> subprocess.CompletedProcess:
    env = {key: value for key, value in os.environ.items() if not key.startswith(("DJANGO_", "DATABASE_URL"))}
    env.update(
        DJANGO_SETTINGS_MODULE="memoryproject.settings",
        EMBEDDED_PG_DATA_DIR=str(tmp_path / "pgdata"),
        EMBEDDING_PROVIDER="hash",
        **environment,
    )
    return subprocess.run(command, env=env, cwd=ROOT, capture_output=True, text=True, timeout=120)


MANAGE_CHECK = [sys.executable, "manage.py", "check"]
GUNICORN = [sys.executable, "-m", "gunicorn", "-c", "gunicorn.conf.py", "--bind", "127.0.0.1:0"]


@pytest.mark.parametrize(
    ("secret_key", "says"),
    [
        (None, "DJANGO_SECRET_KEY is not set"),
        ("replace-me", "DJANGO_SECRET_KEY is a placeholder"),
        ("short-but-not-a-placeholder", "DJANGO_SECRET_KEY is too weak"),
        ("a" * 60, "DJANGO_SECRET_KEY is too weak"),
    ],
)
def test_production_refuses_a_missing_or_weak_secret_key_in_one_line(tmp_path, secret_key, says):
    environment = {} if secret_key is None else {"DJANGO_SECRET_KEY": secret_key}

    done = start(tmp_path, MANAGE_CHECK, **environment)  # DJANGO_ENV unset: production

    assert done.returncode == 1
    assert done.stderr.strip().splitlines() == [done.stderr.strip()], done.stderr  # one line
    assert says in done.stderr
    assert "Traceback" not in done.stderr


@pytest.mark.parametrize(
    ("variable", "url", "says"),
    [
        ("DATABASE_URL", "nonsense", "DATABASE_URL must be a PostgreSQL URL"),
        ("DATABASE_URL", "mysql://user:secret-password@db/name", "DATABASE_URL must be a PostgreSQL URL"),
        ("DATABASE_URL", "postgres://user:secret-password@db:port/name", "DATABASE_URL is malformed"),
        ("DATABASE_URL", "postgres://user:secret-password@db:5432/", "DATABASE_URL names no database"),
        ("DATABASE_REPLICA_URL", "mysql://user:secret-password@db/name", "DATABASE_REPLICA_URL must be a PostgreSQL"),
        ("REDIS_URL", "localhost:6379", "REDIS_URL must be a Redis URL"),
        ("REDIS_URL", "http://redis.internal:6379/0", "REDIS_URL must be a Redis URL"),
        ("REDIS_URL", "redis://:secret-password@redis.internal:port/0", "REDIS_URL has a port that is not a number"),
        ("REDIS_URL", "redis://:secret-password@/0", "REDIS_URL names no host"),
    ],
)
def test_a_malformed_url_is_refused_in_one_line_without_its_password(tmp_path, variable, url, says):
    done = start(tmp_path, MANAGE_CHECK, DJANGO_SECRET_KEY=secrets.token_urlsafe(50), **{variable: url})

    assert done.returncode == 1
    assert len(done.stderr.strip().splitlines()) == 1, done.stderr
    assert says in done.stderr
    assert "secret-password" not in done.stderr


@pytest.mark.parametrize("value", ["1e18x", "0.7,5", "much"])
def test_a_number_setting_that_is_no_number_is_refused_in_one_line(tmp_path, value):
    done = start(tmp_path, MANAGE_CHECK, DJANGO_ENV="development", SEARCH_GRAPH_MIN_SHARE_ROWS=value)

    assert done.returncode == 1
    assert done.stderr.strip() == f"memoryproject: SEARCH_GRAPH_MIN_SHARE_ROWS must be a number, not {value!r}."


def test_a_number_setting_is_read_as_python_reads_one(tmp_path):
    shown = [sys.executable, "manage.py", "shell", "--no-imports", "-c", "from django.conf import settings as s;"
             " print(s.SEARCH_GRAPH_MIN_SHARE_ROWS, s.FACTS_SEARCH_VECTOR_WEIGHT)"]  # fmt: skip

    done = start(tmp_path, shown, DJANGO_ENV="development", SEARCH_GRAPH_MIN_SHARE_ROWS="1e18",
                 FACTS_SEARCH_VECTOR_WEIGHT=" 0.65 ")  # fmt: skip

    assert done.stdout.split() == ["1e+18", "0.65"], done.stderr


@pytest.mark.slow
def test_gunicorn_stops_at_once_on_a_missing_secret_key_instead_of_booting_workers(tmp_path):
    done = start(tmp_path, GUNICORN)

    assert done.returncode == 1
    assert "DJANGO_SECRET_KEY is not set" in done.stderr
    assert "Booting worker" not in done.stderr + done.stdout
    assert "Traceback" not in done.stderr


def test_development_runs_without_a_secret_key_on_one_made_once_and_kept_private(tmp_path):
    path = tmp_path / "var" / "secret_key"

    first = development_secret_key(path)
    again = development_secret_key(path)

    assert first == again
    assert len(first) >= 50
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert list(path.parent.iterdir()) == [path]  # no draft left beside it


def test_development_settings_start_without_a_secret_key(tmp_path):
    done = start(tmp_path, MANAGE_CHECK, DJANGO_ENV="development")

    assert done.returncode == 0, done.stderr
