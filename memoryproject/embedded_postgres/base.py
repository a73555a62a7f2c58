from django.conf import settings

from memoryproject.db_backend import base as postgresql

from .server import SUPERUSER, EmbeddedPostgresError, ensure_running, restart_if_dead


class DatabaseWrapper(postgresql.DatabaseWrapper):
    """PostgreSQL, reached over the embedded server's unix socket, started on first connection and started again
    by the next connection after it died."""

    def get_connection_params(self):
        params = super().get_connection_params()
        params["host"] = ensure_running(settings.EMBEDDED_PG_DATA_DIR)
        params["user"] = SUPERUSER
        return params

    def get_new_connection(self, conn_params):
        if self.pool is not None:
            # A pool would wait out its timeout for a server that is gone: look first (one /proc read).
            self._restart_if_dead()
        try:
            return super().get_new_connection(conn_params)
        except self.Database.OperationalError:
            if not self._restart_if_dead():
                raise
        return super().get_new_connection(conn_params)

    def _restart_if_dead(self) -> bool:
        try:
            return restart_if_dead(settings.EMBEDDED_PG_DATA_DIR)
        except EmbeddedPostgresError as exc:
            # A connection error like any other (the caller answers 503 and the next connection tries again).
            raise self.Database.OperationalError(str(exc)) from exc
