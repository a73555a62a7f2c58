"""GET /metrics: Prometheus' text format behind METRICS_TOKEN, parsed back with prometheus_client's own parser."""

import os
import subprocess
import sys
import textwrap

import pytest
from django.conf import settings
from django.utils import timezone
from django_q.models import OrmQ
from prometheus_client.parser import text_string_to_metric_families
from rest_framework.test import APIClient

from facts.models import Fact, FactConflict
from tests.factories import make_fact

TOKEN = "scrape-token-for-tests"
MARKER = "Okapi-marker-91X prefers basalt"


@pytest.fixture
def metrics_on(settings):
    settings.METRICS_TOKEN = TOKEN


def scrape() -> dict[tuple, float]:
    """{(sample name, labels as sorted pairs): value} of one authorised scrape."""
    response = APIClient().get("/metrics", HTTP_AUTHORIZATION=f"Bearer {TOKEN}")
    assert response.status_code == 200
    assert response["Content-Type"].startswith("text/plain; version=")
    text = response.content.decode()
    assert MARKER not in text
    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


def value(samples: dict, name: str, **labels) -> float:
    return samples.get((name, tuple(sorted(labels.items()))), 0.0)


def test_metrics_are_404_unless_a_token_is_set(db):
    assert settings.METRICS_TOKEN == ""

    assert APIClient().get("/metrics").status_code == 404
    assert APIClient().get("/metrics", HTTP_AUTHORIZATION="Bearer anything").status_code == 404


@pytest.mark.parametrize("header", [None, "Bearer wrong", f"Basic {TOKEN}", f"Bearer {TOKEN}x", "Bearer"])
def test_a_missing_or_wrong_token_is_401(metrics_on, db, header):
    headers = {"HTTP_AUTHORIZATION": header} if header else {}

    response = APIClient().get("/metrics", **headers)

    assert response.status_code == 401
    assert response["WWW-Authenticate"] == 'Bearer realm="metrics"'
    assert b"memoryproject_" not in response.content


def test_a_scrape_counts_requests_by_route_searches_and_the_backlog(metrics_on, api, tenant, other_tenant_and_key):
    other = other_tenant_and_key[0]
    before = scrape()
    # Given some traffic of one tenant, and review work waiting in two
    fact_id = api.post("/api/v1/facts", {"user_id": "u1", "content": MARKER}, format="json").json()["fact"]["id"]
    api.get(f"/api/v1/facts/{fact_id}")
    api.get(f"/api/v1/facts/{fact_id + 1000}")  # 404
    api.post("/api/v1/facts/search", {"user_id": "u1", "query": MARKER}, format="json")
    api.post("/api/v1/context", {"user_id": "u1", "query": MARKER}, format="json")
    api.post("/api/v1/kb/search", {"query": MARKER}, format="json")
    api.post("/api/v1/episodes/search", {"user_id": "u1", "query": MARKER}, format="json")
    APIClient().get(f"/api/v1/no-such-route/{MARKER}")
    old = make_fact(tenant=tenant, user_id="u2", content="Lives in Lisbon")
    new = make_fact(tenant=tenant, user_id="u2", content="Lives in Porto", status=Fact.Status.PENDING)
    make_fact(tenant=other, user_id="x", content="Likes tea", status=Fact.Status.PENDING)
    make_fact(tenant=other, user_id="x", content="Likes coffee", status=Fact.Status.PENDING)
    FactConflict.objects.create(tenant=tenant, user_id="u2", existing_fact=old, new_fact=new, reason="city")
    OrmQ.objects.create(key=settings.Q_CLUSTER["name"], payload="signed-task", lock=timezone.now())

    # When Prometheus scrapes
    after = scrape()

    # Then the latencies are counted by route pattern, method and status class
    def grew(name, **labels) -> float:
        return value(after, name, **labels) - value(before, name, **labels)

    requests = "memoryproject_http_request_duration_seconds_count"
    assert grew(requests, route="/api/v1/facts", method="POST", status="2xx") == 1
    assert grew(requests, route="/api/v1/facts/<int:fact_id>", method="GET", status="2xx") == 1
    assert grew(requests, route="/api/v1/facts/<int:fact_id>", method="GET", status="4xx") == 1
    assert grew(requests, route="(unmatched)", method="GET", status="4xx") == 1
    assert grew(requests, route="/metrics", method="GET", status="2xx") == 1  # the scrape before
    searches = "memoryproject_search_duration_seconds_count"
    assert grew(searches, operation="facts_search") == 2  # /facts/search, and /context's
    assert grew(searches, operation="kb_search") == 2  # /kb/search, and /context's
    assert grew(searches, operation="episodes_search") == 1
    assert grew("memoryproject_context_build_duration_seconds_count") == 1
    assert (
        grew("memoryproject_http_request_duration_seconds_sum", route="/api/v1/context", method="POST", status="2xx")
        > 0
    )
    assert grew(requests, route="/api/v1/context", method="POST", status="2xx") == 1
    # and the backlog by tenant id, numbers only
    assert value(after, "memoryproject_queue_depth") == 1
    assert value(after, "memoryproject_facts_pending_review", tenant_id=str(tenant.pk)) == 1
    assert value(after, "memoryproject_facts_pending_review", tenant_id=str(other.pk)) == 2
    assert value(after, "memoryproject_conflicts_open", tenant_id=str(tenant.pk)) == 1
    assert ("memoryproject_conflicts_open", (("tenant_id", str(other.pk)),)) not in after
    assert not any("/api/v1/facts/" + str(fact_id) in str(labels) for _, labels in after)


def test_an_odd_method_does_not_make_a_new_label(metrics_on, db):
    APIClient().generic("BREW", "/api/health/live")

    samples = scrape()
    methods = {dict(labels).get("method") for name, labels in samples if name.startswith("memoryproject_http")}
    assert "BREW" not in methods
    assert "other" in methods


def test_several_processes_add_up_in_multiprocess_mode(tmp_path):
    # Two "workers" observe requests, a third answers the scrape: each process writes its own files.
    environment = {**os.environ, "PROMETHEUS_MULTIPROC_DIR": str(tmp_path)}
    observe = (
        "from core.metrics import request_observe; "
        "request_observe(route='/api/v1/facts', method='GET', status=200, seconds=0.02)"
    )
    read = textwrap.dedent(
        """
        from core.metrics import process_metrics_text
        print(process_metrics_text().decode())
        """
    )
    for _ in range(2):
        subprocess.run([sys.executable, "-c", observe], env=environment, cwd=settings.BASE_DIR, check=True, timeout=60)
    done = subprocess.run(
        [sys.executable, "-c", read],
        env=environment,
        cwd=settings.BASE_DIR,
        check=True,
        timeout=60,
        capture_output=True,
        text=True,
    )

    samples = {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(done.stdout)
        for sample in family.samples
    }
    labels = (("method", "GET"), ("route", "/api/v1/facts"), ("status", "2xx"))
    assert samples[("memoryproject_http_request_duration_seconds_count", labels)] == 2
    assert samples[("memoryproject_http_request_duration_seconds_sum", labels)] == pytest.approx(0.04)
