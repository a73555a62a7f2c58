from django.db.backends.postgresql import base as postgresql


class DatabaseWrapper(postgresql.DatabaseWrapper):
    """PostgreSQL that replaces a connection lost to a database restart at its next use outside a transaction.

    A request replaces it at its boundaries (CONN_HEALTH_CHECKS, close_old_connections); a process without
    requests would fail forever: django-q's sentinel saves its status (the cache table) twice a second, and logged
    "the connection is closed" until its scheduler, every 30 s, happened to close it."""

    def _cursor(self, name=None):
        if self.connection is not None and self.errors_occurred and not self.in_atomic_block:
            if self.is_usable():
                self.errors_occurred = False  # a statement failed, not the connection: check once, not every time
            else:
                self.close()  # the errors were the connection's: open a new one instead of failing on it again
        return super()._cursor(name)
