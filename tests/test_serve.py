"""`manage.py serve` (what `make run` ends with): gunicorn + worker on one embedded database, stopped by Ctrl-C;
gunicorn.conf.py's workers load the embedding model as they start and reload on SIGHUP."""

import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest
from django.conf import settings

ROOT = Path(settings.BASE_DIR)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def wait_for_health(url: str, process: subprocess.Popen, seconds: float = 120) -> dict:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        assert process.poll() is None, process.communicate()[1]
        try:
            with urllib.request.urlopen(url, timeout=10) as response:
                return json.load(response)
        except OSError:
            time.sleep(0.3)
    raise AssertionError(f"{url} did not answer within {seconds}s")


def server_env(tmp_path, **values) -> dict[str, str]:
    env = {
        **os.environ,
        "EMBEDDED_PG_DATA_DIR": str(tmp_path / "pgdata"),
        "DJANGO_STATIC_ROOT": str(tmp_path / "static"),
        "DJANGO_SETTINGS_MODULE": "memoryproject.settings",
        "DJANGO_ENV": "development",
        "DJANGO_DEBUG": "false",  # static files must come from WhiteNoise, not from Django's debug view
        "EMBEDDING_PROVIDER": "hash",  # health would otherwise load the local model: slow, and not under test here
        **values,
    }
    env.pop("DATABASE_URL", None)
    return env


@pytest.mark.slow
def test_serve_runs_web_and_worker_and_ctrl_c_stops_everything(tmp_path):
    data_dir = tmp_path / "pgdata"
    env = server_env(tmp_path)
    manage = [sys.executable, "manage.py"]
    subprocess.run([*manage, "migrate", "--noinput"], env=env, cwd=ROOT, check=True, capture_output=True)
    subprocess.run([*manage, "collectstatic", "--noinput"], env=env, cwd=ROOT, check=True, capture_output=True)
    manifest = json.loads((tmp_path / "static" / "staticfiles.json").read_text())["paths"]
    port = free_port()

    serve = subprocess.Popen(
        [*manage, "serve", f"127.0.0.1:{port}"], env=env, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    try:
        health = wait_for_health(f"http://127.0.0.1:{port}/api/health", serve)
        assert health["status"] == "ok"
        # The admin's stylesheet, under its content-hashed name, from WhiteNoise with DEBUG off.
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/static/{manifest['admin/css/base.css']}") as response:
            assert response.status == 200
            assert response.headers["Content-Type"].startswith("text/css")
            assert "immutable" in response.headers["Cache-Control"]
            assert b"body" in response.read()
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


def read_until(stream, pattern: str, process: subprocess.Popen, seconds: float = 240) -> list[str]:
    """Lines of `stream` up to the first one containing `pattern` (the server's log, read as it runs)."""
    lines: list[str] = []
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        line = stream.readline()
        if not line:
            raise AssertionError(f"the server exited ({process.poll()}) before {pattern!r}:\n{''.join(lines)}")
        lines.append(line)
        if pattern in line:
            return lines
    raise AssertionError(f"no {pattern!r} within {seconds}s:\n{''.join(lines)}")


@pytest.mark.slow
def test_gunicorn_workers_load_the_model_at_start_with_the_torch_threads_asked_and_reload_on_sighup(tmp_path):
    pytest.importorskip("sentence_transformers")
    # 3: neither the default (1) nor torch's own choice (the cores) on our machines, so the line proves the setting.
    env = server_env(tmp_path, EMBEDDING_PROVIDER="local", EMBEDDING_THREADS="3", WEB_WORKERS="1")
    subprocess.run([sys.executable, "manage.py", "migrate", "--noinput"], env=env, cwd=ROOT, check=True)
    port = free_port()
    server = subprocess.Popen(
        [sys.executable, "-m", "gunicorn", "-c", "gunicorn.conf.py", "--bind", f"127.0.0.1:{port}"],
        env=env,
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        # Before any request: the worker says it loaded the model, with the threads of EMBEDDING_THREADS.
        booted = read_until(server.stdout, "embedding model all-MiniLM-L6-v2 ready", server)
        assert "(torch threads 3)" in booted[-1]
        assert not any('"GET ' in line for line in booted)
        first_worker = booted[-1].split("worker ")[1].split(":")[0]

        server.send_signal(signal.SIGHUP)
        reloaded = read_until(server.stdout, "embedding model all-MiniLM-L6-v2 ready", server)
        assert first_worker not in reloaded[-1], "SIGHUP did not start a new worker"
        assert wait_for_health(f"http://127.0.0.1:{port}/api/health", server)["status"] == "ok"
        with pytest.raises(urllib.error.HTTPError):  # no key: 401, and a line in the access log
            urllib.request.urlopen(f"http://127.0.0.1:{port}/api/v1/users/erased-alice/export")
        # The app's own access line, naming the route: no line names a path with a user id in it.
        logged = read_until(server.stdout, "/api/v1/users/<path:user_id>/export 401", server)
        assert not any("erased-alice" in line for line in logged)
    finally:
        server.send_signal(signal.SIGTERM)
        server.wait(timeout=60)
    assert server.returncode == 0
