"""API-key authentication and tenant isolation, over real HTTP requests."""

import pytest
from django.utils import timezone
from rest_framework.test import APIClient

from tenancy.services import api_key_revoke
from tests.factories import client_with_key, make_fact

pytestmark = pytest.mark.django_db


def test_valid_key_authenticates_as_its_tenant(api, tenant):
    response = api.get("/api/v1/whoami")

    assert response.status_code == 200
    assert response.json()["tenant"] == tenant.name


def assert_unauthorized(response, code: str):
    assert response.status_code == 401
    assert response["WWW-Authenticate"].startswith("Bearer")
    error = response.json()["error"]
    assert error["code"] == code
    assert error["message"]
    assert error["details"] == {}


def test_missing_key_is_401_with_the_error_body():
    assert_unauthorized(APIClient().get("/api/v1/whoami"), "not_authenticated")


def test_unknown_key_is_401(tenant):
    assert_unauthorized(client_with_key("mp_not-a-real-key").get("/api/v1/whoami"), "authentication_failed")


def test_revoked_key_is_401(tenant_and_key):
    tenant, key = tenant_and_key
    api_key_revoke(api_key=tenant.api_keys.get())

    assert_unauthorized(client_with_key(key).get("/api/v1/whoami"), "authentication_failed")


def test_key_of_a_deactivated_tenant_is_401(tenant_and_key):
    tenant, key = tenant_and_key
    tenant.is_active = False
    tenant.save()

    assert_unauthorized(client_with_key(key).get("/api/v1/whoami"), "authentication_failed")


def test_malformed_authorization_header_is_401(tenant):
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION="Bearer")

    assert_unauthorized(client.get("/api/v1/whoami"), "authentication_failed")


def test_only_the_hash_of_a_key_is_stored(tenant_and_key):
    tenant, key = tenant_and_key
    stored = tenant.api_keys.get()

    assert key not in (stored.key_hash, stored.prefix)
    assert key.startswith(stored.prefix)


def test_a_tenant_reads_its_own_fact(api, tenant):
    fact = make_fact(tenant=tenant, content="prefers PostgreSQL", valid_from=timezone.now())

    response = api.get(f"/api/v1/facts/{fact.pk}")

    assert response.status_code == 200
    assert response.json()["content"] == "prefers PostgreSQL"


def test_a_fact_of_another_tenant_is_404_like_a_missing_one(api, other_tenant_and_key):
    other_tenant, _ = other_tenant_and_key
    foreign = make_fact(tenant=other_tenant, content="globex secret")

    response = api.get(f"/api/v1/facts/{foreign.pk}")
    missing = api.get(f"/api/v1/facts/{foreign.pk + 1000}")

    assert response.status_code == 404
    assert response.json() == missing.json()
    assert response.json()["error"]["code"] == "not_found"
    assert "globex" not in response.content.decode()
