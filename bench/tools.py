"""The agent tools' overhead: memory_search through POST /api/v1/tools/call against the plain POST
/api/v1/facts/search, and the MCP round trip of memory_search over streamable HTTP at /mcp, on `manage.py serve`
with its default gthread (WSGI) worker and with the uvicorn (ASGI) worker. Prints p50/p95 per way; asserts nothing.

    .venv/bin/python bench/tools.py [--queries 300] [--facts 1000] [--embedder hash|local]

Starts both servers itself on a throwaway embedded database (its own data folder), seeds one user with --facts facts,
then sends the same queries every way, interleaved query by query in a rotating order (the load others put on the
machine falls on every way alike), one client at a time over kept-alive connections. The embedding cache is off:
every request embeds its query. "MCP (SDK client)" is the official SDK's Client.call_tool, as an agent sees it;
"MCP (raw POST)" the same JSON-RPC request posted by hand, the server's part alone.
"""

import argparse
import asyncio
import os
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DATA_DIR = Path(tempfile.mkdtemp(prefix="bench-tools-"))
ENV = {
    **os.environ,
    "DJANGO_SETTINGS_MODULE": "memoryproject.settings",
    "DJANGO_ENV": "development",
    "EMBEDDED_PG_DATA_DIR": str(DATA_DIR / "pgdata"),
    "EMBEDDING_CACHE": "false",
    "API_THROTTLE_RATE": "",
    "API_THROTTLE_BURST": "",
    "LOG_LEVEL": "WARNING",
    "DJANGO_STATIC_ROOT": str(DATA_DIR / "static"),
}
ENV.pop("DATABASE_URL", None)
(DATA_DIR / "static").mkdir()
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

WORDS = (
    "postgres kubernetes deploy friday lisbon berlin tea coffee rust python vim emacs review budget invoice "
    "billing migration schema index cache latency incident runbook oncall release sprint roadmap design "
    "customer contract renewal pricing discount meeting standup retro hiring onboarding laptop vpn ticket"
).split()
USER = "bench-user"
LIMIT = 10


def seed(count: int) -> str:
    import django

    django.setup()
    from django.core.management import call_command

    from facts.services import facts_import
    from tenancy.services import tenant_create

    call_command("migrate", verbosity=0)
    tenant, issued = tenant_create(name="bench-tools")
    rng = random.Random(7)
    facts = [{"user_id": USER, "content": f"Prefers {' '.join(rng.sample(WORDS, 6))} (note {n})"} for n in range(count)]
    for start in range(0, count, 1000):
        facts_import(tenant=tenant, facts=facts[start : start + 1000], actor="bench")
    from django.db import connections

    connections.close_all()
    return issued.key


async def measure(urls: dict[str, str], key: str, queries: list[str]) -> dict[str, list[float]]:
    import httpx2
    from mcp.client import Client
    from mcp.client.streamable_http import streamable_http_client

    headers = {"Authorization": f"Bearer {key}"}
    timings: dict[str, list[float]] = {}
    async with (
        httpx2.AsyncClient(headers=headers, timeout=60) as http,
        httpx2.AsyncClient(headers={**headers, "X-User-Id": USER}, timeout=60) as gthread_mcp_http,
        httpx2.AsyncClient(headers={**headers, "X-User-Id": USER}, timeout=60) as uvicorn_mcp_http,
        Client(streamable_http_client(f"{urls['gthread']}/mcp", http_client=gthread_mcp_http), mode="legacy") as g,
        Client(streamable_http_client(f"{urls['uvicorn']}/mcp", http_client=uvicorn_mcp_http), mode="legacy") as u,
    ):

        def rest(base):
            async def call(query):
                response = await http.post(
                    f"{base}/api/v1/facts/search", json={"user_id": USER, "query": query, "limit": LIMIT}
                )
                assert response.status_code == 200, response.text
                assert len(response.json()["results"]) == LIMIT

            return call

        def tools_call(base):
            async def call(query):
                body = {"user_id": USER, "name": "memory_search", "arguments": {"query": query, "limit": LIMIT}}
                response = await http.post(f"{base}/api/v1/tools/call", json=body)
                assert response.status_code == 200, response.text
                assert len(response.json()["data"]["results"]) == LIMIT

            return call

        def mcp_sdk(client):
            async def call(query):
                result = await client.call_tool("memory_search", {"query": query, "limit": LIMIT})
                assert not result.is_error, result.content
                assert len(result.structured_content["results"]) == LIMIT

            return call

        def mcp_raw(base):
            async def call(query):
                body = {
                    "jsonrpc": "2.0",
                    "id": 1,
                    "method": "tools/call",
                    "params": {"name": "memory_search", "arguments": {"query": query, "limit": LIMIT}},
                }
                response = await http.post(
                    f"{base}/mcp",
                    json=body,
                    headers={
                        "X-User-Id": USER,
                        "Accept": "application/json, text/event-stream",
                        "MCP-Protocol-Version": "2025-06-18",
                    },
                )
                assert response.status_code == 200, response.text
                assert len(response.json()["result"]["structuredContent"]["results"]) == LIMIT

            return call

        ways = {
            "gthread  POST /api/v1/facts/search": rest(urls["gthread"]),
            "gthread  POST /api/v1/tools/call": tools_call(urls["gthread"]),
            "gthread  MCP (SDK client)": mcp_sdk(g),
            "gthread  MCP (raw POST)": mcp_raw(urls["gthread"]),
            "uvicorn  POST /api/v1/facts/search": rest(urls["uvicorn"]),
            "uvicorn  POST /api/v1/tools/call": tools_call(urls["uvicorn"]),
            "uvicorn  MCP (SDK client)": mcp_sdk(u),
            "uvicorn  MCP (raw POST)": mcp_raw(urls["uvicorn"]),
        }
        names = list(ways)
        for query in queries[:20]:  # warm up: connections, workers, the database's caches
            for name in names:
                await ways[name](query)
        for number, query in enumerate(queries):
            shift = number % len(names)
            for name in names[shift:] + names[:shift]:
                started = time.perf_counter()
                await ways[name](query)
                timings.setdefault(name, []).append((time.perf_counter() - started) * 1000)
    return timings


def report(timings: dict[str, list[float]], args) -> None:
    print(
        f"\nmemory_search, {args.facts:,} facts for the user, limit {LIMIT}, {args.embedder} embedder (no cache), "
        f"{len(next(iter(timings.values())))} queries per way, interleaved; {os.cpu_count()} cores"
    )
    print(f"{'server   way':<38} {'p50 ms':>8} {'p95 ms':>8}")
    medians = {}
    for name, values in timings.items():
        values.sort()
        medians[name] = statistics.median(values)
        print(f"{name:<38} {medians[name]:8.2f} {values[int(len(values) * 0.95)]:8.2f}")
    for server in ("gthread", "uvicorn"):
        rest = medians[f"{server}  POST /api/v1/facts/search"]
        for way in ("POST /api/v1/tools/call", "MCP (SDK client)", "MCP (raw POST)"):
            value = medians[f"{server}  {way}"]
            print(f"{server}: {way:<24} {value - rest:+6.2f} ms p50 over the plain search ({value / rest:.2f}x)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--queries", type=int, default=300)
    parser.add_argument("--facts", type=int, default=1000)
    parser.add_argument("--embedder", choices=["hash", "local"], default="hash")
    args = parser.parse_args()
    ENV["EMBEDDING_PROVIDER"] = args.embedder
    os.environ.update(ENV)  # this process seeds the same database
    key = seed(args.facts)

    from _server import ProductionServer

    servers = {
        "gthread": ProductionServer(env=ENV, log_path=DATA_DIR / "gthread.log"),
        "uvicorn": ProductionServer(
            env={**ENV, "WEB_WORKER_CLASS": "uvicorn_worker.UvicornWorker"}, log_path=DATA_DIR / "uvicorn.log"
        ),
    }
    try:
        for server in servers.values():
            server.start()
        for server in servers.values():
            server.wait_ready()
        rng = random.Random(11)
        queries = [" ".join(rng.sample(WORDS, 3)) for _ in range(args.queries)]
        timings = asyncio.run(measure({name: server.base_url for name, server in servers.items()}, key, queries))
        report(timings, args)
    finally:
        for server in servers.values():
            server.stop()


if __name__ == "__main__":
    main()
