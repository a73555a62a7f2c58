"""What the API throttles cost a request: whoami (the cheapest authenticated call) with the throttles off and on,
on the configured cache (the database cache table unless REDIS_URL is set).

    .venv/bin/python bench/throttling.py [--requests 400]

Requests go through Django's test client in this process (server time, no network). Prints p50/p95 and the queries
of one request; asserts nothing. Works in a throwaway tenant of the current database (run `manage.py migrate`
first) and deletes it afterwards.
"""

import argparse
import statistics
import time
import uuid

import _django  # noqa: F401
from django.conf import settings
from django.db import connection
from django.test import Client, override_settings
from django.test.utils import CaptureQueriesContext

from tenancy.services import tenant_create

OFF = {"API_THROTTLE_BURST": "", "API_THROTTLE_RATE": "", "AUTH_FAILURE_THROTTLE_RATE": ""}
ON = {"API_THROTTLE_BURST": "1000000/10s", "API_THROTTLE_RATE": "1000000/min", "AUTH_FAILURE_THROTTLE_RATE": "30/min"}


def measure(client: Client, requests: int) -> tuple[float, float, int]:
    times = []
    for _ in range(requests):
        start = time.perf_counter()
        assert client.get("/api/v1/whoami").status_code == 200
        times.append((time.perf_counter() - start) * 1000)
    with CaptureQueriesContext(connection) as captured:
        client.get("/api/v1/whoami")
    return statistics.median(times), statistics.quantiles(times, n=20)[18], len(captured)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=400)
    args = parser.parse_args()
    tenant, issued = tenant_create(name=f"bench-throttle-{uuid.uuid4().hex[:8]}")
    client = Client(HTTP_AUTHORIZATION=f"Bearer {issued.key}")
    print(f"cache: {settings.CACHES['default']['BACKEND']}, {args.requests} requests each")
    try:
        for label, rates in [("off", OFF), ("on", ON), ("off", OFF), ("on", ON)]:
            with override_settings(**rates):
                p50, p95, queries = measure(client, args.requests)
            print(f"  throttles {label:3}: p50 {p50:.2f} ms, p95 {p95:.2f} ms, {queries} queries per request")
    finally:
        tenant.delete()


if __name__ == "__main__":
    main()
