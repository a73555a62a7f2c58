"""Tenant and key management commands."""

import json
from io import StringIO
from pathlib import Path

import pytest
from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.management import CommandError, call_command

from tenancy.models import Tenant
from tests.factories import client_with_key

pytestmark = pytest.mark.django_db


def run(*args) -> list[str]:
    out = StringIO()
    call_command(*args, stdout=out)
    return out.getvalue().strip().splitlines()


def test_create_tenant_prints_a_key_that_works():
    lines = run("create_tenant", "initech")

    key = lines[-1]
    response = client_with_key(key).get("/api/v1/whoami")
    assert response.status_code == 200
    assert response.json()["tenant"] == "initech"


def test_create_tenant_refuses_a_duplicate_name():
    run("create_tenant", "initech")

    with pytest.raises(CommandError, match="already exists"):
        run("create_tenant", "initech")
    assert Tenant.objects.filter(name="initech").count() == 1


def test_create_api_key_issues_another_working_key():
    first = run("create_tenant", "initech")[-1]

    second = run("create_api_key", "initech", "--name", "staging")[-1]

    assert second != first
    for key in (first, second):
        assert client_with_key(key).get("/api/v1/whoami").json()["tenant"] == "initech"


def test_create_api_key_for_an_unknown_tenant_names_the_fix():
    with pytest.raises(CommandError, match="create_tenant nobody"):
        run("create_api_key", "nobody")


@pytest.fixture
def credentials_file():
    path = Path(settings.BASE_DIR) / "var" / "demo-credentials.json"
    saved = path.read_text() if path.exists() else None
    yield path
    if saved is None:
        path.unlink(missing_ok=True)
    else:
        path.write_text(saved)


def test_bootstrap_demo_is_idempotent_and_reprints_a_working_key(credentials_file, monkeypatch):
    credentials_file.unlink(missing_ok=True)
    monkeypatch.setenv("DJANGO_SUPERUSER_PASSWORD", "correct horse battery")

    first = "\n".join(run("bootstrap_demo", "--tenant", "demo-test"))
    second = "\n".join(run("bootstrap_demo", "--tenant", "demo-test"))

    key = json.loads(credentials_file.read_text())["api_key"]
    assert key in first
    assert key in second
    assert client_with_key(key).get("/api/v1/whoami").json()["tenant"] == "demo-test"
    assert Tenant.objects.filter(name="demo-test").count() == 1
    admin = get_user_model().objects.get(username="admin")
    assert admin.is_superuser
    assert admin.check_password("correct horse battery")
