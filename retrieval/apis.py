"""The context API: what an agent calls before every LLM turn."""

from drf_spectacular.utils import extend_schema
from rest_framework import serializers
from rest_framework.response import Response

from core.api_fields import DegradedField
from core.apis import ApiView
from facts.apis import ScoredFactOutputSerializer, SearchFiltersSerializer
from kb.apis import DocumentHitOutputSerializer
from tenancy.authentication import request_tenant

from .context import context_build


class ContextApi(ApiView):
    """Before an LLM call: the user's relevant facts and documents as prompt-ready text within a token budget.
    Facts that make it into the text count as used (they live longer under the forgetting policy). A fact or passage
    less similar to the query than the relevance floor (CONTEXT_FACTS_MIN_SIMILARITY / _DOCUMENTS_: cosine) is left
    out, so an off-topic question gets none; every one returned carries its scores."""

    reads_only = True  # may be answered from a replica (core.replicas)

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
        degraded = DegradedField()

    @extend_schema(request=InputSerializer, responses=OutputSerializer, operation_id="context_build")
    def post(self, request):
        serializer = self.InputSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        context = context_build(tenant=request_tenant(request), **serializer.validated_data)
        return Response(self.OutputSerializer(context).data)
