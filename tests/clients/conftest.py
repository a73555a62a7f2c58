"""The Python client (clients/python) against a live server: pytest-django's `live_server`, in a thread of this
process, on the test database. The server thread commits what it writes, hence `transactional_db`."""

import pytest

from memoryproject_client import AsyncMemoryClient, MemoryClient
from tests.factories import make_tenant


@pytest.fixture
def tenant_and_key(transactional_db):
    return make_tenant("acme")


@pytest.fixture
def key(tenant_and_key):
    return tenant_and_key[1]


@pytest.fixture
def client(live_server, key):
    with MemoryClient(live_server.url, key, max_retries=0) as client:
        yield client


@pytest.fixture
def async_client_factory(live_server, key):
    """Builds an AsyncMemoryClient inside the test's event loop (a client belongs to the loop it runs in)."""
    return lambda: AsyncMemoryClient(live_server.url, key, max_retries=0)
