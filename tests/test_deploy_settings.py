"""Production security settings from the environment: `check --deploy` is clean with .env.production.example, and
the development defaults still serve plain HTTP."""

import os
import re
import secrets
import subprocess
import sys
from pathlib import Path

import pytest
from django.conf import settings
from rest_framework.test import APIClient

ROOT = Path(settings.BASE_DIR)


def production_values() -> dict[str, str]:
    values = {}
    for line in (ROOT / ".env.production.example").read_text().splitlines():
        if line.strip() and not line.lstrip().startswith("#"):
            name, _, value = line.partition("=")
            values[name.strip()] = value.strip()
    return values


def check_deploy(tmp_path, **environment) -> subprocess.CompletedProcess:
    env = {key: value for key, value in os.environ.items() if not key.startswith(("DJANGO_", "API_", "REDIS_URL"))}
    env.update(
        DJANGO_SETTINGS_MODULE="memoryproject.settings",
        EMBEDDED_PG_DATA_DIR=str(tmp_path / "pgdata"),  # never the developer's database
        EMBEDDING_PROVIDER="hash",
        **environment,
    )
    return subprocess.run(
        [sys.executable, "manage.py", "check", "--deploy", "--fail-level", "WARNING"],
        env=env,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )


@pytest.mark.slow
def test_check_deploy_is_clean_with_the_documented_production_values(tmp_path):
    values = production_values()
    assert values["DJANGO_DEBUG"] == "false"
    assert values["DJANGO_ENV"] == "production"
    assert values["DJANGO_SECRET_KEY"] == "replace-me"  # a placeholder, which check --deploy refuses (below)

    done = check_deploy(tmp_path, **{**values, "DJANGO_SECRET_KEY": secrets.token_urlsafe(50)})

    assert done.returncode == 0, done.stderr
    assert "System check identified no issues (0 silenced)." in done.stdout


@pytest.mark.slow
def test_check_deploy_names_each_missing_setting(tmp_path):
    # Development: production would not start on the placeholder key at all (tests/test_start_refusals.py).
    done = check_deploy(tmp_path, DJANGO_ENV="development", DJANGO_DEBUG="false", DJANGO_SECRET_KEY="replace-me")

    assert done.returncode != 0
    for warning in ["W004", "W008", "W009", "W012", "W016"]:  # HSTS, redirect, weak key, both cookies
        assert f"security.{warning}" in done.stderr
    assert "drf_spectacular" not in done.stderr


def test_a_malformed_proxy_header_setting_is_refused(tmp_path):
    done = check_deploy(tmp_path, DJANGO_ENV="development", DJANGO_SECURE_PROXY_SSL_HEADER="HTTP_X_FORWARDED_PROTO")

    assert done.returncode != 0
    assert "DJANGO_SECURE_PROXY_SSL_HEADER must be 'HEADER,value'" in done.stderr


def test_development_defaults_serve_plain_http():
    assert settings.SECURE_SSL_REDIRECT is False
    assert settings.SECURE_PROXY_SSL_HEADER is None
    assert (settings.SESSION_COOKIE_SECURE, settings.CSRF_COOKIE_SECURE) == (False, False)
    assert settings.SECURE_HSTS_SECONDS == 0


@pytest.mark.django_db
def test_behind_the_proxy_https_is_recognised_http_redirected_and_health_exempt(settings, tenant_and_key):
    settings.SECURE_SSL_REDIRECT = True
    settings.SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
    settings.SECURE_HSTS_SECONDS = 31536000
    settings.SECURE_HSTS_INCLUDE_SUBDOMAINS = settings.SECURE_HSTS_PRELOAD = True
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {tenant_and_key[1]}")

    plain = client.get("/api/v1/whoami")
    secure = client.get("/api/v1/whoami", HTTP_X_FORWARDED_PROTO="https")
    health = APIClient().get("/api/health")

    assert plain.status_code == 301
    assert plain["Location"] == "https://testserver/api/v1/whoami"
    assert secure.status_code == 200
    assert secure["Strict-Transport-Security"] == "max-age=31536000; includeSubDomains; preload"
    assert health.status_code == 200  # load balancers probe over plain HTTP


@pytest.mark.parametrize("example", [".env.example", ".env.production.example"])
def test_uncommenting_a_documented_setting_gives_its_value_alone(example):
    # python-dotenv style parsers (django-environ's) keep "10   # comment" as the value: comments go on their own line.
    with_inline_comment = [
        line for line in (ROOT / example).read_text().splitlines() if re.match(r"^#?\s*[A-Z][A-Z0-9_]*=\S*\s+#", line)
    ]
    assert with_inline_comment == []
