"""mem0ai's real clients against a live server. Its telemetry (PostHog) is off before mem0 is first imported, and
its config folder (~/.mem0, written on import) is a temporary one."""

import atexit
import os
import shutil
import tempfile

os.environ["MEM0_TELEMETRY"] = "False"
if "MEM0_DIR" not in os.environ:
    os.environ["MEM0_DIR"] = tempfile.mkdtemp(prefix="mem0-config-")
    atexit.register(shutil.rmtree, os.environ["MEM0_DIR"], ignore_errors=True)

import pytest  # noqa: E402
from mem0 import MemoryClient  # noqa: E402
from mem0.memory import telemetry  # noqa: E402

from tests.factories import make_tenant  # noqa: E402


@pytest.fixture(autouse=True)
def _telemetry_off():
    """Every test here would fail rather than send anything to PostHog."""
    assert telemetry.MEM0_TELEMETRY is False
    assert telemetry.client_telemetry.posthog is None


@pytest.fixture
def mem0_host(live_server) -> str:
    """The `host` a Mem0 user gives MemoryClient: this service's address + /mem0 (no trailing slash)."""
    return f"{live_server.url}/mem0"


@pytest.fixture
def acme(transactional_db):
    return make_tenant("acme")


@pytest.fixture
def globex(transactional_db):
    return make_tenant("globex")


@pytest.fixture
def acme_mem0(mem0_host, acme) -> MemoryClient:
    """mem0ai's MemoryClient holding acme's key, constructed (its key check made) against the live server."""
    memory = MemoryClient(api_key=acme[1], host=mem0_host)
    yield memory
    memory.client.close()


@pytest.fixture
def globex_mem0(mem0_host, globex) -> MemoryClient:
    memory = MemoryClient(api_key=globex[1], host=mem0_host)
    yield memory
    memory.client.close()
