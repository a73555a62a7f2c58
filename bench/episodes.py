"""Episode throughput on the LoCoMo development conversations (../shared/data/locomo/locomo_dev.json):

- ingestion through the HTTP API (the 202 path: validate, append, queue the task), whole sessions and
  "after every turn" (each post carries the session so far; only the new turn is appended);
- a 500-message session posted one turn at a time (the latest turn alone, and the session so far): mean time of
  the first 50 posts against the last 50, in this process (a flat line: a post's cost must not grow with the
  session);
- extraction by the worker with the offline extractor (rule-based facts, extractive summary, embeddings):
  the task function in this process, and with --cluster a real `manage.py qcluster` draining the queue.

    .venv/bin/python bench/episodes.py [--skip-local] [--cluster] [--long-session-only] [--data PATH]

Prints figures, asserts nothing. Works in a throwaway tenant of the current database (the embedded one by
default; run `manage.py migrate` first) and deletes it, and the tasks it queued, afterwards.
"""

import argparse
import json
import logging
import os
import signal
import statistics
import subprocess
import sys
import time
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path

import _django  # noqa: F401
from django.conf import settings
from django.test import override_settings
from django_q.models import OrmQ
from django_q.signing import SignedPackage
from rest_framework.test import APIClient

from ai.services import embed_query
from episodes.models import Episode
from episodes.services import EXTRACT_TASK, episode_store
from episodes.tasks import episode_extract
from facts.models import Fact
from tenancy.services import tenant_create

DATA = Path(settings.BASE_DIR).parent / "shared" / "data" / "locomo" / "locomo_dev.json"


def load_sessions(path: Path) -> list[dict]:
    """One episode per LoCoMo session: speaker_a is the user, speaker_b the assistant, turns 30 s apart."""
    sessions = []
    for sample in json.loads(path.read_text()):
        conversation = sample["conversation"]
        keys = [key for key in conversation if key.startswith("session_") and not key.endswith("date_time")]
        for key in sorted(keys, key=lambda name: int(name.split("_")[1])):
            start = datetime.strptime(conversation[f"{key}_date_time"], "%I:%M %p on %d %B, %Y").replace(tzinfo=UTC)
            messages = [
                {
                    "role": "user" if turn["speaker"] == conversation["speaker_a"] else "assistant",
                    "content": turn["text"],
                    "timestamp": (start + timedelta(seconds=30 * index)).isoformat(),
                }
                for index, turn in enumerate(conversation[key])
            ]
            sessions.append({"user_id": sample["sample_id"], "session_id": key, "messages": messages})
    return sessions


def messages_of(session: dict) -> dict:
    return {"messages": session["messages"]}


def percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(len(ordered) * share))]


def post_all(client: APIClient, payloads: list[dict]) -> list[float]:
    timings = []
    for payload in payloads:
        started = time.perf_counter()
        response = client.post("/api/v1/episodes", payload, format="json")
        timings.append(time.perf_counter() - started)
        assert response.status_code == 202, response.content
    return timings


def bench_ingest_sessions(client: APIClient, sessions: list[dict]) -> None:
    messages = sum(len(session["messages"]) for session in sessions)
    timings = post_all(client, sessions)
    elapsed = sum(timings)
    print(
        f"API ingest, whole sessions        {len(sessions) / elapsed:8.1f} episodes/s  {messages / elapsed:8.0f} msgs/s"
        f"   p50 {statistics.median(timings) * 1000:.1f} ms  p95 {percentile(timings, 0.95) * 1000:.1f} ms"
        f"   ({len(sessions)} sessions, {messages} messages)"
    )


def bench_ingest_per_turn(client: APIClient, sessions: list[dict]) -> None:
    per_turn = [
        {**session, "user_id": f"{session['user_id']}-per-turn", "messages": session["messages"][: end + 1]}
        for session in sessions
        for end in range(len(session["messages"]))
    ]
    timings = post_all(client, per_turn)
    elapsed = sum(timings)
    print(
        f"API ingest, after every turn      {len(per_turn) / elapsed:8.1f} posts/s"
        f"   p50 {statistics.median(timings) * 1000:.1f} ms  p95 {percentile(timings, 0.95) * 1000:.1f} ms"
        "   (each post carries the session so far)"
    )


def bench_long_session(client: APIClient, sessions: list[dict], turns: int = 500) -> None:
    """One session of `turns` messages (LoCoMo's, one after another) posted a turn at a time, two ways."""
    said = [message for session in sessions for message in session["messages"]][:turns]
    with override_settings(API_THROTTLE_RATE="", API_THROTTLE_BURST=""):  # the figure is the post, not the limit
        _post_long_session(client, said)


def _post_long_session(client: APIClient, said: list[dict]) -> None:
    for label, snapshot in (("latest turn alone", False), ("session so far   ", True)):
        session = {"user_id": f"long-{uuid.uuid4().hex[:6]}", "session_id": "long"}
        payloads = [{**session, "messages": said[: end + 1] if snapshot else [said[end]]} for end in range(len(said))]
        timings = post_all(client, payloads)
        first, last = statistics.mean(timings[:50]) * 1000, statistics.mean(timings[-50:]) * 1000
        first_p50, last_p50 = statistics.median(timings[:50]) * 1000, statistics.median(timings[-50:]) * 1000
        print(
            f"{len(said)}-message session, {label}  mean of the first 50 posts {first:6.1f} ms, last 50 "
            f"{last:6.1f} ms (x{last / first:.2f}); median {first_p50:6.1f} / {last_p50:6.1f} ms "
            f"(x{last_p50 / first_p50:.2f})"
        )


def bench_worker(tenant, sessions: list[dict], label: str) -> None:
    """The task function as a worker runs it, one episode after another (one worker process)."""
    tag = f"worker-{label}"
    ids = [
        episode_store(
            tenant=tenant, user_id=f"{s['user_id']}-{tag}", session_id=s["session_id"], **messages_of(s)
        ).episode.pk
        for s in sessions
    ]
    facts_before = Fact.objects.filter(tenant=tenant).count()
    started = time.perf_counter()
    statuses = [episode_extract(episode_id) for episode_id in ids]
    elapsed = time.perf_counter() - started
    facts = Fact.objects.filter(tenant=tenant).count() - facts_before
    messages = sum(len(session["messages"]) for session in sessions)
    print(
        f"worker extraction ({label:<5})       {len(ids) / elapsed:8.1f} episodes/s  {messages / elapsed:8.0f} msgs/s"
        f"   {facts} facts ({facts / elapsed:.0f}/s); {statuses.count('done')} done, "
        f"{statuses.count('skipped')} skipped"
    )


def drop_queued_tasks(tenant) -> None:
    """The extraction tasks this run queued (nobody will run them: their episodes go with the tenant)."""
    episode_ids = set(Episode.objects.filter(tenant=tenant).values_list("pk", flat=True))
    for row in OrmQ.objects.all():
        task = SignedPackage.loads(row.payload)
        if task.get("func") == EXTRACT_TASK and task.get("args", [None])[0] in episode_ids:
            row.delete()


def bench_cluster(tenant, provider: str) -> None:
    """A real cluster (Q_WORKERS processes) draining what the API phase queued."""
    pending = Episode.objects.filter(tenant=tenant).exclude(extraction_status__in=["done", "skipped", "failed"])
    total = pending.count()
    env = {**os.environ, "EMBEDDING_PROVIDER": provider, "CHAT_PROVIDER": "none"}
    process = subprocess.Popen(
        [sys.executable, "manage.py", "qcluster"],
        cwd=settings.BASE_DIR,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    started = time.perf_counter()
    try:
        while pending.exists() and time.perf_counter() - started < 600:
            time.sleep(0.2)
        elapsed = time.perf_counter() - started
    finally:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
    left = pending.count()
    print(
        f"cluster extraction ({provider}, {settings.Q_CLUSTER['workers']} workers) {(total - left) / elapsed:6.1f} "
        f"episodes/s   ({total - left} of {total} in {elapsed:.1f} s, cluster start-up included)"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", type=Path, default=DATA)
    parser.add_argument("--skip-local", action="store_true", help="Only the hash embedder (no model load).")
    parser.add_argument("--cluster", action="store_true", help="Also drain the API phase's queue with qcluster.")
    parser.add_argument("--long-session-only", action="store_true", help="Only the 500-message session posts.")
    args = parser.parse_args()

    logging.getLogger("django-q").setLevel(logging.WARNING)  # one line per queued task is noise here
    sessions = load_sessions(args.data)
    tenant, issued = tenant_create(name=f"bench-{uuid.uuid4().hex[:8]}")
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {issued.key}")
    try:
        bench_long_session(client, sessions)
        if args.long_session_only:
            return
        bench_ingest_sessions(client, sessions)
        if args.cluster:
            bench_cluster(tenant, "hash" if args.skip_local else settings.EMBEDDING_PROVIDER)
        bench_ingest_per_turn(client, sessions)
        drop_queued_tasks(tenant)
        with override_settings(EMBEDDING_PROVIDER="hash", CHAT_PROVIDER="none"):
            bench_worker(tenant, sessions, "hash")
        if not args.skip_local:
            with override_settings(EMBEDDING_PROVIDER="local", EMBEDDING_CACHE=False, CHAT_PROVIDER="none"):
                embed_query("load the model first", tenant=None, user_id=None)
                bench_worker(tenant, sessions, "local")
    finally:
        drop_queued_tasks(tenant)
        tenant.delete()


if __name__ == "__main__":
    main()
