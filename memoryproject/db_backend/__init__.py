"""Django's PostgreSQL backend, reconnecting after a lost connection outside a request (DATABASE_URL's engine, and
the base of the embedded one)."""
