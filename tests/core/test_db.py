"""The hand-written pgvector wire formats (kept: they measured faster) against pgvector's own, and the server."""

import numpy as np
import pytest
from django.db import connection
from pgvector import Vector

from core.db import vector_binary, vector_from_binary, vector_literal

VECTORS = [
    [1.5, -2.0, 3.25],
    [0.0] * 384,
    list(np.random.default_rng(7).standard_normal(384).astype(np.float32)),
    [3.4028235e38, -1e-38, 1e-45],  # the float4 extremes
]


@pytest.mark.parametrize("values", VECTORS)
def test_binary_form_is_pgvectors_own(values):
    assert vector_binary(values) == Vector(values).to_binary()
    assert np.array_equal(vector_from_binary(Vector(values).to_binary()), np.asarray(values, dtype=np.float32))


@pytest.mark.parametrize("values", VECTORS)
def test_text_form_is_pgvectors_to_seven_significant_digits(values):
    # Query vectors go as text (7 digits: a cosine moves by < 1e-6); stored vectors go binary, exact.
    parsed = Vector.from_text(vector_literal(values)).to_numpy()
    assert np.allclose(parsed, np.asarray(values, dtype=np.float32), rtol=1e-6, atol=0)


@pytest.mark.django_db
@pytest.mark.parametrize("values", VECTORS[:3])
def test_the_server_sends_back_the_binary_form_of_what_it_read(values):
    with connection.cursor() as cursor:
        cursor.execute("SELECT vector_send(%s::vector)", [vector_literal(values)])
        (sent,) = cursor.fetchone()
    parsed = Vector.from_text(vector_literal(values)).to_list()
    assert bytes(sent) == vector_binary(parsed)
