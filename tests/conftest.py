import pytest

from tests.factories import client_with_key, make_tenant


@pytest.fixture
def tenant_and_key(db):
    return make_tenant("acme")


@pytest.fixture
def tenant(tenant_and_key):
    return tenant_and_key[0]


@pytest.fixture
def api(tenant_and_key):
    """An API client authenticated as the `tenant` fixture."""
    return client_with_key(tenant_and_key[1])


@pytest.fixture
def other_tenant_and_key(db):
    return make_tenant("globex")
