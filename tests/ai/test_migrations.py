"""The embedding cache's move from one shared key to a key per owner: both ways, on a table holding rows."""

import pytest
from django.conf import settings
from django.core.management import call_command
from django.db import connection

from ai.models import EmbeddingCache
from tests.factories import make_tenant


@pytest.mark.django_db(transaction=True)
def test_the_cache_starts_empty_whichever_way_its_key_changes():
    vector = [1.0] + [0.0] * (settings.EMBEDDING_DIMENSIONS - 1)
    # Given two tenants holding the same text (which the shared key could not hold)
    for name in ("acme", "globex"):
        EmbeddingCache.objects.create(
            tenant=make_tenant(name)[0], user_id="u1", model="m", text_hash="a" * 64, embedding=vector
        )

    # When migrated back to the shared key, a row cached there, and migrated forward again
    call_command("migrate", "ai", "0001", verbosity=0)
    with connection.cursor() as cursor:
        cursor.execute(
            "INSERT INTO ai_embeddingcache (model, text_hash, embedding, created_at) VALUES ('m', %s, %s, now())",
            ["b" * 64, str(vector)],
        )
    call_command("migrate", "ai", verbosity=0)

    # Then no row survived either way (the shared row had no owner to give it), and the table takes owned rows
    assert not EmbeddingCache.objects.exists()
    tenant, _ = make_tenant("initech")
    EmbeddingCache.objects.create(tenant=tenant, user_id="u1", model="m", text_hash="b" * 64, embedding=vector)
    assert EmbeddingCache.objects.get().tenant == tenant
