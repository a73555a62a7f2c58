"""`manage.py serve` (what `make run` ends with): web + worker on one embedded database, stopped by Ctrl-C."""

import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest
from django.conf import settings

ROOT = Path(settings.BASE_DIR)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def wait_for_health(url: str, process: subprocess.Popen, seconds: float = 60) -> dict:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        assert process.poll() is None, process.communicate()[1]
        try:
            with urllib.request.urlopen(url, timeout=2) as response:
                return json.load(response)
        except OSError:
            time.sleep(0.3)
    raise AssertionError(f"{url} did not answer within {seconds}s")


@pytest.mark.slow
def test_serve_runs_web_and_worker_and_ctrl_c_stops_everything(tmp_path):
    data_dir = tmp_path / "pgdata"
    env = {
        **os.environ,
        "EMBEDDED_PG_DATA_DIR": str(data_dir),
        "DJANGO_SETTINGS_MODULE": "memoryproject.settings",
        "EMBEDDING_PROVIDER": "hash",  # health would otherwise load the local model: slow, and not under test here
    }
    env.pop("DATABASE_URL", None)
    manage = [sys.executable, "manage.py"]
    subprocess.run([*manage, "migrate", "--noinput"], env=env, cwd=ROOT, check=True, capture_output=True)
    port = free_port()

    serve = subprocess.Popen(
        [*manage, "serve", f"127.0.0.1:{port}"], env=env, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    try:
        health = wait_for_health(f"http://127.0.0.1:{port}/api/health", serve)
        assert health["status"] == "ok"
        # The web server and the worker share the one database server.
        deadline = time.monotonic() + 30
        while len(json.loads((data_dir / ".handle_pids.json").read_text())) < 2:
            assert time.monotonic() < deadline, "the worker never connected"
            time.sleep(0.3)
    finally:
        serve.send_signal(signal.SIGINT)
        serve.wait(timeout=60)

    assert serve.returncode == 0
    assert not (data_dir / "postmaster.pid").exists(), "the embedded database kept running"
