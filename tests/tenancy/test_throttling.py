"""Throttling: per API key (burst and sustained), per client address for failed authentication, 429s in the error
shape with Retry-After, counters in the shared database cache."""

import os
import subprocess
import sys
from pathlib import Path

import pytest
import redis
from django.conf import settings as django_settings
from django.core.cache import caches
from django.core.cache.backends.db import DatabaseCache
from django.core.management import call_command
from django.db import connection
from rest_framework.test import APIClient

from tenancy.services import api_key_create, api_key_revoke
from tenancy.throttling import address_bucket, rate_parse
from tests.factories import client_with_key
from tests.redis_server import redis_server

pytestmark = pytest.mark.django_db


def statuses(client, n: int, url: str = "/api/v1/whoami", **extra) -> list[int]:
    return [client.get(url, **extra).status_code for _ in range(n)]


def assert_throttled(response, retry_after: int):
    assert response.status_code == 429
    assert response["Retry-After"] == str(retry_after)
    error = response.json()["error"]
    assert error["code"] == "throttled"
    assert f"Expected available in {retry_after} second" in error["message"]
    assert error["details"] == {}


class TestPerKey:
    def test_past_the_burst_a_key_gets_429_with_retry_after_until_the_window_ends(self, api, settings, throttle_clock):
        settings.API_THROTTLE_BURST = "3/10s"

        assert statuses(api, 3) == [200, 200, 200]
        assert_throttled(api.get("/api/v1/whoami"), retry_after=10)  # the 10 s window started at :10
        throttle_clock[0] += 4.5
        assert_throttled(api.get("/api/v1/facts", {"user_id": "u1"}), retry_after=6)  # every route, not one
        throttle_clock[0] += 6
        assert statuses(api, 3) == [200, 200, 200]

    def test_the_sustained_rate_holds_past_the_burst(self, api, settings, throttle_clock):
        settings.API_THROTTLE_BURST = "2/s"
        settings.API_THROTTLE_RATE = "5/min"

        served = []
        for _ in range(8):
            served.append(api.get("/api/v1/whoami").status_code)
            throttle_clock[0] += 1  # slow enough for the burst
        assert served == [200] * 5 + [429] * 3
        assert_throttled(api.get("/api/v1/whoami"), retry_after=60 - 18)  # the minute ends at :60, it is :18
        throttle_clock[0] += 42
        assert api.get("/api/v1/whoami").status_code == 200

    def test_a_throttled_key_does_not_slow_another_key(self, api, settings, throttle_clock, other_tenant_and_key):
        settings.API_THROTTLE_BURST = "2/min"
        other = client_with_key(other_tenant_and_key[1])

        assert statuses(api, 3) == [200, 200, 429]
        assert statuses(other, 2) == [200, 200]

    def test_two_keys_of_one_tenant_count_apart(self, tenant, api, settings, throttle_clock):
        settings.API_THROTTLE_BURST = "1/min"
        second = client_with_key(api_key_create(tenant=tenant, name="second").key)

        assert statuses(api, 2) == [200, 429]
        assert statuses(second, 1) == [200]

    def test_refused_requests_are_not_counted(self, api, settings, throttle_clock):
        settings.API_THROTTLE_BURST = "100/s"
        settings.API_THROTTLE_RATE = "2/min"

        assert statuses(api, 50) == [200, 200] + [429] * 48
        throttle_clock[0] += 50  # next minute
        assert statuses(api, 3) == [200, 200, 429]

    def test_health_is_not_throttled_by_key_nor_counted_as_a_failure(self, settings, throttle_clock):
        settings.API_THROTTLE_BURST = settings.AUTH_FAILURE_THROTTLE_RATE = "1/min"

        assert statuses(APIClient(), 5, "/api/health") == [200] * 5


class TestFailedAuthentication:
    def test_wrong_keys_from_one_address_lead_to_429_for_failures_only_then_the_window_ends(
        self, api, settings, throttle_clock, other_tenant_and_key
    ):
        settings.AUTH_FAILURE_THROTTLE_RATE = "3/min"
        wrong = client_with_key("mp_not-a-real-key")

        assert statuses(wrong, 3) == [401, 401, 401]
        assert_throttled(wrong.get("/api/v1/whoami"), retry_after=50)
        assert_throttled(APIClient().get("/api/v1/whoami"), retry_after=50)  # no key at all: a failure too
        # One misbehaving client behind a shared address locks out no tenant: a valid key is served.
        assert statuses(api, 2) == [200, 200]
        assert statuses(client_with_key(other_tenant_and_key[1]), 1) == [200]
        assert statuses(wrong, 1, REMOTE_ADDR="10.0.0.7") == [401]
        throttle_clock[0] += 50
        assert statuses(wrong, 1) == [401]

    def test_missing_malformed_and_revoked_keys_count_as_failures(self, tenant_and_key, settings, throttle_clock):
        settings.AUTH_FAILURE_THROTTLE_RATE = "4/min"
        tenant, key = tenant_and_key
        api_key_revoke(api_key=tenant.api_keys.get())
        malformed = APIClient()
        malformed.credentials(HTTP_AUTHORIZATION="Bearer")
        basic = APIClient()
        basic.credentials(HTTP_AUTHORIZATION="Basic dXNlcjpwdw==")

        answered = [
            APIClient().get("/api/v1/whoami").status_code,
            malformed.get("/api/v1/whoami").status_code,
            basic.get("/api/v1/whoami").status_code,
            client_with_key(key).get("/api/v1/whoami").status_code,
            APIClient().get("/api/v1/whoami").status_code,
        ]
        assert answered == [401, 401, 401, 401, 429]

    def test_a_forged_x_forwarded_for_does_not_give_a_new_address(self, settings, throttle_clock):
        settings.AUTH_FAILURE_THROTTLE_RATE = "2/min"
        wrong = client_with_key("mp_not-a-real-key")

        answered = [wrong.get("/api/v1/whoami", HTTP_X_FORWARDED_FOR=f"203.0.113.{n}").status_code for n in range(4)]

        assert answered == [401, 401, 429, 429]

    def test_behind_a_proxy_the_client_address_comes_from_x_forwarded_for(self, settings, throttle_clock):
        settings.AUTH_FAILURE_THROTTLE_RATE = "2/min"
        settings.REST_FRAMEWORK = {**settings.REST_FRAMEWORK, "NUM_PROXIES": 1}
        wrong = client_with_key("mp_not-a-real-key")

        def status(client_address: str) -> int:
            # The proxy (REMOTE_ADDR) appends the address it saw to what the client sent.
            return wrong.get("/api/v1/whoami", HTTP_X_FORWARDED_FOR=f"1.2.3.4, {client_address}").status_code

        assert [status("198.51.100.1") for _ in range(3)] == [401, 401, 429]
        assert status("198.51.100.2") == 401

    def test_an_ipv6_client_counts_as_its_64(self):
        assert address_bucket("2001:db8:1:2:aaaa::1") == address_bucket("2001:db8:1:2:bbbb::9") == "2001:db8:1:2::/64"
        assert address_bucket("::ffff:192.0.2.5") == "192.0.2.5"
        assert address_bucket("192.0.2.5") == "192.0.2.5"


class TestSharedCounters:
    def test_the_counter_is_a_row_of_the_database_cache_table_that_any_process_reads(
        self, api, tenant, settings, throttle_clock
    ):
        settings.API_THROTTLE_BURST = "5/min"
        assert statuses(api, 2) == [200, 200]

        with connection.cursor() as cursor:
            cursor.execute("SELECT cache_key FROM memoryproject_cache WHERE cache_key LIKE %s", ["%api_key_burst%"])
            rows = [row[0] for row in cursor.fetchall()]
        window = int(throttle_clock[0] // 60)
        key = f"throttle_api_key_burst_{tenant.api_keys.get().pk}:60:{window}"
        assert rows == [f":1:{key}"]
        # A cache object of its own, as another web process holds, reads the same count.
        other_process = DatabaseCache("memoryproject_cache", {})
        assert other_process.get(key) == 2
        other_process.set(key, 5, 60)  # say the other processes served the rest of the minute
        assert api.get("/api/v1/whoami").status_code == 429

    def test_migrate_makes_the_cache_table(self):
        assert "memoryproject_cache" in connection.introspection.table_names()
        assert django_settings.CACHES["default"]["LOCATION"] == "memoryproject_cache"

    @pytest.mark.slow
    def test_two_processes_share_one_budget_on_a_fresh_database(self, tmp_path):
        root = Path(django_settings.BASE_DIR)
        env = {
            **os.environ,
            "EMBEDDED_PG_DATA_DIR": str(tmp_path / "pgdata"),
            "DJANGO_SETTINGS_MODULE": "memoryproject.settings",
            "EMBEDDING_PROVIDER": "hash",
            "API_THROTTLE_BURST": "",
            "API_THROTTLE_RATE": "3/h",
        }
        env.pop("DATABASE_URL", None)
        env.pop("REDIS_URL", None)

        def manage(*args) -> str:
            done = subprocess.run(
                [sys.executable, "manage.py", *args], env=env, cwd=root, capture_output=True, text=True, timeout=300
            )
            assert done.returncode == 0, done.stderr
            return done.stdout

        manage("migrate", "--noinput")  # what a fresh clone runs: no createcachetable
        key = manage("create_tenant", "acme").strip().splitlines()[-1]
        calls = (
            "from django.test import Client; client = Client(HTTP_AUTHORIZATION='Bearer {key}'); "
            "print(*[client.get('/api/v1/whoami').status_code for _ in range({n})])"
        )

        first = manage("shell", "-c", calls.format(key=key, n=2)).splitlines()[-1]
        second = manage("shell", "-c", calls.format(key=key, n=2)).splitlines()[-1]

        assert (first, second) == ("200 200", "200 429")


@pytest.mark.parametrize(
    ("rate", "parsed"),
    [
        ("1200/min", (1200, 60)),
        ("300/10s", (300, 10)),
        ("5/s", (5, 1)),
        ("100/hour", (100, 3600)),
        ("1000/day", (1000, 86400)),
        ("2/ 5 minutes", (2, 300)),
        ("", None),
        (None, None),
    ],
)
def test_rates_parse(rate, parsed):
    assert rate_parse(rate) == parsed


@pytest.mark.parametrize("rate", ["fast", "10/fortnight", "0/min", "5/0s", "-1/min"])
def test_a_bad_rate_fails_the_system_check(settings, rate):
    settings.API_THROTTLE_RATE = rate

    with pytest.raises(Exception, match="API_THROTTLE_RATE"):
        call_command("check")


def test_on_redis_the_counters_are_atomic_increments_shared_by_every_client(api, settings, throttle_clock, tmp_path):
    """REDIS_URL: the counters live in a real Redis (Django's RedisCache), where incr is Redis's own INCR."""
    with redis_server(tmp_path) as url:
        settings.CACHES = {"default": {"BACKEND": "django.core.cache.backends.redis.RedisCache", "LOCATION": url}}
        settings.API_THROTTLE_BURST = "3/10s"

        assert statuses(api, 3) == [200, 200, 200]
        assert_throttled(api.get("/api/v1/whoami"), retry_after=10)
        server = redis.Redis.from_url(url)
        [key] = server.keys("*api_key_burst*")
        assert int(server.get(key)) == 3
        assert type(caches["default"]).__name__ == "RedisCache"
