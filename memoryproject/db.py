"""Database helpers for bulk paths."""

import functools
from collections.abc import Sequence

import numpy as np
from django.db import connection
from django.db.models import Model
from pgvector.django import VectorField


@functools.lru_cache(maxsize=8)
def _vector_format(dimensions: int) -> str:
    return "[" + ",".join(["%.7g"] * dimensions) + "]"


def vector_literal(vector) -> str:
    """pgvector's text form of a vector; one C-level format call, ~4x faster than joining float reprs."""
    values = np.asarray(vector, dtype=np.float32).tolist()
    return _vector_format(len(values)) % tuple(values)


def copy_insert(model: type[Model], objs: Sequence[Model], fields: Sequence[str]) -> None:
    """Insert `objs` with COPY (tens of thousands of rows per second, vs hundreds with INSERTs) and set their
    primary keys, which are drawn from the table's sequence first. Run it inside a transaction."""
    if not objs:
        return
    meta = model._meta
    model_fields = [meta.get_field(name) for name in fields]
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT nextval(pg_get_serial_sequence(%s, %s)) FROM generate_series(1, %s)",
            [meta.db_table, meta.pk.column, len(objs)],
        )
        for obj, (pk,) in zip(objs, cursor.fetchall(), strict=True):
            obj.pk = pk
        quote = connection.ops.quote_name
        columns = ", ".join(quote(column) for column in [meta.pk.column, *(f.column for f in model_fields)])
        with cursor.cursor.copy(f"COPY {quote(meta.db_table)} ({columns}) FROM STDIN") as copy:
            for obj in objs:
                copy.write_row([obj.pk, *(_copy_value(field, getattr(obj, field.attname)) for field in model_fields)])


# Values of these types go to COPY as they are; Django's per-value preparation would only cost time.
_PLAIN_TYPES = frozenset(
    {
        "CharField",
        "TextField",
        "FloatField",
        "IntegerField",
        "BigIntegerField",
        "BooleanField",
        "PositiveIntegerField",
        "PositiveSmallIntegerField",
        "ForeignKey",
    }
)


def _copy_value(field, value):
    if value is None:
        return None
    if isinstance(field, VectorField):
        return vector_literal(value)
    if field.get_internal_type() in _PLAIN_TYPES:
        return value
    return field.get_db_prep_save(value, connection)
