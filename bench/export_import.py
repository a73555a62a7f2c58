"""Export and import throughput for one user with 10,000 facts (some history, a few episodes and conflicts).

    .venv/bin/python bench/export_import.py [--facts 10000] [--skip-local]

The user is made by importing a generated file (hash embedder), then: its export is timed (the service, and GET
.../export through Django's test client, no network) and its size printed; the user is erased and the export imported
back, timed, with the hash embedder (the import's own cost: parsing, checking, matching, COPY) and with the bundled
all-MiniLM-L6-v2 (re-embedding included, cache off), each split into read / embed / write. Rows = records (lines).
Prints figures, asserts nothing. Works in a throwaway tenant of the current database (run `manage.py migrate` first)
and deletes it afterwards.
"""

import argparse
import json
import random
import time
import uuid
from datetime import UTC, datetime, timedelta

import _django  # noqa: F401
from django.conf import settings
from django.db import transaction
from django.test import override_settings
from rest_framework.test import APIClient

from core.locks import LockNamespace, xact_lock
from privacy import imports
from privacy.exports import user_export_lines
from privacy.services import user_erase
from tenancy.services import tenant_create

USER = "bench-export-user"
WORDS = (
    "postgres kubernetes deploy friday lisbon berlin tea coffee rust python vim emacs review budget invoice billing "
    "migration schema index cache latency incident runbook oncall release sprint roadmap design jsonb grafana"
).split()


def generated_file(facts: int, rng: random.Random) -> str:
    """Our format: `facts` facts (a fifth of them superseded by the next one, some pending, archived, rejected; each
    with its events), 5 episodes of 40 messages, 20 conflicts."""
    start = datetime(2025, 1, 1, tzinfo=UTC)
    lines = [{"type": "header", "format": "memoryproject", "version": 1, "user_id": USER}]
    for episode in range(5):
        lines.append(
            {
                "type": "episode",
                "id": episode + 1,
                "session_id": f"session-{episode}",
                "summary": "The user talked about " + " ".join(rng.sample(WORDS, 8)),
                "messages": [
                    {
                        "role": ("user", "assistant")[n % 2],
                        "content": " ".join(rng.sample(WORDS, 14)),
                        "timestamp": (start + timedelta(days=episode, minutes=n)).isoformat(),
                    }
                    for n in range(40)
                ],  # fmt: skip
            }
        )
    for n in range(1, facts + 1):
        when = start + timedelta(minutes=n)
        superseded = n % 5 == 0 and n < facts
        status = "pending" if n % 23 == 0 else "archived" if n % 47 == 0 else "rejected" if n % 97 == 0 else "active"
        events = [{"action": "created", "actor": "api_key:1", "before": None, "after": {"status": status},
                   "created_at": when.isoformat()}]  # fmt: skip
        record = {
            "type": "fact",
            "id": n,
            "content": f"Fact {n}: prefers {' '.join(rng.sample(WORDS, 6))}",
            "category": rng.choice(["preference", "profile", "project", "decision", "procedure", "other"]),
            "confidence": round(rng.uniform(0.5, 1.0), 2),
            "status": status,
            "usage_count": rng.randrange(20),
            "valid_from": when.isoformat(),
            "metadata": {"topic": rng.choice(WORDS)},
            "source_episode": (n % 5) + 1 if n % 50 == 0 else None,
            "created_at": when.isoformat(),
            "updated_at": when.isoformat(),
        }
        if superseded:
            record |= {"valid_to": (when + timedelta(minutes=1)).isoformat(), "superseded_by": n + 1}
            retired = (when + timedelta(minutes=1)).isoformat()
            events.append({"action": "superseded", "actor": "system", "before": {"superseded_by": None},
                           "after": {"superseded_by": n + 1}, "created_at": retired})  # fmt: skip
        lines.append(record | {"events": events})
    for n in range(20):
        lines.append({"type": "conflict", "id": n + 1, "existing_fact": 23 * (n + 1) - 1, "new_fact": 23 * (n + 1),
                      "reason": "which one", "status": "open"})  # fmt: skip
    return "".join(json.dumps(line) + "\n" for line in lines)


def timed_import(tenant, data: str, label: str) -> None:
    """memories_import's steps one by one (the same calls it makes), so the embedding shows apart from the rest."""
    started = time.perf_counter()
    read = imports.import_read(data, user_id=USER)
    part = read.parts[USER]
    parsed = time.perf_counter()
    planned = imports._plan(tenant, USER, part)
    vectors = imports._vectors(tenant, USER, part, planned)
    embedded = time.perf_counter()
    with transaction.atomic():
        xact_lock(LockNamespace.USER_MEMORY, tenant.pk, USER)
        report = imports._write(tenant, USER, part, imports._plan(tenant, USER, part), vectors, "bench")
    written = time.perf_counter()
    total = written - started
    store = total - (embedded - parsed)
    print(
        f"import ({label:<7})  {read.lines / total:8.0f} rows/s  {total:6.1f} s   read+check {parsed - started:5.2f} s"
        f"  plan+embed {embedded - parsed:6.2f} s  write {written - embedded:5.2f} s   "
        f"store part (all but plan+embed) {read.lines / store:6.0f} rows/s   {dict(report.facts)}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--facts", type=int, default=10000)
    parser.add_argument("--skip-local", action="store_true", help="Leave out the all-MiniLM-L6-v2 import.")
    args = parser.parse_args()

    tenant, issued = tenant_create(name=f"bench-{uuid.uuid4().hex[:8]}")
    try:
        with override_settings(EMBEDDING_PROVIDER="hash"):
            imports.memories_import(tenant=tenant, data=generated_file(args.facts, random.Random(7)), user_id=None,
                                    actor="bench")  # fmt: skip
            started = time.perf_counter()
            exported = "".join(user_export_lines(tenant=tenant, user_id=USER))
            service = time.perf_counter() - started
            client = APIClient()
            client.credentials(HTTP_AUTHORIZATION=f"Bearer {issued.key}")
            started = time.perf_counter()
            response = client.get(f"/api/v1/users/{USER}/export")
            body = b"".join(response.streaming_content)
            api = time.perf_counter() - started
            rows = exported.count("\n")
            size = len(exported.encode())
            limit = settings.API_MAX_BODY_BYTES / 1e6
            print(f"user: {args.facts:,} facts, {rows:,} lines; export file {size / 1e6:.1f} MB "
                  f"({size / args.facts:.0f} bytes a fact; API_MAX_BODY_BYTES {limit:.1f} MB)")  # fmt: skip
            print(f"export (service)  {rows / service:8.0f} rows/s  {service:6.2f} s")
            print(f"export (HTTP API) {rows / api:8.0f} rows/s  {api:6.2f} s   ({len(body) / 1e6:.1f} MB streamed)")

            user_erase(tenant=tenant, user_id=USER, actor="bench")
            timed_import(tenant, exported, "hash")
            user_erase(tenant=tenant, user_id=USER, actor="bench")
            started = time.perf_counter()
            response = client.generic(
                "POST", f"/api/v1/users/{USER}/import", exported.encode(), content_type="application/x-ndjson"
            )
            assert response.status_code == 200, response.content[:500]
            api = time.perf_counter() - started
            print(f"import (HTTP API, hash) {rows / api:8.0f} rows/s  {api:6.1f} s   {response.json()['facts']}")
            started = time.perf_counter()
            again = imports.memories_import(tenant=tenant, data=exported, user_id=USER, actor="bench")
            print(f"import again (all skipped) {rows / (time.perf_counter() - started):8.0f} rows/s   "
                  f"{dict(again.total('facts'))}")  # fmt: skip
        if not args.skip_local:
            with override_settings(EMBEDDING_PROVIDER="local", EMBEDDING_CACHE=False):
                from ai.services import embed_query

                embed_query("load the model first", tenant=None, user_id=None)
                user_erase(tenant=tenant, user_id=USER, actor="bench")
                timed_import(tenant, exported, "MiniLM")
    finally:
        tenant.delete()


if __name__ == "__main__":
    main()
