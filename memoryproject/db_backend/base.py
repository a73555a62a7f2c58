import os

from django.db.backends.postgresql import base as postgresql


def _forget_inherited_pools() -> None:
    """A forked child (django-q forks its workers from the sentinel) inherits the parent's open pools without their
    threads, and with the parent's sockets: it must neither use nor close them (closing would end the parent's
    sessions), only drop them and open its own."""
    postgresql.DatabaseWrapper._connection_pools.clear()


os.register_at_fork(after_in_child=_forget_inherited_pools)


class DatabaseWrapper(postgresql.DatabaseWrapper):
    """PostgreSQL that comes back by itself after the database restarts.

    A request replaces a lost connection at its boundaries (CONN_HEALTH_CHECKS, close_old_connections); a process
    without requests would fail forever: django-q's sentinel saves its status (the cache table) twice a second, and
    logged "the connection is closed" until its scheduler, every 30 s, happened to close it. And the psycopg pool,
    whose attempts to reconnect back off (1, 2, 4, 8 s...) for as long as the database was away, kept timing out
    once it was back."""

    def _cursor(self, name=None):
        if self.connection is not None and self.errors_occurred and not self.in_atomic_block:
            if self.is_usable():
                self.errors_occurred = False  # a statement failed, not the connection: check once, not every time
            else:
                self.close()  # the errors were the connection's: open a new one instead of failing on it again
        return super()._cursor(name)

    def get_new_connection(self, conn_params):
        try:
            return super().get_new_connection(conn_params)
        except self.Database.OperationalError:
            if not self._pool_cannot_connect():
                raise
        self.pool_restart()
        return super().get_new_connection(conn_params)

    def pool_restart(self) -> None:
        """A new pool for this process (the next connection opens it), without the old one's backoff. Connections
        other threads hold go back to the old pool, which closes them."""
        pool = self._connection_pools.pop(self.alias, None)
        if pool is not None:
            pool.close(timeout=0)

    def _pool_cannot_connect(self) -> bool:
        """The pool timed out below its size: it failed to open connections, it was not merely all in use."""
        if self.pool is None:
            return False
        stats = self.pool.get_stats()
        return stats.get("pool_size", 0) < self.pool.max_size and stats.get("connections_errors", 0) > 0
