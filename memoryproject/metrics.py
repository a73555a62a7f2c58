"""GET /metrics: Prometheus' text format, behind METRICS_TOKEN.

What processes measured (core.metrics: request, search and context latencies) plus what the database says at
scrape time (queue depth, facts pending review and open conflicts, by tenant id: numbers only).
"""

import hmac

from django.conf import settings
from django.http import HttpResponse
from django.views.decorators.http import require_GET
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.exposition import CONTENT_TYPE_LATEST

from core.metrics import process_metrics_text

from .selectors import backlog_counts


class BacklogCollector:
    def collect(self):
        backlog = backlog_counts()
        queue = GaugeMetricFamily(
            "memoryproject_queue_depth", "django-q tasks queued or running (ORM broker rows), all tenants."
        )
        queue.add_metric([], backlog.queued_tasks)
        yield queue
        by_tenant = {
            "memoryproject_facts_pending_review": ("Facts waiting for review, by tenant id.", backlog.pending_facts),
            "memoryproject_conflicts_open": (
                "Fact conflicts waiting for a resolution, by tenant id.",
                backlog.open_conflicts,
            ),
        }
        for name, (documentation, counts) in by_tenant.items():
            family = GaugeMetricFamily(name, documentation, labels=["tenant_id"])
            for tenant_id, count in counts.items():
                family.add_metric([str(tenant_id)], count)
            yield family


def backlog_metrics_text() -> bytes:
    registry = CollectorRegistry()
    registry.register(BacklogCollector())
    return generate_latest(registry)


@require_GET
def metrics_view(request):
    """404 unless METRICS_TOKEN is set (no metrics unless asked for); 401 without `Authorization: Bearer <it>`."""
    token = settings.METRICS_TOKEN
    if not token:
        return HttpResponse("Not found.\n", status=404, content_type="text/plain")
    scheme, _, given = request.headers.get("Authorization", "").partition(" ")
    if scheme.lower() != "bearer" or not hmac.compare_digest(given.strip().encode(), token.encode()):
        response = HttpResponse("A valid METRICS_TOKEN is required.\n", status=401, content_type="text/plain")
        response["WWW-Authenticate"] = 'Bearer realm="metrics"'
        return response
    return HttpResponse(process_metrics_text() + backlog_metrics_text(), content_type=CONTENT_TYPE_LATEST)
