"""What the Mem0-compatible API costs over our own REST calls: p50 of the same operations through mem0ai's
MemoryClient (under /mem0/) and through plain httpx calls to /api/v1, one server, same run.

    .venv/bin/python bench/mem0_api.py [--facts 1000] [--calls 200] [--rounds 3] [--embedder hash]

Starts `manage.py runserver` on the dev database (one process; a new connection per call), for a user with
`--facts` facts, and alternates the two sides call by call (so the machine's drift hits both alike): search (top
10), get_all (100 per page), get one, and a single add stored as given (Mem0's infer=false is facts_import; our
equivalent is POST /facts/import). Prints p50 / p95 per operation and side and their ratio; asserts nothing. Works in
a throwaway tenant, deleted afterwards.
"""

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
import uuid

parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
parser.add_argument("--facts", type=int, default=1000)
parser.add_argument("--calls", type=int, default=200, help="per operation, side and round")
parser.add_argument("--rounds", type=int, default=3)
parser.add_argument("--embedder", default="hash", help="EMBEDDING_PROVIDER for the bench and the server")
args = parser.parse_args()
os.environ["EMBEDDING_PROVIDER"] = args.embedder  # before Django reads its settings (the server inherits it)
os.environ["MEM0_TELEMETRY"] = "False"  # before mem0 is imported
os.environ.setdefault("MEM0_DIR", tempfile.mkdtemp(prefix="mem0-config-"))

import _django  # noqa: E402, F401
import httpx  # noqa: E402
from _server import free_port  # noqa: E402
from django.conf import settings  # noqa: E402
from mem0 import MemoryClient  # noqa: E402

from facts.services import facts_import  # noqa: E402
from tenancy.models import Tenant  # noqa: E402
from tenancy.services import tenant_create  # noqa: E402

USER = "bench-user"
WORDS = "postgres kubernetes deploy friday lisbon berlin tea coffee rust python review budget invoice".split()


def percentiles(timings: list[float]) -> tuple[float, float]:
    timings = sorted(timings)
    return statistics.median(timings), timings[int(len(timings) * 0.95)]


def timed(call) -> float:
    started = time.perf_counter()
    call()
    return (time.perf_counter() - started) * 1000


def main() -> None:
    tenant, issued = tenant_create(name=f"bench-mem0-{uuid.uuid4().hex[:8]}")
    facts = [
        {"user_id": USER, "content": f"Prefers {WORDS[i % 13]} and {WORDS[(i * 7) % 13]} ({i})"}
        for i in range(args.facts)
    ]
    for start in range(0, len(facts), 1000):
        facts_import(tenant=tenant, facts=facts[start : start + 1000], actor="bench")
    port = free_port()
    env = {**os.environ, "API_THROTTLE_BURST": "", "API_THROTTLE_RATE": ""}  # measure the calls, not the throttle
    server = subprocess.Popen(
        [sys.executable, str(settings.BASE_DIR / "manage.py"), "runserver", f"127.0.0.1:{port}", "--noreload"],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    base = f"http://127.0.0.1:{port}"
    try:
        wait(f"{base}/api/health/live")
        # A connection per call on both sides: on a kept-alive connection runserver's separate header and body writes
        # meet the client's delayed ACK now and then (+40 ms, on either side at random).
        fresh = httpx.Limits(max_keepalive_connections=0)
        rest = httpx.Client(
            base_url=f"{base}/api/v1", headers={"Authorization": f"Bearer {issued.key}"}, timeout=30, limits=fresh
        )
        mem0 = MemoryClient(api_key=issued.key, host=f"{base}/mem0", client=httpx.Client(timeout=30, limits=fresh))
        one = str(rest.get("/facts", params={"user_id": USER, "limit": 1}).json()["results"][0]["id"])
        operations = {
            "search": (
                lambda: rest.post("/facts/search", json={"user_id": USER, "query": "coffee in berlin", "limit": 10}),
                lambda: mem0.search("coffee in berlin", filters={"user_id": USER}, top_k=10),
            ),
            "get_all": (
                lambda: rest.get("/facts", params={"user_id": USER, "limit": 100}),
                lambda: mem0.get_all(filters={"user_id": USER}, page=1, page_size=100),
            ),
            "get": (lambda: rest.get(f"/facts/{one}"), lambda: mem0.get(one)),
            "add": (
                lambda: rest.post("/facts/import", json={"facts": [{"user_id": "adder", "content": "Likes tea"}]}),
                lambda: mem0.add([{"role": "user", "content": "Likes tea"}], user_id="adder", infer=False),
            ),
        }
        for ours, theirs in operations.values():  # warm both paths (imports, caches, connections)
            for _ in range(5):
                ours(), theirs()
        print(f"{args.facts} facts for the user, {args.calls} calls per operation, side and round, {args.embedder}")
        totals = {name: ([], []) for name in operations}
        for round_number in range(1, args.rounds + 1):
            for name, (ours, theirs) in operations.items():
                rest_ms, mem0_ms = [], []
                for _ in range(args.calls):
                    rest_ms.append(timed(ours))
                    mem0_ms.append(timed(theirs))
                totals[name][0].extend(rest_ms)
                totals[name][1].extend(mem0_ms)
                (rest_p50, rest_p95), (mem0_p50, mem0_p95) = percentiles(rest_ms), percentiles(mem0_ms)
                print(
                    f"round {round_number} {name:>8}: /api/v1 p50 {rest_p50:6.2f} ms p95 {rest_p95:6.2f}   "
                    f"/mem0 p50 {mem0_p50:6.2f} ms p95 {mem0_p95:6.2f}   {mem0_p50 / rest_p50:4.2f}x",
                    flush=True,
                )
        for name, (rest_ms, mem0_ms) in totals.items():
            rest_p50, mem0_p50 = percentiles(rest_ms)[0], percentiles(mem0_ms)[0]
            print(
                f"all rounds {name:>8}: /api/v1 p50 {rest_p50:6.2f} ms   /mem0 p50 {mem0_p50:6.2f} ms   "
                f"+{mem0_p50 - rest_p50:5.2f} ms ({mem0_p50 / rest_p50:4.2f}x)"
            )
        rest.close()
        mem0.client.close()
    finally:
        server.terminate()
        server.wait(timeout=30)
        Tenant.objects.filter(pk=tenant.pk).delete()


def wait(url: str, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if httpx.get(url, timeout=2).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.3)
    raise SystemExit(f"the server did not answer {url} within {timeout:.0f} s")


if __name__ == "__main__":
    main()
