from django.conf import settings
from drf_spectacular.utils import extend_schema, inline_serializer
from rest_framework import serializers, status
from rest_framework.permissions import AllowAny
from rest_framework.response import Response
from rest_framework.views import APIView

from ai.checks import embedding_dimension_problems
from ai.embedders import get_embedder
from ai.errors import AIProviderError
from ai.services import cache_stats
from core.db import database_status
from facts.apis import ScoredFactOutputSerializer, SearchFiltersSerializer
from tenancy.authentication import request_tenant

from .context import context_build


class HealthApi(APIView):
    """Liveness and readiness: is the database reachable, with pgvector, and which embedder is configured."""

    authentication_classes: list = []
    permission_classes = [AllowAny]

    @extend_schema(
        responses=inline_serializer(
            "Health",
            {
                "status": serializers.CharField(),
                "database": serializers.DictField(),
                "embedding": serializers.DictField(),
            },
        )
    )
    def get(self, request):
        db = database_status()
        embedding = _embedding_status() if db.reachable else {}
        healthy = db.reachable and db.pgvector_version is not None and not embedding.get("problems")
        body = {
            "status": "ok" if healthy else "unavailable",
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
        }
        return Response(body, status=status.HTTP_200_OK if healthy else status.HTTP_503_SERVICE_UNAVAILABLE)


def _embedding_status() -> dict:
    problems = embedding_dimension_problems()
    try:
        model = get_embedder().model_name
    except AIProviderError as exc:
        model, problems = None, [*problems, exc.message]
    return {"model": model, "cache": cache_stats.as_dict(), "problems": problems}


class DocumentHitOutputSerializer(serializers.Serializer):
    """A knowledge-base passage (memoryproject.context.DocumentHit), in the context and in KB search results."""

    document_id = serializers.IntegerField()
    doc_id = serializers.CharField()
    heading_path = serializers.CharField()
    line_start = serializers.IntegerField()
    line_end = serializers.IntegerField()
    text = serializers.CharField()
    citation = serializers.CharField(help_text='"doc:<doc_id> §<heading path>, lines <start>-<end>"')
    score = serializers.FloatField()
    scores = serializers.SerializerMethodField()

    def get_scores(self, hit) -> dict:
        return {"vector": hit.vector, "keyword": hit.keyword, "final": hit.score}


class ContextApi(APIView):
    """Before an LLM call: the user's relevant facts and documents as prompt-ready text within a token budget.
    Facts that make it into the text count as used (they live longer under the forgetting policy)."""

    class InputSerializer(SearchFiltersSerializer):
        max_tokens = serializers.IntegerField(min_value=50, max_value=32000, required=False)
        include_documents = serializers.BooleanField(default=True)
        fact_limit = serializers.IntegerField(min_value=1, max_value=100, default=10)
        document_limit = serializers.IntegerField(min_value=0, max_value=50, default=5)

    class OutputSerializer(serializers.Serializer):
        text = serializers.CharField()
        token_count = serializers.IntegerField()
        cold_start = serializers.BooleanField()
        facts = ScoredFactOutputSerializer(many=True)
        documents = DocumentHitOutputSerializer(many=True)

    @extend_schema(request=InputSerializer, responses=OutputSerializer, operation_id="context_build")
    def post(self, request):
        serializer = self.InputSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        context = context_build(tenant=request_tenant(request), **serializer.validated_data)
        return Response(self.OutputSerializer(context).data)
