"""The Mem0-compatible API: the routes mem0ai's MemoryClient calls, each a thin view that checks the Mem0 parameters
(mem0api.translation), calls one selector or service, and answers in Mem0's shape.

Errors are the API's one shape plus a top-level "detail" (the message), which is what mem0ai's client reads into
the exceptions it raises. These routes are not in the OpenAPI schema: their contract is Mem0's (docs/mem0.md)."""

from urllib.parse import urlencode

from django.core.exceptions import ValidationError
from rest_framework import serializers
from rest_framework.response import Response
from rest_framework.views import APIView

from core.api_errors import api_exception_handler
from core.apis import BODYLESS_METHODS, BodySerializer
from core.errors import ApplicationError
from core.pagination import CursorPage
from core.validation import validate_visible_text
from tenancy.authentication import request_actor, request_tenant
from tenancy.scopes import MEMORY_READ

from . import selectors, services
from .authentication import Mem0KeyAuthentication
from .translation import (
    accepted,
    add_ids,
    added_events,
    field_names,
    filters_from_query,
    memory_of,
    moment_of,
    not_supported,
    only_fields,
    ping,
    queued,
    scope_of,
)

DEFAULT_PAGE_SIZE = 100  # Mem0's
DEFAULT_TOP_K = 10
MAX_TOP_K = 100
MAX_PAGE = 1_000_000  # its offset must stay a bigint


def mem0_exception_handler(exc, context):
    """The API's error answer, with its message again as "detail": mem0ai's client raises it as the message."""
    response = api_exception_handler(exc, context)
    if response is not None and isinstance(response.data, dict) and "error" in response.data:
        response.data = {"detail": response.data["error"]["message"], **response.data}
    return response


class Mem0Api(APIView):
    """What every Mem0 route shares: `Token <key>` (or `Bearer <key>`) authentication, the Mem0 error answer, no
    body where the operation takes none, and query parameters read once each."""

    schema = None  # out of the OpenAPI schema (and so of its fuzzing): tests/mem0api test these routes' bad input
    authentication_classes = [Mem0KeyAuthentication]

    def get_exception_handler(self):
        return mem0_exception_handler

    def initial(self, request, *args, **kwargs):
        super().initial(request, *args, **kwargs)  # authentication and throttling first: 401 and 429 before 400
        repeated = [name for name, values in request.query_params.lists() if len(values) > 1]
        if repeated:
            raise serializers.ValidationError({name: ["Given more than once."] for name in repeated})
        if request.method in BODYLESS_METHODS and int(request.META.get("CONTENT_LENGTH") or 0):
            if request.data not in ({}, [], None, ""):
                raise serializers.ValidationError({"non_field_errors": ["This operation takes no request body."]})

    @staticmethod
    def query(request, *, reads: frozenset[str]) -> dict:
        return accepted(request.query_params.dict(), reads=reads)


def validated(serializer_class, data: dict) -> dict:
    serializer = serializer_class(data=data)
    serializer.is_valid(raise_exception=True)
    return serializer.validated_data


class PageSerializer(BodySerializer):
    page = serializers.IntegerField(min_value=1, max_value=MAX_PAGE, default=1)
    page_size = serializers.IntegerField(min_value=1, max_value=CursorPage.max_page_size, default=DEFAULT_PAGE_SIZE)


def page_answer(request, *, tenant, scope, page: int, page_size: int, fields=None) -> Response:
    """Mem0's get_all answer: {count, next, previous, results}, the links carrying page and page_size."""
    found = selectors.memories_page(tenant=tenant, scope=scope, page=page, page_size=page_size)
    query = {name: value for name, value in request.query_params.items() if name not in ("page", "page_size")}

    def link(number: int) -> str:
        return request.build_absolute_uri(
            f"{request.path}?{urlencode({**query, 'page': number, 'page_size': page_size})}"
        )

    return Response(
        {
            "count": found.count,
            "next": link(page + 1) if page * page_size < found.count else None,
            "previous": link(page - 1) if page > 1 else None,
            "results": [only_fields(memory_of(fact), fields) for fact in found.facts],
        }
    )


class PingApi(Mem0Api):
    """The key check MemoryClient makes when it is constructed."""

    def get(self, request):
        self.query(request, reads=frozenset())
        return Response(ping(tenant_name=request_tenant(request).name))


class AddInputSerializer(BodySerializer):
    messages = serializers.ListField(child=serializers.DictField(), allow_empty=False)
    infer = serializers.BooleanField(default=True)
    metadata = serializers.DictField(required=False, allow_null=True)
    timestamp = serializers.JSONField(required=False, allow_null=True)
    # Checked by translation.add_ids.
    user_id = serializers.JSONField(required=False, allow_null=True)
    agent_id = serializers.JSONField(required=False, allow_null=True)
    run_id = serializers.JSONField(required=False, allow_null=True)
    filters = serializers.JSONField(required=False, allow_null=True)


ADD_READS = frozenset(AddInputSerializer().fields)


def add_answer(request) -> Response:
    """Mem0's add. infer (the default): the messages become an episode whose background extraction distils the facts
    (each carrying the request's metadata); answered "queued", as Mem0 does. infer=false: each message stored as one
    fact as it is, answered with the ADD events."""
    body = accepted(request.data, reads=ADD_READS)
    data = validated(AddInputSerializer, body)
    scope, run_id = add_ids(body)
    occurred_at = moment_of(data.get("timestamp"), field="timestamp")
    tenant = request_tenant(request)
    if not data["infer"]:
        if run_id is not None:
            raise not_supported("run_id", "with infer=false a run_id is not kept: facts belong to a user (and agent)")
        facts = services.memories_add_as_given(
            tenant=tenant,
            scope=scope,
            messages=data["messages"],
            metadata=data.get("metadata"),
            occurred_at=occurred_at,
            actor=request_actor(request),
        )
        return Response({"results": added_events(facts)})
    stored = services.memories_add_conversation(
        tenant=tenant,
        scope=scope,
        messages=data["messages"],
        run_id=run_id,
        occurred_at=occurred_at,
        metadata=data.get("metadata"),
    )
    return Response(queued(stored.episode.pk))


class AddApi(Mem0Api):
    """POST /v3/memories/add/ (mem0ai 2.x)."""

    def post(self, request):
        self.query(request, reads=frozenset())
        return add_answer(request)


class MemoriesV1Api(Mem0Api):
    """/v1/memories/: GET lists (v1 get_all, ids as query parameters), POST adds (older clients), DELETE deletes a
    user's memories (delete_all)."""

    class FilterSerializer(PageSerializer):
        user_id = serializers.CharField(required=False)
        agent_id = serializers.CharField(required=False)

    def get(self, request):
        params = validated(self.FilterSerializer, self.query(request, reads=frozenset(self.FilterSerializer().fields)))
        scope = scope_of(user_id=params.get("user_id"), agent_id=params.get("agent_id"))
        return page_answer(
            request, tenant=request_tenant(request), scope=scope, page=params["page"], page_size=params["page_size"]
        )

    def post(self, request):
        self.query(request, reads=frozenset())
        return add_answer(request)

    def delete(self, request):
        params = self.query(request, reads=frozenset({"user_id", "agent_id", "filters"}))
        filters = params.get("filters")
        scope = scope_of(
            filters_from_query(filters) if filters is not None else None,
            user_id=params.get("user_id"),
            agent_id=params.get("agent_id"),
        )
        deleted = services.memories_delete_all(
            tenant=request_tenant(request), scope=scope, actor=request_actor(request)
        )
        return Response({"message": "Memories deleted successfully!", "deleted": len(deleted)})


class MemoriesListApi(Mem0Api):
    """POST /v2/memories/ and /v3/memories/: get_all with filters (page and page_size as query parameters, as
    mem0ai sends them, or in the body)."""

    class InputSerializer(PageSerializer):
        filters = serializers.JSONField(required=False, allow_null=True)
        categories = serializers.JSONField(required=False, allow_null=True)
        metadata = serializers.JSONField(required=False, allow_null=True)
        fields = serializers.ListField(child=serializers.CharField(), required=False)

    def post(self, request):
        pages = validated(PageSerializer, self.query(request, reads=frozenset({"page", "page_size"})))
        body = accepted(request.data, reads=frozenset(self.InputSerializer().fields))
        data = validated(self.InputSerializer, body)
        scope = scope_of(data.get("filters"), categories=data.get("categories"), metadata=data.get("metadata"))
        fields = field_names(data.get("fields"))
        return page_answer(
            request,
            tenant=request_tenant(request),
            scope=scope,
            page=data["page"] if "page" in body else pages["page"],
            page_size=data["page_size"] if "page_size" in body else pages["page_size"],
            fields=fields,
        )


class SearchApi(Mem0Api):
    reads_only = True  # a POST that only reads: memory:read is enough
    """POST /v1, /v2 and /v3 /memories/search/: the scope's memories ranked for the query, {"results": [...]} each
    with its score (the facts' hybrid search: vector and keywords fused, weighed by confidence and recency)."""

    class InputSerializer(BodySerializer):
        query = serializers.CharField(max_length=4000, validators=[validate_visible_text])
        filters = serializers.JSONField(required=False, allow_null=True)
        user_id = serializers.JSONField(required=False, allow_null=True)
        agent_id = serializers.JSONField(required=False, allow_null=True)
        categories = serializers.JSONField(required=False, allow_null=True)
        metadata = serializers.JSONField(required=False, allow_null=True)
        top_k = serializers.IntegerField(min_value=1, max_value=MAX_TOP_K, required=False)
        limit = serializers.IntegerField(min_value=1, max_value=MAX_TOP_K, required=False)  # older clients' top_k
        threshold = serializers.FloatField(required=False, allow_null=True)
        fields = serializers.ListField(child=serializers.CharField(), required=False, allow_null=True)

    def post(self, request):
        self.query(request, reads=frozenset())
        data = validated(self.InputSerializer, accepted(request.data, reads=frozenset(self.InputSerializer().fields)))
        scope = scope_of(
            data.get("filters"),
            user_id=data.get("user_id"),
            agent_id=data.get("agent_id"),
            categories=data.get("categories"),
            metadata=data.get("metadata"),
        )
        fields = field_names(data.get("fields"))
        hits = selectors.memories_search(
            tenant=request_tenant(request),
            scope=scope,
            query=data["query"],
            limit=data.get("top_k") or data.get("limit") or DEFAULT_TOP_K,
        )
        threshold = data.get("threshold")
        results = [
            only_fields(memory_of(hit.fact, score=hit.score), fields)
            for hit in hits
            if threshold is None or hit.score >= threshold
        ]
        return Response({"results": results})


class MemoryDetailApi(Mem0Api):
    """/v1/memories/{memory_id}/: get, update (text, metadata, timestamp), delete (delete_linked: also the older
    facts it replaced)."""

    class UpdateSerializer(BodySerializer):
        text = serializers.CharField(required=False)
        metadata = serializers.DictField(required=False, allow_null=True)
        timestamp = serializers.JSONField(required=False, allow_null=True)

    class DeleteSerializer(BodySerializer):
        delete_linked = serializers.BooleanField(default=False)

    def get(self, request, memory_id: str):
        self.query(request, reads=frozenset())
        return Response(memory_of(selectors.memory_get(tenant=request_tenant(request), memory_id=memory_id)))

    def put(self, request, memory_id: str):
        self.query(request, reads=frozenset())
        data = validated(self.UpdateSerializer, accepted(request.data, reads=frozenset(self.UpdateSerializer().fields)))
        changes = {"content": data.get("text"), "metadata": data.get("metadata")}
        changes["occurred_at"] = moment_of(data.get("timestamp"), field="timestamp")
        changes = {name: value for name, value in changes.items() if value is not None}
        if not changes:
            raise ValidationError({"non_field_errors": "Give text, metadata or timestamp to change."})
        fact = services.memory_update(
            tenant=request_tenant(request), memory_id=memory_id, actor=request_actor(request), **changes
        )
        return Response(memory_of(fact))

    def delete(self, request, memory_id: str):
        params = validated(self.DeleteSerializer, self.query(request, reads=frozenset({"delete_linked"})))
        services.memory_delete(
            tenant=request_tenant(request),
            memory_id=memory_id,
            actor=request_actor(request),
            linked=params["delete_linked"],
        )
        return Response({"message": "Memory deleted successfully!"})


class MemoryHistoryApi(Mem0Api):
    """GET /v1/memories/{memory_id}/history/: ADD, UPDATE and DELETE entries with the old and new memory."""

    def get(self, request, memory_id: str):
        self.query(request, reads=frozenset())
        return Response(selectors.memory_history(tenant=request_tenant(request), memory_id=memory_id))


class NotSupportedApi(Mem0Api):
    """A Mem0 feature this service does not have: every method answers 400 not_supported, saying what to do instead."""

    required_scope = MEMORY_READ  # any key learns what is not supported

    feature = ""
    reason = ""

    def initial(self, request, *args, **kwargs):
        APIView.initial(self, request, *args, **kwargs)  # whatever was sent, the answer is the same

    def handle(self, request, *args, **kwargs):
        raise not_supported(self.feature, self.reason)

    get = post = put = patch = delete = handle


class UnknownRouteApi(APIView):
    """Any other path under /mem0/: 404 in the Mem0 error answer, whatever the key."""

    schema = None
    authentication_classes: list = []
    permission_classes: list = []

    def get_exception_handler(self):
        return mem0_exception_handler

    def handle(self, request, *args, **kwargs):
        raise ApplicationError(
            f"No such route in the Mem0-compatible API: {request.method} {request.path} (see docs/mem0.md).",
            code="not_found",
            status_code=404,
        )

    get = post = put = patch = delete = head = options = handle
