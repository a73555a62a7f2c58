"""An embedding outage, measured: writes and searches while the provider fails, then the sweep that catches up.
Prints figures; asserts nothing.

    .venv/bin/python bench/outage.py [--facts 300]

Uses the database of the current settings (the embedded one by default; run `manage.py migrate` first) and the
local fake OpenAI-compatible server from the tests (down = every embedding request answers 503; the client retries
OPENAI_MAX_RETRIES times, 10 ms apart). The queued task is replaced by the sweep here (no worker runs).
"""

import argparse
import statistics
import time
import uuid

import _django  # noqa: F401
from django.test import override_settings

from facts.models import Fact
from facts.selectors import facts_search_answer
from facts.services import embed_queue, fact_remember, facts_embed_due
from tenancy.models import Tenant
from tenancy.services import tenant_create
from tests.fake_openai import API_KEY, FakeOpenAI

TOPICS = ["PostgreSQL", "Kubernetes", "oolong tea", "billing", "Lisbon", "deploys", "Rust", "the on-call rota"]


def text(n: int, tag: str) -> str:
    return f"Fact {n} ({tag}): works with {TOPICS[n % len(TOPICS)]} on project {n % 17}"


def ms(samples: list[float]) -> str:
    ordered = sorted(samples)
    p95 = ordered[int(len(ordered) * 0.95) - 1] if len(ordered) > 1 else ordered[0]
    return f"p50 {statistics.median(ordered) * 1000:7.2f} ms   p95 {p95 * 1000:7.2f} ms"


def timed_each(calls) -> list[float]:
    samples = []
    for call in calls:
        started = time.perf_counter()
        call()
        samples.append(time.perf_counter() - started)
    return samples


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--facts", type=int, default=300)
    args = parser.parse_args()
    fake = FakeOpenAI().start()
    embed_queue.async_task = lambda *a, **k: None  # no worker here: the sweep below does the task's work
    settings = {
        "EMBEDDING_PROVIDER": "openai",
        "EMBEDDING_MODEL": "fake-embed",
        "OPENAI_BASE_URL": fake.base_url,
        "OPENAI_API_KEY": API_KEY,
        "CHAT_PROVIDER": "none",
        "OPENAI_MAX_RETRIES": 2,
    }
    tenant, _ = tenant_create(name=f"bench-outage-{uuid.uuid4().hex[:6]}")
    try:
        with override_settings(**settings):
            count = args.facts
            up = timed_each(
                lambda n=n: fact_remember(tenant=tenant, user_id="u", content=text(n, "up")) for n in range(count)
            )
            print(f"fact_remember, provider up      ({count:4d})  {ms(up)}")
            search_up = timed_each(
                lambda t=t: facts_search_answer(tenant=tenant, user_id="u", query=t) for t in TOPICS * 5
            )
            print(f"facts search, provider up       ({len(search_up):4d})  {ms(search_up)}")
            fake.go_down("/v1/embeddings")
            down = timed_each(
                lambda n=n: fact_remember(tenant=tenant, user_id="u", content=text(n, "down")) for n in range(count)
            )
            print(f"fact_remember, provider down    ({count:4d})  {ms(down)}   (stored awaiting the vector)")
            search_down = timed_each(
                lambda t=t: facts_search_answer(tenant=tenant, user_id="u", query=t) for t in TOPICS * 5
            )
            print(f"facts search, provider down     ({len(search_down):4d})  {ms(search_down)}   (keywords alone)")
            fake.recover()
            before = len(fake.requests_to("/v1/embeddings"))
            started = time.perf_counter()
            run = facts_embed_due()
            elapsed = time.perf_counter() - started
            calls = len(fake.requests_to("/v1/embeddings")) - before
            print(
                f"sweep after recovery            ({run.embedded:4d})  {elapsed:.2f} s = {run.embedded / elapsed:6.0f} "
                f"facts/s, {calls} embedding calls; judged: {dict(run.outcomes)}"
            )
            left = Fact.objects.filter(tenant=tenant).exclude(embedding_pending="").count()
            print(f"facts still awaiting a vector: {left}")
    finally:
        Tenant.objects.filter(pk=tenant.pk).delete()
        fake.stop()


if __name__ == "__main__":
    main()
