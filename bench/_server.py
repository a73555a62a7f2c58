"""Processes for load benchmarks: a flaky fake OpenAI-compatible embedding server and the production server
(`manage.py serve`: gunicorn gthread + the django-q cluster), each started on a free loopback port and stopped by
process id.

    python bench/_server.py --fake-openai [--failure-rate 0.5] [--seed 17]   # prints its URL; serves until stdin ends

The fake runs in a process of its own so that its hashing does not take the GIL from the load generator's threads.
"""

import argparse
import contextlib
import json
import os
import random
import signal
import socket
import subprocess
import sys
import threading
import time
from collections import deque
from pathlib import Path
from urllib.error import URLError
from urllib.request import Request, urlopen

ROOT = Path(__file__).resolve().parent.parent
CONTROL_PATH = "/bench/failure-rate"  # POST {"rate": 0.5} sets the rate; any POST answers the counts


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _post_json(url: str, payload: dict, timeout: float = 10.0) -> tuple[int, dict]:
    request = Request(url, data=json.dumps(payload).encode(), headers={"Content-Type": "application/json"})
    try:
        with urlopen(request, timeout=timeout) as response:  # noqa: S310 - loopback only
            return response.status, json.loads(response.read() or b"{}")
    except URLError as exc:
        body = getattr(exc, "read", lambda: b"{}")()
        return getattr(exc, "code", 0), json.loads(body or b"{}")


# --- the fake embedding server (child process) ------------------------------------------------------------------


def _serve_fake(failure_rate: float, seed: int) -> None:
    sys.path.insert(0, str(ROOT))
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "memoryproject.settings")
    os.environ.setdefault("DJANGO_ENV", "development")
    import django

    django.setup()  # ai.embedders.HashEmbedder reads nothing from the settings, but its module imports them
    from tests.fake_openai import FakeOpenAI

    class FlakyOpenAI(FakeOpenAI):
        """Fails each embedding request with probability `failure_rate` (a seeded draw per request), with a 503 in
        OpenAI's error shape; the rate can be changed at run time through CONTROL_PATH."""

        def __post_init__(self):
            super().__post_init__()
            self.requests = deque(maxlen=100)  # the parent keeps every body; a load test would fill the memory
            self.rate = failure_rate
            self.random = random.Random(seed)
            self.lock = threading.Lock()
            self.counts = {"embedding_requests": 0, "embedding_failures": 0, "texts_embedded": 0}

        def answer(self, path, headers, body):
            if path == CONTROL_PATH:
                with self.lock:
                    if "rate" in body:
                        self.rate = float(body["rate"])
                        self.random = random.Random(body.get("seed", seed))
                    return 200, {"rate": self.rate, **self.counts}
            if path == "/v1/embeddings":
                with self.lock:
                    self.counts["embedding_requests"] += 1
                    fail = self.random.random() < self.rate
                    if fail:
                        self.counts["embedding_failures"] += 1
                    else:
                        texts = body.get("input")
                        self.counts["texts_embedded"] += len(texts) if isinstance(texts, list) else 1
                if fail:
                    self.requests.append({"path": path, "body": {}})
                    return 503, {"error": {"message": "injected failure", "type": "server_error", "code": "bench"}}
            return super().answer(path, headers, body)

    fake = FlakyOpenAI().start()
    print(fake.base_url, flush=True)
    with contextlib.suppress(KeyboardInterrupt):
        sys.stdin.read()  # the parent closes our stdin (or exits) to stop us
    fake.stop()


class FakeEmbeddingServer:
    """The parent's handle on the fake: start it, change its failure rate, read its counts, stop it."""

    def __init__(self, *, failure_rate: float = 0.0, seed: int = 17):
        command = [sys.executable, __file__, "--fake-openai", "--failure-rate", str(failure_rate), "--seed", str(seed)]
        # Its own session: Ctrl-C reaches only the bench, which stops the fake by closing its stdin.
        self.process = subprocess.Popen(
            command, cwd=ROOT, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, start_new_session=True
        )
        self.base_url = self.process.stdout.readline().strip()
        if not self.base_url.startswith("http"):
            self.stop()
            raise SystemExit("the fake embedding server did not start")

    def control(self, **payload) -> dict:
        status, body = _post_json(self.base_url.removesuffix("/v1") + CONTROL_PATH, payload)
        if status != 200:
            raise RuntimeError(f"the fake embedding server answered {status} to {CONTROL_PATH}")
        return body

    def set_failure_rate(self, rate: float, *, seed: int = 17) -> None:
        self.control(rate=rate, seed=seed)

    def stop(self) -> None:
        if self.process.poll() is None:
            with contextlib.suppress(OSError):
                self.process.stdin.close()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()


# --- the production server ------------------------------------------------------------------------------------


def _children(pid: int, *, python_only: bool = True) -> list[int]:
    """The Python processes descending from `pid` (read from /proc), so that stop() ends only what serve started."""
    parents: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        parents.setdefault(ppid, []).append(int(entry.name))
    found, stack = [], [pid]
    while stack:
        for child in parents.get(stack.pop(), []):
            stack.append(child)
            try:
                command = (Path("/proc") / str(child) / "cmdline").read_bytes()
            except OSError:
                continue
            if b"python" in command or not python_only:  # not the embedded PostgreSQL: it stops by itself
                found.append(child)
    return found


def cpu_seconds(pid: int, *, ended_children: bool = False) -> float:
    """User + system CPU seconds of one live process (0 when it is gone); `ended_children` adds those of the
    children it has reaped (PostgreSQL's postmaster reaps a backend per connection)."""
    try:
        fields = (Path("/proc") / str(pid) / "stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    ticks = int(fields[11]) + int(fields[12]) + (int(fields[13]) + int(fields[14]) if ended_children else 0)
    return ticks / os.sysconf("SC_CLK_TCK")


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


class ProductionServer:
    """`manage.py migrate`, `setup_schedules`, then `manage.py serve` on a free port with `env`; ready() reads
    /api/health/ready; stop() sends serve SIGINT (what Ctrl-C sends; it stops its web server and worker), then ends
    any of its descendants still alive after `grace` seconds, by pid."""

    def __init__(self, *, env: dict[str, str], log_path: Path):
        self.env = env
        self.port = free_port()
        self.base_url = f"http://127.0.0.1:{self.port}"
        self.log_path = log_path
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        self.process: subprocess.Popen | None = None
        self._descendants: set[int] = set()

    def manage(self, *args: str) -> None:
        with open(self.log_path, "ab") as log:
            done = subprocess.run([sys.executable, "manage.py", *args], cwd=ROOT, env=self.env, stdout=log, stderr=log)
        if done.returncode:
            raise SystemExit(f"manage.py {' '.join(args)} failed (exit {done.returncode}); see {self.log_path}")

    def start(self) -> None:
        self.manage("migrate", "--noinput", "--verbosity", "0")
        self.manage("setup_schedules")
        log = open(self.log_path, "ab")  # noqa: SIM115 - open for the process's life
        self.process = subprocess.Popen(
            [sys.executable, "manage.py", "serve", f"127.0.0.1:{self.port}"],
            cwd=ROOT,
            env=self.env,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # Ctrl-C in the terminal reaches the bench, which stops serve itself
        )

    def cpu(self) -> dict[str, float]:
        """CPU seconds so far of serve's web processes (gunicorn), worker processes (qcluster) and the embedded
        PostgreSQL when it is the database (living processes only: a backend that ended takes its seconds along)."""
        totals = {"web": 0.0, "worker": 0.0}
        for pid in _children(self.process.pid) if self.process is not None else []:
            try:
                command = (Path("/proc") / str(pid) / "cmdline").read_bytes()
            except OSError:
                continue
            kind = "web" if b"gunicorn" in command else "worker" if b"qcluster" in command else None
            if kind:
                totals[kind] += cpu_seconds(pid)
        data_dir = self.env.get("EMBEDDED_PG_DATA_DIR")
        if data_dir:  # the embedded PostgreSQL: its postmaster names the folder; backends are its children
            totals["postgres"] = 0.0
            for entry in Path("/proc").iterdir():
                try:
                    command = (entry / "cmdline").read_bytes() if entry.name.isdigit() else b""
                except OSError:
                    continue
                if command.startswith(b"/") and b"postgres\0-D\0" + data_dir.encode() in command:
                    postmaster = int(entry.name)
                    totals["postgres"] += cpu_seconds(postmaster, ended_children=True)
                    totals["postgres"] += sum(cpu_seconds(pid) for pid in _children(postmaster, python_only=False))
        return totals

    def check_alive(self) -> None:
        if self.process is not None and self.process.poll() is not None:
            raise SystemExit(f"manage.py serve exited with {self.process.returncode}; see {self.log_path}")

    def wait_ready(self, timeout: float = 180.0) -> dict:
        """Poll /api/health/ready until it answers 200 (the worker's first heartbeat can take ~30 s)."""
        deadline = time.monotonic() + timeout
        last: tuple[int, dict] = (0, {})
        while time.monotonic() < deadline:
            self.check_alive()
            self._descendants.update(_children(self.process.pid))
            try:
                with urlopen(self.base_url + "/api/health/ready", timeout=10) as response:  # noqa: S310
                    return json.loads(response.read())
            except URLError as exc:
                body = getattr(exc, "read", lambda: b"{}")()
                with contextlib.suppress(ValueError):
                    last = (getattr(exc, "code", 0), json.loads(body or b"{}"))
            except OSError:
                pass
            time.sleep(1.0)
        raise SystemExit(f"not ready within {timeout:.0f} s: {last}; see {self.log_path}")

    def stop(self, grace: float = 40.0) -> float:
        """Seconds serve took to stop (its children included)."""
        if self.process is None:
            return 0.0
        started = time.monotonic()
        self._descendants.update(_children(self.process.pid))
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGINT)
        try:
            self.process.wait(timeout=grace)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        for pid in sorted(self._descendants):
            deadline = time.monotonic() + 5
            while _alive(pid) and time.monotonic() < deadline:
                time.sleep(0.2)
            if _alive(pid):
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
        self.process = None
        return time.monotonic() - started


def _main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--fake-openai", action="store_true", required=True)
    parser.add_argument("--failure-rate", type=float, default=0.0)
    parser.add_argument("--seed", type=int, default=17)
    args = parser.parse_args()
    _serve_fake(args.failure_rate, args.seed)


if __name__ == "__main__":
    _main()
