"""Reads that a replica may answer. With DATABASE_REPLICA_URL set, settings add a `replica` database and this
router: between replica_reads_start() and replica_reads_end() (core.apis.ApiView does it for the API's read
operations: lists, gets, searches, context) the ORM's reads and the
searches' own statements go to the replica; writes, and reads inside a transaction on the primary (a service
reading what it is about to change), always go to the primary. Without a replica everything is the primary."""

from contextvars import ContextVar

from django.db import DEFAULT_DB_ALIAS, connections

REPLICA = "replica"
_on_replica: ContextVar[bool] = ContextVar("reads_on_replica", default=False)


def replica_reads_start():
    """Reads from here on may go to the replica; pass the token to replica_reads_end."""
    return _on_replica.set(True)


def replica_reads_end(token) -> None:
    _on_replica.reset(token)


def read_alias() -> str:
    """The database a read made now goes to; raw SQL of selectors takes its cursor from connections[read_alias()]."""
    if _on_replica.get() and REPLICA in connections.settings and not connections[DEFAULT_DB_ALIAS].in_atomic_block:
        return REPLICA
    return DEFAULT_DB_ALIAS


class ReplicaRouter:
    def db_for_read(self, model, **hints):
        return read_alias()

    def db_for_write(self, model, **hints):
        return DEFAULT_DB_ALIAS

    def allow_relation(self, first, second, **hints):
        return True  # one database, copied: a row read from the replica is the primary's row

    def allow_migrate(self, db, app_label, **hints):
        return db == DEFAULT_DB_ALIAS  # the replica follows the primary's schema by replication
