from drf_spectacular.utils import extend_schema
from rest_framework import serializers
from rest_framework.response import Response
from rest_framework.views import APIView

from memoryproject.tenancy.authentication import request_tenant

from .models import Fact
from .selectors import fact_get


class FactOutputSerializer(serializers.ModelSerializer):
    class Meta:
        model = Fact
        fields = [
            "id",
            "user_id",
            "agent_id",
            "category",
            "content",
            "confidence",
            "status",
            "source",
            "source_episode",
            "pinned",
            "usage_count",
            "last_used_at",
            "valid_from",
            "valid_to",
            "superseded_by",
            "occurred_at",
            "metadata",
            "embedding_model",
            "created_at",
            "updated_at",
        ]


class FactDetailApi(APIView):
    @extend_schema(responses=FactOutputSerializer, operation_id="facts_get")
    def get(self, request, fact_id: int):
        fact = fact_get(tenant=request_tenant(request), fact_id=fact_id)
        return Response(FactOutputSerializer(fact).data)
