from django.conf import settings
from drf_spectacular.utils import OpenApiResponse, extend_schema, inline_serializer
from rest_framework import serializers, status
from rest_framework.permissions import AllowAny
from rest_framework.response import Response

from ai.checks import embedding_dimension_problems
from ai.embedders import get_embedder
from ai.errors import AIProviderError
from ai.services import EMBEDDINGS, embedding_probe, provider_state
from core.api_errors import error_body
from core.apis import ApiView
from core.db import database_status

from .selectors import facts_awaiting_embedding, providers_check, readiness_check

PROVIDERS_HELP = (
    '"embeddings" (and "chat" when a chat model is configured): {"status": "ok" | "failing", "last_success_at"}, '
    'failing with "error", "since", "last_failure_at" and "consecutive_failures", as this process saw its calls.'
)


class PublicApiView(ApiView):
    """For probes: no API key (so no tenant, and no throttle counts it: they count per key), nothing of any tenant."""

    authentication_classes: list = []
    permission_classes = [AllowAny]
    throttle_classes: list = []


class LiveApi(PublicApiView):
    """Liveness: the process answers. Touches nothing else (no database), so a slow database never gets a healthy
    process restarted."""

    @extend_schema(
        operation_id="health_live",
        responses=inline_serializer("HealthLive", {"status": serializers.CharField()}),
    )
    def get(self, request):
        return Response({"status": "ok"})


class ReadyApi(PublicApiView):
    """Readiness: this process can serve requests (database with pgvector, embedder loaded, a worker alive).
    "degraded" (still 200): an AI provider fails, as this process saw it (`providers`): searches rank by keywords
    alone and facts are stored awaiting their vectors meanwhile."""

    @extend_schema(
        operation_id="health_ready",
        responses={
            200: inline_serializer(
                "HealthReady",
                {
                    "status": serializers.ChoiceField(["ok", "degraded"]),
                    "checks": serializers.DictField(),
                    "providers": serializers.DictField(help_text=PROVIDERS_HELP),
                },
            ),
            503: OpenApiResponse(description="Not ready: the message names what is not, `details` has every check."),
        },
    )
    def get(self, request):
        readiness = readiness_check()
        if readiness.ready:
            return Response(
                {
                    "status": "degraded" if readiness.degraded else "ok",
                    "checks": readiness.checks,
                    "providers": readiness.providers,
                }
            )
        failing = "; ".join(f"{name}: {why}" for name, why in readiness.failing.items())
        return Response(
            error_body("not_ready", f"Not ready. {failing}", readiness.checks),
            status=status.HTTP_503_SERVICE_UNAVAILABLE,
        )


class HealthApi(PublicApiView):
    """The detailed view: is the database reachable, with pgvector, and which embedder is configured (builds it);
    the AI providers' state, "degraded" (still 200) while one fails. While the embedding provider is failing, this
    view makes one embedding call itself, so it also sees the provider answer again."""

    @extend_schema(
        responses=inline_serializer(
            "Health",
            {
                "status": serializers.ChoiceField(["ok", "degraded", "unavailable"]),
                "database": serializers.DictField(),
                "embedding": serializers.DictField(),
                "providers": serializers.DictField(help_text=PROVIDERS_HELP),
            },
        )
    )
    def get(self, request):
        db = database_status()
        embedding = _embedding_status() if db.reachable else {}
        healthy = db.reachable and db.pgvector_version is not None and not embedding.get("problems")
        if healthy and provider_state(EMBEDDINGS).failing:
            embedding_probe()
        providers = providers_check()
        if db.reachable and healthy:
            providers[EMBEDDINGS]["facts_awaiting_embedding"] = facts_awaiting_embedding()
        degraded = any(report["status"] != "ok" for report in providers.values())
        body = {
            "status": ("degraded" if degraded else "ok") if healthy else "unavailable",
            "database": {
                "reachable": db.reachable,
                "server_version": db.server_version,
                "pgvector_version": db.pgvector_version,
                **({"error": db.error} if db.error else {}),
            },
            "embedding": {
                "provider": settings.EMBEDDING_PROVIDER,
                "dimensions": settings.EMBEDDING_DIMENSIONS,
                **embedding,
            },
            "providers": providers,
        }
        return Response(body, status=status.HTTP_200_OK if healthy else status.HTTP_503_SERVICE_UNAVAILABLE)


def _embedding_status() -> dict:
    problems = embedding_dimension_problems()
    try:
        model = get_embedder().model_name
    except AIProviderError as exc:
        model, problems = None, [*problems, exc.message]
    # No cache statistics here: anyone may call this, and hit counts tell what others embedded (a tenant sees its own
    # at GET /api/v1/embedding-cache).
    return {"model": model, "problems": problems}
