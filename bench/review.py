"""Server time of the review console's pages with a full queue: 1,000 pending facts across 20 users (each with a
proposal, a conversation excerpt and active neighbours) and 200 open conflicts.

    .venv/bin/python bench/review.py [--pending 1000] [--users 20] [--conflicts 200] [--requests 40]

Requests go through Django's test client in this process (server time: view, queries, template; no network), as a
logged-in staff member of the tenant. Prints p50/p95 per page and the queries each costs; asserts nothing. Works in
a throwaway tenant of the current database (run `manage.py migrate` first) and deletes it afterwards.
"""

import argparse
import random
import statistics
import time
import uuid

import _django  # noqa: F401
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Permission
from django.db import connection
from django.test import Client, override_settings
from django.utils import timezone

from episodes.services import episode_store
from facts.models import Fact, FactConflict
from facts.services import facts_import
from tenancy.services import tenant_create, tenant_membership_add

WORDS = (
    "postgres kubernetes deploy friday lisbon berlin tea coffee rust python vim emacs review budget invoice "
    "billing migration schema index cache latency incident runbook oncall release sprint roadmap design"
).split()


def load(tenant, *, pending: int, users: int, conflicts: int, rng: random.Random) -> None:
    started = time.perf_counter()
    user_ids = [f"bench-user-{n:02d}" for n in range(users)]
    episodes = {}
    for user_id in user_ids:
        messages = [
            {"role": ("user", "assistant")[n % 2], "content": " ".join(rng.sample(WORDS, 12)), "timestamp": None}
            for n in range(120)
        ]
        episodes[user_id] = episode_store(tenant=tenant, user_id=user_id, session_id="s1", messages=messages).episode
    active = [
        {"user_id": user_id, "content": f"Prefers {' '.join(rng.sample(WORDS, 5))}"}
        for user_id in user_ids
        for _ in range(50)
    ]
    waiting = [
        {"user_id": user_ids[n % users], "content": f"Uses {' '.join(rng.sample(WORDS, 5))}", "status": "pending",
         "confidence": 0.8}
        for n in range(pending)
    ]  # fmt: skip
    for start in range(0, len(active), 1000):
        facts_import(tenant=tenant, facts=active[start : start + 1000], actor="bench")
    pending_facts = []
    for start in range(0, len(waiting), 1000):
        pending_facts += facts_import(tenant=tenant, facts=waiting[start : start + 1000], actor="bench")
    targets = {}
    for fact in Fact.objects.filter(tenant=tenant, status="active").only("id", "user_id", "content", "updated_at"):
        targets.setdefault(fact.user_id, []).append(fact)
    now = timezone.now().isoformat()
    for fact in pending_facts:
        target = rng.choice(targets[fact.user_id])
        fact.source_episode = episodes[fact.user_id]
        fact.source_messages = [rng.randrange(0, 120, 2)]
        fact.proposal = {
            "action": "supersede",
            "targets": [{"fact": target.pk, "content": target.content, "relation": "contradicts", "certainty": 0.9,
                         "reason": "changed value of 'uses'", "version": target.updated_at.isoformat()}],
            "conflicts": [],
            "judged_at": now,
        }  # fmt: skip
    Fact.objects.bulk_update(pending_facts, ["source_episode", "source_messages", "proposal"], batch_size=500)
    FactConflict.objects.bulk_create(
        [
            FactConflict(
                tenant=tenant,
                user_id=fact.user_id,
                existing_fact=rng.choice(targets[fact.user_id]),
                new_fact=fact,
                reason="changed value of 'uses'",
            )  # fmt: skip
            for fact in pending_facts[:conflicts]
        ]
    )
    with connection.cursor() as cursor:
        cursor.execute("VACUUM ANALYZE facts_fact")
        cursor.execute("VACUUM ANALYZE facts_factconflict")
    print(
        f"loaded {pending:,} pending facts for {users} users ({users * 50:,} active beside them, an episode of 120 "
        f"messages each) and {conflicts} open conflicts in {time.perf_counter() - started:.1f} s"
    )


def timed(client: Client, url: str, count: int) -> tuple[list[float], int]:
    for _ in range(3):  # warm up: templates, connection
        assert client.get(url).status_code == 200
    statements = []  # counted by a wrapper: the request_started signal empties connection.queries

    def counted(execute, sql, params, many, context):
        statements.append(sql)
        return execute(sql, params, many, context)

    with connection.execute_wrapper(counted):
        client.get(url)
    timings = []
    for _ in range(count):
        started = time.perf_counter()
        response = client.get(url)
        timings.append((time.perf_counter() - started) * 1000)
        assert response.status_code == 200
    return sorted(timings), len(statements)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--pending", type=int, default=1000)
    parser.add_argument("--users", type=int, default=20)
    parser.add_argument("--conflicts", type=int, default=200)
    parser.add_argument("--requests", type=int, default=40)
    args = parser.parse_args()
    rng = random.Random(5)
    suffix = uuid.uuid4().hex[:8]
    tenant, _ = tenant_create(name=f"bench-review-{suffix}")
    staff = get_user_model().objects.create_user(f"bench-reviewer-{suffix}", password="-", is_staff=True)
    try:
        staff.user_permissions.add(*Permission.objects.filter(content_type__app_label="facts"))
        tenant_membership_add(tenant=tenant, user=staff)
        with override_settings(EMBEDDING_PROVIDER="hash", ALLOWED_HOSTS=["testserver"]):
            load(tenant, pending=args.pending, users=args.users, conflicts=args.conflicts, rng=rng)
            client = Client()
            client.force_login(staff)
            fact = Fact.objects.filter(tenant=tenant, status="pending").order_by("id").first()
            pages = [
                ("queue, first page (25 of the pending facts)", "/admin/review/"),
                ("queue, one user's facts", f"/admin/review/?user={fact.user_id}"),
                ("conflicts, first page (25)", "/admin/review/conflicts/"),
                ("fact page with 'why would this be found'", f"/admin/review/facts/{fact.pk}/?q=postgres+deploy"),
                ("admin index with the per-tenant counts", "/admin/"),
            ]
            for label, url in pages:
                timings, queries = timed(client, url, args.requests)
                p95 = timings[int(len(timings) * 0.95)]
                print(f"{label:<46} p50 {statistics.median(timings):6.1f} ms  p95 {p95:6.1f} ms  {queries} queries")
    finally:
        tenant.delete()
        staff.delete()


if __name__ == "__main__":
    main()
