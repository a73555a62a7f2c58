from django.conf import settings
from django.db.backends.postgresql import base as postgresql

from .server import SUPERUSER, ensure_running


class DatabaseWrapper(postgresql.DatabaseWrapper):
    """PostgreSQL, reached over the embedded server's unix socket, started on first connection."""

    def get_connection_params(self):
        params = super().get_connection_params()
        params["host"] = ensure_running(settings.EMBEDDED_PG_DATA_DIR)
        params["user"] = SUPERUSER
        return params
