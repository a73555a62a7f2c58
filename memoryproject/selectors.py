from dataclasses import dataclass

from django.db import DatabaseError, connection


@dataclass(frozen=True)
class DatabaseStatus:
    reachable: bool
    server_version: str | None = None
    pgvector_version: str | None = None
    error: str | None = None


def database_status() -> DatabaseStatus:
    try:
        with connection.cursor() as cursor:
            cursor.execute("SHOW server_version")
            server_version = cursor.fetchone()[0]
            cursor.execute("SELECT extversion FROM pg_extension WHERE extname = 'vector'")
            row = cursor.fetchone()
    except DatabaseError as exc:
        return DatabaseStatus(reachable=False, error=str(exc).strip().splitlines()[0])
    return DatabaseStatus(reachable=True, server_version=server_version, pgvector_version=row and row[0])
