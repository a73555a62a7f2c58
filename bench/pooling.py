"""Requests/s with and without DATABASE_POOL (psycopg's pool), against a real server on the dev database.

    .venv/bin/python bench/pooling.py [--clients 8] [--requests 400] [--rounds 3]

Starts `manage.py runserver` (one process, a thread per request: every request opens its own database connection
unless a pool lends one) once per variant and round, alternating (off, on, off, on, ...) so the machine's drift hits
both alike, with `--clients` threads calling GET /api/v1/facts and POST /api/v1/facts/search for a user with 200
facts. Prints requests/s and p50/p95 per round; asserts nothing. Works in a throwaway tenant, deleted afterwards.
"""

import argparse
import json
import os
import socket
import statistics
import subprocess
import sys
import threading
import time
import urllib.request
import uuid

import _django  # noqa: F401
from django.conf import settings

from facts.services import facts_import
from tenancy.models import Tenant
from tenancy.services import tenant_create


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument("--requests", type=int, default=400, help="per round and variant")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    tenant, issued = tenant_create(name=f"bench-pool-{uuid.uuid4().hex[:8]}")
    key = issued.key
    facts_import(
        tenant=tenant,
        facts=[{"user_id": "bench-user", "content": f"Fact number {i} about databases"} for i in range(200)],
        actor="bench",
    )
    results = {"off": [], "on": []}
    try:
        for round_number in range(1, args.rounds + 1):
            for variant in ("off", "on"):
                figures = run_round(variant == "on", key, args.clients, args.requests)
                results[variant].append(figures)
                print(f"round {round_number} pool {variant:>3}: {figures[0]:6.1f} req/s, p50 {figures[1]:5.1f} ms, "
                      f"p95 {figures[2]:5.1f} ms", flush=True)  # fmt: skip
    finally:
        Tenant.objects.filter(pk=tenant.pk).delete()
    for variant, rounds in results.items():
        rates = [rate for rate, _, _ in rounds]
        print(f"pool {variant:>3}: mean {statistics.mean(rates):6.1f} req/s over {len(rates)} rounds")
    on, off = statistics.mean(r for r, _, _ in results["on"]), statistics.mean(r for r, _, _ in results["off"])
    print(f"with the pool / without: {on / off:.2f}x ({args.clients} clients)")


def run_round(pool: bool, key: str, clients: int, requests: int) -> tuple[float, float, float]:
    port = _free_port()
    env = {
        **os.environ,
        "DATABASE_POOL": "true" if pool else "false",
        "DATABASE_POOL_MAX_SIZE": str(clients),
        "API_THROTTLE_BURST": "",  # one key sends everything: measure the database, not the throttle
        "API_THROTTLE_RATE": "",
    }
    env["DATABASE_CONN_MAX_AGE"] = "0"  # without the pool: a new connection per request, as before the pool
    server = subprocess.Popen(
        [sys.executable, str(settings.BASE_DIR / "manage.py"), "runserver", f"127.0.0.1:{port}", "--noreload"],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        base = f"http://127.0.0.1:{port}/api/v1"
        _wait(f"http://127.0.0.1:{port}/api/health/live", f"http://127.0.0.1:{port}/api/health")
        latencies, lock = [], threading.Lock()
        per_client = requests // clients

        def client(index: int) -> None:
            for number in range(per_client):
                started = time.perf_counter()
                if number % 2:
                    _call(f"{base}/facts?user_id=bench-user&limit=10", key)
                else:
                    _call(f"{base}/facts/search", key, {"user_id": "bench-user", "query": f"databases {index}"})
                with lock:
                    latencies.append((time.perf_counter() - started) * 1000)

        threads = [threading.Thread(target=client, args=(index,)) for index in range(clients)]
        started = time.perf_counter()
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        elapsed = time.perf_counter() - started
        latencies.sort()
        return len(latencies) / elapsed, latencies[len(latencies) // 2], latencies[int(len(latencies) * 0.95)]
    finally:
        server.terminate()
        server.wait(timeout=15)


def _call(url: str, key: str, body: dict | None = None) -> None:
    data = json.dumps(body).encode() if body is not None else None
    request = urllib.request.Request(url, data=data, headers={"Authorization": f"Bearer {key}"})
    if data is not None:
        request.add_header("Content-Type", "application/json")
    with urllib.request.urlopen(request, timeout=60) as response:
        response.read()


def _wait(*urls: str) -> None:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        for url in urls:
            try:
                with urllib.request.urlopen(url, timeout=2):
                    return
            except OSError:
                pass
        time.sleep(0.3)
    raise SystemExit("the server did not start")


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


if __name__ == "__main__":
    main()
