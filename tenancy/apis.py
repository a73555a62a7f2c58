from drf_spectacular.utils import extend_schema
from rest_framework import serializers
from rest_framework.response import Response

from core.apis import ApiView


class WhoAmIApi(ApiView):
    """Which tenant and key the request authenticated as: the quickest check that a key works."""

    class OutputSerializer(serializers.Serializer):
        tenant = serializers.CharField(source="tenant.name")
        key_prefix = serializers.CharField(source="api_key.prefix")
        key_name = serializers.CharField(source="api_key.name")

    @extend_schema(responses=OutputSerializer, operation_id="whoami")
    def get(self, request):
        return Response(self.OutputSerializer(request.user).data)
