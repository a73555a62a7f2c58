"""The privacy API: erase everything held about one end user."""

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import serializers
from rest_framework.response import Response

from core.apis import ApiView
from core.validation import IDENTIFIER_MESSAGE, IDENTIFIER_PATTERN
from tenancy.authentication import request_actor, request_tenant

from . import services


class UserEraseApi(ApiView):
    class OutputSerializer(serializers.Serializer):
        class DeletedSerializer(serializers.Serializer):
            facts = serializers.IntegerField()
            fact_events = serializers.IntegerField()
            fact_conflicts = serializers.IntegerField()
            episodes = serializers.IntegerField()
            admin_log_entries = serializers.IntegerField()
            embedding_cache_rows = serializers.IntegerField()
            task_records = serializers.IntegerField()

            class Meta:
                ref_name = "UserErasureCounts"

        user_id = serializers.CharField()
        deleted = DeletedSerializer()

        class Meta:
            ref_name = "UserErasure"

    @extend_schema(
        request=None,
        responses={200: OutputSerializer},
        operation_id="users_erase",
        parameters=[
            OpenApiParameter(
                "user_id",
                OpenApiTypes.STR,
                OpenApiParameter.PATH,
                pattern=IDENTIFIER_PATTERN.pattern,
                description=IDENTIFIER_MESSAGE,
            )
        ],
    )
    def delete(self, request, user_id: str):
        """Erase everything this tenant holds about the user (idempotent: a second call deletes nothing)."""
        report = services.user_erase(tenant=request_tenant(request), user_id=user_id, actor=request_actor(request))
        return Response(self.OutputSerializer({"user_id": user_id, "deleted": report}).data)
