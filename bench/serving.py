"""Application servers compared: gunicorn gthread (WSGI), gunicorn + uvicorn worker (ASGI) and runserver, serving
POST /api/v1/facts/search and POST /api/v1/context with the local embedder, at 1, 4 and 16 concurrent clients.
Prints requests/s and p50/p95 per server; asserts nothing.

    .venv/bin/python bench/serving.py [--seconds 5] [--rounds 2] [--workers 2] [--threads 4] [--servers ...]

EMBEDDING_THREADS in the environment applies to every server (EMBEDDING_THREADS=2 ... compares the thread count).

Starts the three servers itself on a throwaway embedded database (its own data folder), seeds one tenant with
1,000 facts of one user, then runs interleaved rounds (every server in each round, in a rotating order) so that
the load other engineers put on the machine falls on all of them alike. The embedding cache is off: every
request embeds its query, the costly part this comparison is about. The clients are threads in this process
(keep-alive connections), on the same cores as the servers.
"""

import argparse
import http.client
import json
import os
import random
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DATA_DIR = Path(tempfile.mkdtemp(prefix="bench-serving-"))
ENV = {
    **os.environ,
    "DJANGO_SETTINGS_MODULE": "memoryproject.settings",
    "DJANGO_ENV": "development",
    "EMBEDDED_PG_DATA_DIR": str(DATA_DIR / "pgdata"),
    "EMBEDDING_PROVIDER": "local",
    "EMBEDDING_CACHE": "false",
    "API_THROTTLE_RATE": "",
    "API_THROTTLE_BURST": "",
    "LOG_LEVEL": "WARNING",
    "DJANGO_STATIC_ROOT": str(DATA_DIR / "static"),  # empty: no static file is asked for
}
ENV.pop("DATABASE_URL", None)
(DATA_DIR / "static").mkdir()
os.environ.update(ENV)  # this process seeds the same database
sys.path.insert(0, str(ROOT))

import django  # noqa: E402

django.setup()

from django.conf import settings  # noqa: E402
from django.core.management import call_command  # noqa: E402

from facts.services import facts_import  # noqa: E402
from tenancy.services import tenant_create  # noqa: E402

WORDS = (
    "postgres kubernetes deploy friday lisbon berlin tea coffee rust python vim emacs review budget invoice "
    "billing migration schema index cache latency incident runbook oncall release sprint roadmap design "
    "customer contract renewal pricing discount meeting standup retro hiring onboarding laptop vpn ticket"
).split()
USER = "bench-user"
ENDPOINTS = {"facts/search": "/api/v1/facts/search", "context": "/api/v1/context"}


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def seed() -> str:
    call_command("migrate", verbosity=0)
    tenant, issued = tenant_create(name="bench-serving")
    rng = random.Random(7)
    facts = [{"user_id": USER, "content": f"Prefers {' '.join(rng.sample(WORDS, 6))} (note {n})"} for n in range(1000)]
    facts_import(tenant=tenant, facts=facts, actor="bench")
    return issued.key


def servers(workers: int, threads: int) -> dict[str, list[str]]:
    gunicorn = [sys.executable, "-m", "gunicorn", "--config", "gunicorn.conf.py", "--workers", str(workers)]
    return {
        "gunicorn gthread": [*gunicorn, "--threads", str(threads), "memoryproject.wsgi:application"],
        "gunicorn uvicorn": [*gunicorn, "-k", "uvicorn_worker.UvicornWorker", "memoryproject.asgi:application"],
        "runserver": [sys.executable, "manage.py", "runserver", "--noreload", "--insecure"],
    }


def start(name: str, command: list[str]) -> tuple[subprocess.Popen, int]:
    port = free_port()
    bind = ["--bind", f"127.0.0.1:{port}"] if "gunicorn" in command else [f"127.0.0.1:{port}"]
    log = open(DATA_DIR / f"{name.replace(' ', '-')}.log", "wb")  # noqa: SIM115 - open for the process's life
    process = subprocess.Popen([*command, *bind], env=ENV, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT)
    return process, port


def wait_ready(process: subprocess.Popen, port: int, key: str) -> None:
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise SystemExit(f"a server exited with {process.returncode}; logs in {DATA_DIR}")
        try:
            request(http.client.HTTPConnection("127.0.0.1", port, timeout=30), key, "/api/v1/context", "warm up")
            return
        except OSError:
            time.sleep(0.5)
    raise SystemExit(f"a server did not answer within 180 s; logs in {DATA_DIR}")


def request(connection: http.client.HTTPConnection, key: str, path: str, query: str) -> None:
    body = json.dumps({"user_id": USER, "query": query})
    headers = {"Authorization": f"Bearer {key}", "Content-Type": "application/json"}
    connection.request("POST", path, body=body, headers=headers)
    response = connection.getresponse()
    response.read()
    if response.status != 200:
        raise RuntimeError(f"{path} answered {response.status}")


def load(port: int, key: str, path: str, clients: int, seconds: float) -> tuple[int, list[float]]:
    """`clients` threads, each with its own keep-alive connection, for `seconds`; the latencies of every request."""
    latencies: list[float] = []
    errors: list[Exception] = []
    stop_at = time.monotonic() + seconds

    def client(seed: int) -> None:
        rng = random.Random(seed)
        connection = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
        mine = []
        try:
            while time.monotonic() < stop_at:
                started = time.perf_counter()
                request(connection, key, path, " ".join(rng.sample(WORDS, 4)))
                mine.append((time.perf_counter() - started) * 1000)
        except Exception as exc:  # noqa: BLE001 - counted and reported, the bench goes on
            errors.append(exc)
        finally:
            connection.close()
            latencies.extend(mine)

    threads = [threading.Thread(target=client, args=(n,)) for n in range(clients)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    if errors:
        print(f"    ({len(errors)} client(s) stopped on an error: {errors[0]})")
    return len(latencies), latencies


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seconds", type=float, default=5.0, help="length of one measurement")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--clients", default="1,4,16")
    parser.add_argument("--workers", type=int, default=2, help="gunicorn workers (runserver is one process)")
    parser.add_argument("--threads", type=int, default=4, help="gthread threads per worker")
    parser.add_argument("--servers", default="", help="only these, comma-separated (e.g. 'gunicorn gthread')")
    args = parser.parse_args()
    chosen = servers(args.workers, args.threads)
    if args.servers:
        chosen = {name: chosen[name] for name in args.servers.split(",")}
    key = seed()
    started = {name: start(name, command) for name, command in chosen.items()}
    try:
        for process, port in started.values():
            wait_ready(process, port, key)
        names = list(started)
        results: dict[tuple[str, str, int], tuple[int, float, list[float]]] = {}
        for round_number in range(args.rounds):
            order = names[round_number % len(names) :] + names[: round_number % len(names)]
            for clients in (int(value) for value in args.clients.split(",")):
                for endpoint, path in ENDPOINTS.items():
                    for name in order:
                        count, latencies = load(started[name][1], key, path, clients, args.seconds)
                        done, seconds, kept = results.get((name, endpoint, clients), (0, 0.0, []))
                        results[(name, endpoint, clients)] = (done + count, seconds + args.seconds, kept + latencies)
            print(f"round {round_number + 1} of {args.rounds} done", flush=True)
        print(
            f"\n{args.workers} gunicorn workers ({args.threads} threads each for gthread), "
            f"EMBEDDING_THREADS={settings.EMBEDDING_THREADS}, {os.cpu_count()} cores, "
            f"{args.rounds} rounds x {args.seconds:g} s"
        )
        print(f"{'endpoint':<13} {'clients':>7}  {'server':<17} {'req/s':>7} {'p50 ms':>8} {'p95 ms':>8}")
        for (name, endpoint, clients), (count, seconds, latencies) in sorted(
            results.items(), key=lambda item: (list(ENDPOINTS).index(item[0][1]), item[0][2], names.index(item[0][0]))
        ):
            latencies.sort()
            p50 = statistics.median(latencies) if latencies else float("nan")
            p95 = latencies[int(len(latencies) * 0.95)] if latencies else float("nan")
            print(f"{endpoint:<13} {clients:>7}  {name:<17} {count / seconds:7.1f} {p50:8.1f} {p95:8.1f}")
    finally:
        for process, _ in started.values():
            process.terminate()
        for process, _ in started.values():
            try:
                process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                process.kill()


if __name__ == "__main__":
    main()
