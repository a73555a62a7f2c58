"""The privacy API: export, import and erase everything held about one end user."""

from django.conf import settings
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework import serializers
from rest_framework.response import Response

from core.apis import ApiView, QuerySerializer
from core.validation import IDENTIFIER_MESSAGE, IDENTIFIER_PATTERN
from facts.apis import FilterQueryField
from tenancy.authentication import request_actor, request_tenant

from . import exports, imports, services
from .parsers import JsonDocumentParser, JsonLinesParser, JsonlParser

USER_ID_PARAMETER = OpenApiParameter(
    "user_id",
    OpenApiTypes.STR,
    OpenApiParameter.PATH,
    pattern=IDENTIFIER_PATTERN.pattern,
    description=IDENTIFIER_MESSAGE,
)


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
        request=None, responses={200: OutputSerializer}, operation_id="users_erase", parameters=[USER_ID_PARAMETER]
    )
    def delete(self, request, user_id: str):
        """Erase everything this tenant holds about the user (idempotent: a second call deletes nothing)."""
        report = services.user_erase(tenant=request_tenant(request), user_id=user_id, actor=request_actor(request))
        return Response(self.OutputSerializer({"user_id": user_id, "deleted": report}).data)


class UserExportApi(ApiView):
    class FilterSerializer(QuerySerializer):
        filters = FilterQueryField(
            required=False,
            help_text="JSON: export only the facts this filter selects (docs/filters.md), without episodes.",
        )

    @extend_schema(
        parameters=[USER_ID_PARAMETER, FilterSerializer],
        responses={
            (200, exports.CONTENT_TYPE): OpenApiResponse(
                OpenApiTypes.STR,
                description="JSON Lines, streamed: a header line, then one line per episode, fact (with its "
                "history) and conflict (docs/export-import.md).",
            )
        },
        operation_id="users_export",
    )
    def get(self, request, user_id: str):
        """Everything this tenant holds about the user, as JSON Lines: every fact (current, superseded, pending,
        rejected, archived, each with its history), every episode with its messages, every conflict. A user the
        tenant holds nothing of gives the header line alone. POST it to .../import to bring it back.
        With `filters`: the facts the filter selects, with their history, and the conflicts between them."""
        query = self.FilterSerializer(data=request.query_params)
        query.is_valid(raise_exception=True)
        filters = query.validated_data.get("filters")
        lines = exports.user_export_lines(tenant=request_tenant(request), user_id=user_id, filters=filters)
        return exports.export_response(lines, filename=f"memories-{user_id}.jsonl")


class UserImportApi(ApiView):
    parser_classes = [JsonLinesParser, JsonlParser, JsonDocumentParser]

    class DocumentSerializer(serializers.Serializer):
        results = serializers.ListField(
            child=serializers.DictField(),
            help_text="The records as one JSON document: Mem0's get_all answer, or the lines of an export in a list "
            "(a bare list of records is read too).",
        )

    class OutputSerializer(serializers.Serializer):
        class FactCountsSerializer(serializers.Serializer):
            created = serializers.IntegerField()
            merged = serializers.IntegerField(help_text="Already held current: combined into the held fact.")
            skipped = serializers.IntegerField(help_text="Already held, nothing to add (importing a file twice).")

        class EpisodeCountsSerializer(serializers.Serializer):
            created = serializers.IntegerField()
            skipped = serializers.IntegerField(help_text="The user already has a session of that id.")

        class ConflictCountsSerializer(serializers.Serializer):
            created = serializers.IntegerField()

        format = serializers.ChoiceField([exports.FORMAT, imports.MEM0])
        lines = serializers.IntegerField(help_text="Records read (lines of JSON Lines, items of a JSON document).")
        facts = FactCountsSerializer()
        episodes = EpisodeCountsSerializer()
        conflicts = ConflictCountsSerializer()

    @extend_schema(
        request={
            "application/x-ndjson": OpenApiTypes.STR,
            "application/jsonl": OpenApiTypes.STR,
            "application/json": DocumentSerializer,
        },
        responses={200: OutputSerializer},
        operation_id="users_import",
        parameters=[USER_ID_PARAMETER],
    )
    def post(self, request, user_id: str):
        """Import memories into this user (whatever user ids the file names): an export of this service (JSON Lines,
        from .../export) or Mem0 memories (one per line, a list, or {"results": [...]} as get_all answers). Facts
        are re-embedded with the active model. The whole file is checked first: a bad line answers 400 naming it
        ("line 7"), and nothing is written. Facts and sessions the user already holds are merged or skipped, so
        importing a file twice changes nothing."""
        data = request.data if isinstance(request.data, bytes) else b""
        report = imports.memories_import(
            tenant=request_tenant(request),
            data=data,
            user_id=user_id,
            actor=request_actor(request),
            max_facts=settings.FACTS_IMPORT_MAX_BATCH,
        )
        return Response(
            self.OutputSerializer(
                {
                    "format": report.format,
                    "lines": report.lines,
                    **{kind: report.total(kind) for kind in ("facts", "episodes", "conflicts")},
                }
            ).data
        )
