"""DATABASE_POOL: psycopg's connection pool through Django's OPTIONS["pool"], in a process of its own (the pool is
made when settings load), on the same database as the tests."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from django.conf import settings

from tests.external_postgres import current_database_url

pytestmark = pytest.mark.django_db

# Sixteen threads, each making four requests' worth of work: a query, then the end of a request (close).
SCRIPT = """
import json, threading
import django
django.setup()
from django.db import close_old_connections, connection
pids, lock = [], threading.Lock()
def work():
    for _ in range(4):
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_backend_pid()")
            pid = cursor.fetchone()[0]
        with lock:
            pids.append(pid)
        connection.close()  # what the end of a request does: back to the pool, not closed
threads = [threading.Thread(target=work) for _ in range(16)]
[thread.start() for thread in threads]
[thread.join() for thread in threads]
print(json.dumps({"pooled": connection.pool is not None, "pids": pids}))
"""


def run(pool: bool) -> dict:
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "memoryproject.settings",
        "DATABASE_URL": current_database_url(),
        "DATABASE_POOL": "true" if pool else "false",
        "DATABASE_POOL_MAX_SIZE": "4",
    }
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT], cwd=Path(settings.BASE_DIR), env=env, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_with_the_pool_64_requests_share_at_most_its_4_connections():
    pooled = run(pool=True)

    assert pooled["pooled"] is True
    assert len(pooled["pids"]) == 64
    assert len(set(pooled["pids"])) <= 4


def test_without_it_every_request_opens_a_connection():
    unpooled = run(pool=False)

    assert unpooled["pooled"] is False
    assert len(set(unpooled["pids"])) == 64
