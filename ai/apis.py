"""The embedding cache as the calling tenant sees it."""

from drf_spectacular.utils import extend_schema
from rest_framework import serializers
from rest_framework.response import Response

from core.apis import ApiView
from tenancy.authentication import request_tenant

from . import selectors


class EmbeddingCacheApi(ApiView):
    class OutputSerializer(serializers.Serializer):
        enabled = serializers.BooleanField()
        model = serializers.CharField()
        hits = serializers.IntegerField(help_text="This tenant's texts found in the cache, by this server process.")
        misses = serializers.IntegerField(help_text="This tenant's texts the model had to embed, by this process.")
        rows = serializers.IntegerField(help_text="Vectors stored for this tenant and its users, of the active model.")

        class Meta:
            ref_name = "EmbeddingCacheStats"

    @extend_schema(responses=OutputSerializer, operation_id="embedding_cache_stats")
    def get(self, request):
        """The calling tenant's embedding cache: hits and misses of this server process, rows stored."""
        stats = selectors.embedding_cache_stats(tenant=request_tenant(request))
        return Response(self.OutputSerializer(stats).data)
