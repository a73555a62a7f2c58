"""The facts API: thin views that validate, call one service or selector, and present the result."""

import json

from django.conf import settings
from drf_spectacular.utils import extend_schema, extend_schema_field
from rest_framework import serializers, status
from rest_framework.response import Response

from core.api_fields import CommaSeparatedChoicesField, DegradedField, IdentifierField, TimestampField
from core.apis import ApiView, BodySerializer, PageQuerySerializer
from core.pagination import page_schema, paginated_response
from core.parsers import json_problem_check
from core.validation import validate_visible_text
from search.filters import FilterError
from tenancy.authentication import request_actor, request_tenant
from tenancy.scopes import REVIEW

from . import selectors, services
from .models import Fact, FactConflict, FactEvent

EMBEDDING_STATES = ["ready", "pending"]


def _filter_tree(value):
    try:
        return selectors.fact_filters_parse(value, path="")
    except FilterError as error:  # named below the field, as "filters.AND[1].category"
        raise serializers.ValidationError({error.path.lstrip(".") or "non_field_errors": [error.reason]}) from None


class FilterQueryField(serializers.CharField):
    """A query parameter holding a filter (JSON), parsed into the filter language's tree; a 400 names the path."""

    def to_internal_value(self, data):
        text = super().to_internal_value(data)
        try:
            value = json.loads(text)
        except (ValueError, RecursionError):
            raise serializers.ValidationError("Must be JSON: a filter object.") from None
        json_problem_check(value)  # NUL characters, lone surrogates, nesting past API_MAX_JSON_DEPTH
        return _filter_tree(value)


class FilterBodyField(serializers.JSONField):
    """A body field holding a filter, parsed into the filter language's tree (the body parser checked the JSON)."""

    def to_internal_value(self, data):
        return _filter_tree(super().to_internal_value(data))


class FactOutputSerializer(serializers.ModelSerializer):
    embedding = serializers.SerializerMethodField(
        help_text="ready: embedded, found by meaning and by keywords. pending: stored while the embedding provider "
        "failed; found by keywords meanwhile, embedded (and, for a new fact, deduplicated and judged like any new "
        "fact) automatically once the provider answers again."
    )

    class Meta:
        model = Fact
        fields = [
            "id", "user_id", "agent_id", "category", "content", "confidence", "status", "source",
            "source_episode", "pinned", "usage_count", "last_used_at", "valid_from", "valid_to",
            "superseded_by", "occurred_at", "metadata", "embedding", "embedding_model", "reviewed_at", "archived_at",
            "proposal", "hold_reason", "source_messages", "created_at", "updated_at",
        ]  # fmt: skip
        extra_kwargs = {
            "hold_reason": {
                "help_text": "Why it was held for review whatever its confidence: 'instruction-like: ...' when its "
                "text reads as instructions to an assistant (kept once a person approves it). Empty otherwise."
            }
        }

    @extend_schema_field(serializers.ChoiceField(EMBEDDING_STATES))
    def get_embedding(self, fact) -> str:
        return "pending" if fact.embedding_pending else "ready"


class FactEventOutputSerializer(serializers.ModelSerializer):
    class Meta:
        model = FactEvent
        fields = ["id", "fact_id", "action", "actor", "before", "after", "created_at"]


class ConflictOutputSerializer(serializers.ModelSerializer):
    existing_fact = FactOutputSerializer()
    new_fact = FactOutputSerializer()

    class Meta:
        model = FactConflict
        fields = [
            "id", "user_id", "status", "reason", "resolution", "resolved_by", "resolved_at", "created_at",
            "existing_fact", "new_fact",
        ]  # fmt: skip


class FactListCreateApi(ApiView):
    class FilterSerializer(PageQuerySerializer):
        user_id = IdentifierField()
        status = CommaSeparatedChoicesField(Fact.Status.values, required=False)
        category = CommaSeparatedChoicesField(Fact.Category.values, required=False)
        source = CommaSeparatedChoicesField(Fact.Source.values, required=False)
        pinned = serializers.BooleanField(required=False, allow_null=True, default=None)
        agent_id = serializers.CharField(required=False, max_length=255)
        validity = serializers.ChoiceField(["current", "superseded", "all"], default="current")
        filters = FilterQueryField(
            required=False,
            help_text='The filter language as JSON, e.g. {"AND": [{"category": "preference"}, '
            '{"metadata.priority": {"gte": 2}}]} (docs/filters.md).',
        )

    class InputSerializer(BodySerializer):
        user_id = IdentifierField()
        content = serializers.CharField()
        category = serializers.ChoiceField(Fact.Category.values, default=Fact.Category.OTHER)
        confidence = serializers.FloatField(min_value=0.0, max_value=1.0, default=1.0)
        pinned = serializers.BooleanField(default=False)
        occurred_at = TimestampField(required=False, allow_null=True)
        metadata = serializers.DictField(required=False)
        agent_id = serializers.CharField(required=False, allow_blank=True, max_length=255)

    class OutputSerializer(serializers.Serializer):
        outcome = serializers.ChoiceField(
            ["created", "merged", "superseded", "pending", "conflict"],
            help_text="pending: the fact waits for review with a proposal (merge into or supersede another fact) "
            "that approving applies, or because its text reads as instructions (hold_reason); conflict: it waits "
            "until the conflict is resolved.",
        )
        fact = FactOutputSerializer()
        superseded_ids = serializers.ListField(child=serializers.IntegerField())
        conflict_ids = serializers.ListField(child=serializers.IntegerField())

    @extend_schema(
        parameters=[FilterSerializer], responses=page_schema(FactOutputSerializer, "Fact"), operation_id="facts_list"
    )
    def get(self, request):
        filters = self.FilterSerializer(data=request.query_params)
        filters.is_valid(raise_exception=True)
        data = filters.validated_data
        queryset = selectors.facts_list(
            tenant=request_tenant(request),
            user_id=data["user_id"],
            statuses=data.get("status"),
            categories=data.get("category"),
            sources=data.get("source"),
            pinned=data.get("pinned"),
            agent_id=data.get("agent_id"),
            validity=data["validity"],
            filters=data.get("filters"),
        )
        return paginated_response(request, self, queryset, FactOutputSerializer)

    @extend_schema(
        request=InputSerializer, responses={201: OutputSerializer, 200: OutputSerializer}, operation_id="facts_remember"
    )
    def post(self, request):
        serializer = self.InputSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        result = services.fact_remember(
            tenant=request_tenant(request),
            source=Fact.Source.AGENT,
            actor=request_actor(request),
            **serializer.validated_data,
        )
        code = status.HTTP_200_OK if result.outcome == "merged" else status.HTTP_201_CREATED
        return Response(self.OutputSerializer(result).data, status=code)


class FactDetailApi(ApiView):
    class UpdateSerializer(BodySerializer):
        content = serializers.CharField(required=False)
        category = serializers.ChoiceField(Fact.Category.values, required=False)
        confidence = serializers.FloatField(min_value=0.0, max_value=1.0, required=False)
        pinned = serializers.BooleanField(required=False)
        occurred_at = TimestampField(required=False, allow_null=True)
        metadata = serializers.DictField(required=False)
        agent_id = serializers.CharField(required=False, allow_blank=True, max_length=255)

    @extend_schema(responses=FactOutputSerializer, operation_id="facts_get")
    def get(self, request, fact_id: int):
        fact = selectors.fact_get(tenant=request_tenant(request), fact_id=fact_id)
        return Response(FactOutputSerializer(fact).data)

    @extend_schema(request=UpdateSerializer, responses=FactOutputSerializer, operation_id="facts_update")
    def patch(self, request, fact_id: int):
        serializer = self.UpdateSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        fact = services.fact_update(
            tenant=request_tenant(request), fact_id=fact_id, actor=request_actor(request), **serializer.validated_data
        )
        return Response(FactOutputSerializer(fact).data)

    @extend_schema(responses={204: None}, operation_id="facts_delete")
    def delete(self, request, fact_id: int):
        services.fact_delete(tenant=request_tenant(request), fact_id=fact_id, actor=request_actor(request))
        return Response(status=status.HTTP_204_NO_CONTENT)


class FactHistoryApi(ApiView):
    @extend_schema(responses=FactEventOutputSerializer(many=True), operation_id="facts_history")
    def get(self, request, fact_id: int):
        events = selectors.fact_events(tenant=request_tenant(request), fact_id=fact_id)
        if not events.exists():
            selectors.fact_get(tenant=request_tenant(request), fact_id=fact_id)  # 404 unless it exists here
        return Response(FactEventOutputSerializer(events, many=True).data)


class FactApproveApi(ApiView):
    takes_body = False
    required_scope = REVIEW

    @extend_schema(request=None, responses=FactOutputSerializer, operation_id="facts_approve")
    def post(self, request, fact_id: int):
        fact = services.fact_approve(tenant=request_tenant(request), fact_id=fact_id, actor=request_actor(request))
        return Response(FactOutputSerializer(fact).data)


class FactRejectApi(ApiView):
    takes_body = False
    required_scope = REVIEW

    @extend_schema(request=None, responses=FactOutputSerializer, operation_id="facts_reject")
    def post(self, request, fact_id: int):
        fact = services.fact_reject(tenant=request_tenant(request), fact_id=fact_id, actor=request_actor(request))
        return Response(FactOutputSerializer(fact).data)


class FactSupersessionUndoApi(ApiView):
    takes_body = False
    required_scope = REVIEW

    @extend_schema(request=None, responses=FactOutputSerializer, operation_id="facts_undo_supersession")
    def post(self, request, fact_id: int):
        """The fact was superseded wrongly: make it current again and reject the fact that superseded it."""
        fact = services.fact_supersession_undo(
            tenant=request_tenant(request), fact_id=fact_id, actor=request_actor(request)
        )
        return Response(FactOutputSerializer(fact).data)


class FactRestoreApi(ApiView):
    takes_body = False

    @extend_schema(request=None, responses=FactOutputSerializer, operation_id="facts_restore")
    def post(self, request, fact_id: int):
        """Bring an archived fact back (until it is purged) with the status it had before."""
        fact = services.fact_restore(tenant=request_tenant(request), fact_id=fact_id, actor=request_actor(request))
        return Response(FactOutputSerializer(fact).data)


class FactImportItemSerializer(BodySerializer):
    """The shape of one fact, for the schema: facts_import checks the items itself, once, in a tenth of
    the time a serializer takes (1,000 items per request)."""

    user_id = IdentifierField()
    content = serializers.CharField()
    category = serializers.ChoiceField(Fact.Category.values, default=Fact.Category.OTHER)
    confidence = serializers.FloatField(min_value=0.0, max_value=1.0, default=1.0)
    status = serializers.ChoiceField(services.IMPORT_STATUSES, default=Fact.Status.ACTIVE)
    pinned = serializers.BooleanField(default=False)
    occurred_at = TimestampField(required=False, allow_null=True)
    valid_from = TimestampField(required=False, allow_null=True)
    metadata = serializers.DictField(required=False)
    agent_id = serializers.CharField(required=False, allow_blank=True, max_length=255)


class FactDeleteByFilterApi(ApiView):
    """Delete the user's facts a filter selects: current ones, those waiting for review and the history alike."""

    class InputSerializer(BodySerializer):
        user_id = IdentifierField()
        filters = FilterBodyField(help_text="The filter language (docs/filters.md); required: no filter, no deletion.")
        agent_id = serializers.CharField(required=False, max_length=255)

        class Meta:
            ref_name = "FactDeleteByFilterInput"

    class OutputSerializer(serializers.Serializer):
        deleted = serializers.IntegerField()
        fact_ids = serializers.ListField(child=serializers.IntegerField())

    @extend_schema(request=InputSerializer, responses=OutputSerializer, operation_id="facts_delete_by_filter")
    def post(self, request):
        serializer = self.InputSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        data = serializer.validated_data
        deleted = services.facts_delete_of_user(
            tenant=request_tenant(request),
            user_id=data["user_id"],
            agent_id=data.get("agent_id"),
            filters=data["filters"],
            actor=request_actor(request),
        )
        return Response(self.OutputSerializer({"deleted": len(deleted), "fact_ids": deleted}).data)


class FactImportApi(ApiView):
    class InputSerializer(BodySerializer):
        # The most per request is FACTS_IMPORT_MAX_BATCH, checked by the service with the items.
        facts = serializers.ListField(child=serializers.DictField(), min_length=1)

    class SchemaInputSerializer(BodySerializer):
        class Meta:
            ref_name = "FactImportInput"

        facts = serializers.ListField(
            child=FactImportItemSerializer(), min_length=1, max_length=settings.FACTS_IMPORT_MAX_BATCH
        )

    class OutputSerializer(serializers.Serializer):
        imported = serializers.IntegerField()
        ids = serializers.ListField(child=serializers.IntegerField())

    @extend_schema(request=SchemaInputSerializer, responses={201: OutputSerializer}, operation_id="facts_import")
    def post(self, request):
        envelope = self.InputSerializer(data=request.data)
        envelope.is_valid(raise_exception=True)
        facts = services.facts_import(
            tenant=request_tenant(request),
            facts=envelope.validated_data["facts"],
            actor=request_actor(request),
        )
        return Response({"imported": len(facts), "ids": [fact.pk for fact in facts]}, status=status.HTTP_201_CREATED)


class ConflictListApi(ApiView):
    class FilterSerializer(PageQuerySerializer):
        user_id = IdentifierField(required=False)
        status = serializers.ChoiceField(FactConflict.Status.values, required=False)

    @extend_schema(
        parameters=[FilterSerializer],
        responses=page_schema(ConflictOutputSerializer, "Conflict"),
        operation_id="conflicts_list",
    )
    def get(self, request):
        filters = self.FilterSerializer(data=request.query_params)
        filters.is_valid(raise_exception=True)
        conflicts = selectors.conflicts_list(tenant=request_tenant(request), **filters.filter_values)
        return paginated_response(request, self, conflicts, ConflictOutputSerializer)


class ConflictResolveApi(ApiView):
    required_scope = REVIEW

    class InputSerializer(BodySerializer):
        resolution = serializers.ChoiceField(FactConflict.Resolution.values)
        content = serializers.CharField(required=False, help_text="With merge: the one text that replaces both.")

    @extend_schema(request=InputSerializer, responses=ConflictOutputSerializer, operation_id="conflicts_resolve")
    def post(self, request, conflict_id: int):
        serializer = self.InputSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        tenant = request_tenant(request)
        services.conflict_resolve(
            tenant=tenant, conflict_id=conflict_id, actor=request_actor(request), **serializer.validated_data
        )
        return Response(ConflictOutputSerializer(selectors.conflict_get(tenant=tenant, conflict_id=conflict_id)).data)


class ScoredFactOutputSerializer(serializers.Serializer):
    fact = FactOutputSerializer()
    score = serializers.FloatField()
    scores = serializers.SerializerMethodField()

    def get_scores(self, hit) -> dict:
        return {"vector": hit.vector, "keyword": hit.keyword, "decay": hit.decay, "final": hit.score}


class SearchFiltersSerializer(BodySerializer):
    """Filters shared by fact search and context building."""

    user_id = IdentifierField()
    query = serializers.CharField(max_length=4000, validators=[validate_visible_text])
    categories = serializers.ListField(child=serializers.ChoiceField(Fact.Category.values), required=False)
    agent_id = serializers.CharField(required=False, max_length=255)
    filters = FilterBodyField(
        required=False,
        help_text='Only facts this filter selects (docs/filters.md), e.g. {"AND": [{"category": "preference"}, '
        '{"metadata.priority": {"gte": 2}}]}.',
    )


class FactSearchApi(ApiView):
    reads_only = True  # may be answered from a replica (core.replicas)

    class InputSerializer(SearchFiltersSerializer):
        limit = serializers.IntegerField(min_value=1, max_value=100, default=10)
        include_pending = serializers.BooleanField(default=False)
        as_of = TimestampField(required=False)
        occurred_after = TimestampField(required=False)
        occurred_before = TimestampField(required=False)
        mmr_lambda = serializers.FloatField(min_value=0.0, max_value=1.0, required=False)
        half_life_days = serializers.FloatField(min_value=0.0, required=False)

    class OutputSerializer(serializers.Serializer):
        results = ScoredFactOutputSerializer(many=True)
        degraded = DegradedField()

    @extend_schema(request=InputSerializer, responses=OutputSerializer, operation_id="facts_search")
    def post(self, request):
        serializer = self.InputSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        found = selectors.facts_search_answer(tenant=request_tenant(request), **serializer.validated_data)
        return Response(self.OutputSerializer(found).data)
