"""DATABASE_REPLICA_URL with two real servers: the test database of the embedded server is the primary, a second
embedded server (tests.external_postgres) the replica. There is no streaming replication between them: the test
keeps the replica in step itself, copying the rows over, and then changes one fact's text on the replica only, so
each answer shows which server it came from."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from django.conf import settings

from facts.models import Fact
from facts.services import fact_remember
from tests.external_postgres import connect, current_database_url, start, stop
from tests.factories import make_tenant

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]  # the server process reads committed rows

COPIED_TABLES = ["tenancy_tenant", "tenancy_apikey", "facts_fact"]

SCRIPT = """
import json, sys
import django
django.setup()
from django.db import connections
from rest_framework.test import APIClient
key, fact_id = sys.argv[1], int(sys.argv[2])
api = APIClient(HTTP_AUTHORIZATION=f"Bearer {key}")
search = api.post("/api/v1/facts/search", {"user_id": "u1", "query": "tea"}, format="json")
got = api.get(f"/api/v1/facts/{fact_id}")
created = api.post("/api/v1/facts", {"user_id": "u1", "content": "Lives in Lisbon"}, format="json")
print(json.dumps({
    "search": [hit["fact"]["content"] for hit in search.json()["results"]],
    "get": got.json()["content"],
    "created": created.status_code,
    "created_id": created.json()["fact"]["id"],
}))
"""


@pytest.fixture
def replica(tmp_path):
    url = start(tmp_path / "replica")
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "memoryproject.settings", "DATABASE_URL": url}
    migrated = subprocess.run(
        [sys.executable, "manage.py", "migrate", "--noinput"],
        cwd=Path(settings.BASE_DIR),
        env=env,
        capture_output=True,
        text=True,
    )
    assert migrated.returncode == 0, migrated.stderr[-2000:]
    yield url
    stop(tmp_path / "replica")


def copy_to(replica_url: str) -> None:
    """What streaming replication would do, done by hand: the primary's rows of COPIED_TABLES onto the replica."""
    target = connect(replica_url)
    with connect(current_database_url()) as source:
        for table in COPIED_TABLES:
            with source.cursor().copy(f"COPY {table} TO STDOUT (FORMAT BINARY)") as out:
                data = b"".join(bytes(chunk) for chunk in out)
            with target.cursor().copy(f"COPY {table} FROM STDIN (FORMAT BINARY)") as into:
                into.write(data)
    target.commit()
    target.close()


def test_reads_come_from_the_replica_and_writes_go_to_the_primary(replica):
    tenant, key = make_tenant()
    fact = fact_remember(tenant=tenant, user_id="u1", content="Prefers green tea").fact  # embedded, searchable
    copy_to(replica)
    with connect(replica) as on_replica:
        on_replica.execute("UPDATE facts_fact SET content = 'Prefers green tea (the replica)' WHERE id = %s", [fact.pk])
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "memoryproject.settings",
        "DATABASE_URL": current_database_url(),
        "DATABASE_REPLICA_URL": replica,
        "EMBEDDING_PROVIDER": settings.EMBEDDING_PROVIDER,
        "API_THROTTLE_BURST": "",
        "API_THROTTLE_RATE": "",
    }

    done = subprocess.run(
        [sys.executable, "-c", SCRIPT, key, str(fact.pk)],
        cwd=Path(settings.BASE_DIR),
        env=env,
        capture_output=True,
        text=True,
    )

    assert done.returncode == 0, done.stderr[-3000:]
    answers = json.loads(done.stdout.strip().splitlines()[-1])
    assert answers["search"] == ["Prefers green tea (the replica)"]  # the search statement ran on the replica
    assert answers["get"] == "Prefers green tea (the replica)"  # and the ORM's reads
    assert answers["created"] == 201
    fact.refresh_from_db()
    assert fact.content == "Prefers green tea"  # the primary was never changed by the replica
    assert Fact.objects.filter(pk=answers["created_id"], content="Lives in Lisbon").exists()  # written to the primary
    with connect(replica) as on_replica:
        assert on_replica.execute(
            "SELECT count(*) FROM facts_fact WHERE id = %s", [answers["created_id"]]
        ).fetchone() == (0,)
