import os

import pytest
from django_q.conf import Conf

from ai.services import provider_states_reset
from tests.factories import client_with_key, make_tenant
from tests.fake_openai import API_KEY as FAKE_API_KEY
from tests.fake_openai import FakeOpenAI
from tests.redis_server import redis_server

# mem0ai (tests/mem0api) reads this when imported: whichever test imports it first, nothing is sent anywhere.
os.environ["MEM0_TELEMETRY"] = "False"


@pytest.fixture(autouse=True)
def _provider_states_forgotten():
    """The AI providers' recorded outcomes are per process: one test's outage must not show in the next one's probes."""
    provider_states_reset()
    yield
    provider_states_reset()


@pytest.fixture
def throttle_clock(monkeypatch):
    """The throttles' clock, at 10 s past a minute (no window ends while a test counts); tests move it forward."""
    from tenancy.throttling import FixedWindowThrottle

    now = [1_800_000_000.0 - 1_800_000_000 % 60 + 10]
    monkeypatch.setattr(FixedWindowThrottle, "timer", staticmethod(lambda: now[0]))
    return now


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


@pytest.fixture
def fake_openai():
    """A local OpenAI-compatible server (embeddings + chat) that the real openai client talks to."""
    server = FakeOpenAI().start()
    yield server
    server.stop()


@pytest.fixture
def openai_settings(settings, fake_openai):
    """Point the embedding and chat providers at `fake_openai`."""
    settings.EMBEDDING_PROVIDER = "openai"
    settings.EMBEDDING_MODEL = "fake-embed"
    settings.CHAT_PROVIDER = "openai"
    settings.CHAT_MODEL = "fake-chat"
    settings.OPENAI_BASE_URL = fake_openai.base_url
    settings.OPENAI_API_KEY = FAKE_API_KEY
    settings.OPENAI_MAX_RETRIES = 2
    settings.OPENAI_TIMEOUT = 5.0
    return settings


@pytest.fixture(params=["orm", "redis"])
def broker(request, tmp_path, monkeypatch):
    """The broker this process queues into, as `settings` would configure it: {} for the ORM broker, or the
    REDIS_URL of a real Redis started for the test."""
    monkeypatch.setattr(Conf, "SYNC", False)  # queue into the broker, as in production
    if request.param == "orm":
        yield {}
        return
    with redis_server(tmp_path) as url:
        monkeypatch.setattr(Conf, "BROKER_CLASS", None)
        monkeypatch.setattr(Conf, "ORM", None)
        monkeypatch.setattr(Conf, "REDIS", url)
        yield {"REDIS_URL": url}
