from django.conf import settings
from django.db.backends.postgresql import base as postgresql

from .server import SUPERUSER, ensure_running, restart_if_dead


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
            restart_if_dead(settings.EMBEDDED_PG_DATA_DIR)
        try:
            return super().get_new_connection(conn_params)
        except self.Database.OperationalError:
            if not restart_if_dead(settings.EMBEDDED_PG_DATA_DIR):
                raise
        return super().get_new_connection(conn_params)
