"""The episodes API: thin views that validate, call one service or selector, and present the result."""

import re

from django.core.exceptions import ValidationError
from drf_spectacular.utils import extend_schema
from rest_framework import serializers, status
from rest_framework.response import Response

from ai.services import DEGRADED_EMBEDDINGS, query_vector_or_none
from core.api_fields import CommaSeparatedChoicesField, IdentifierField, TimestampField
from core.apis import ApiView, BodySerializer, PageQuerySerializer
from core.pagination import page_schema, paginated_response
from core.timestamps import parse_timestamp
from core.validation import has_visible_text, validate_visible_text
from facts.apis import FactOutputSerializer
from tenancy.authentication import request_tenant

from . import selectors, services
from .messages import ROLES
from .models import Episode


class MessageSerializer(BodySerializer):
    class Meta:
        ref_name = "EpisodeMessage"  # a unique schema component name

    role = serializers.ChoiceField(ROLES)
    content = serializers.CharField(trim_whitespace=False, validators=[validate_visible_text])
    timestamp = TimestampField(required=False, allow_null=True)


# What DRF's CharField refuses in any text (ProhibitNullCharactersValidator, ProhibitSurrogateCharactersValidator).
_REFUSED_CHARACTERS = re.compile("[\x00\ud800-\udfff]")


class MessagesField(serializers.ListField):
    """The posted messages. DRF's field-by-field validation costs ~0.17 ms a message (87 ms for the 500 of a
    session posted so far, most of the post), so a list whose messages are all plainly well formed is passed on
    as it is (episode_store cleans it: clean_messages); any other is validated by MessageSerializer, whose errors
    name the message and its field."""

    def to_internal_value(self, data):
        if isinstance(data, list) and data and all(map(_plainly_well_formed, data)):
            return data
        return super().to_internal_value(data)


def _plainly_well_formed(message) -> bool:
    if not isinstance(message, dict) or not message.keys() <= {"role", "content", "timestamp"}:
        return False
    content, timestamp = message.get("content"), message.get("timestamp")
    if message.get("role") not in ROLES or not isinstance(content, str) or _REFUSED_CHARACTERS.search(content):
        return False
    if not has_visible_text(content):
        return False
    try:
        return timestamp is None or (isinstance(timestamp, str) and parse_timestamp(timestamp, field="timestamp"))
    except ValidationError:
        return False


class EpisodeListOutputSerializer(serializers.ModelSerializer):
    """An episode without its messages."""

    class Meta:
        model = Episode
        fields = [
            "id", "user_id", "agent_id", "session_id", "message_count", "summary", "metadata", "extraction_status",
            "extraction_error", "extraction_skip_reason", "extraction_fallback_reason", "extraction_next_attempt_at",
            "last_message_at", "created_at", "updated_at",
        ]  # fmt: skip


class EpisodeOutputSerializer(serializers.ModelSerializer):
    """An episode with what was said and the facts extracted from it."""

    messages = MessageSerializer(many=True, source="message_rows")  # in order (selectors.episode_get)
    facts = FactOutputSerializer(many=True)

    class Meta:
        model = Episode
        fields = [
            "id", "user_id", "agent_id", "session_id", "message_count", "messages", "summary", "metadata",
            "summarized_message_count", "extraction_status", "extraction_error", "extraction_skip_reason",
            "extraction_fallback_reason", "extracted_message_count", "extraction_attempts",
            "extraction_next_attempt_at", "facts", "last_message_at", "created_at", "updated_at",
        ]  # fmt: skip


class EpisodeListCreateApi(ApiView):
    class FilterSerializer(PageQuerySerializer):
        user_id = IdentifierField()
        session_id = IdentifierField(required=False)
        agent_id = serializers.CharField(required=False, max_length=255)
        status = CommaSeparatedChoicesField(Episode.ExtractionStatus.values, required=False)

    class InputSerializer(BodySerializer):
        class Meta:
            ref_name = "EpisodeStoreInput"  # a unique schema component name

        user_id = IdentifierField()
        session_id = IdentifierField()
        agent_id = serializers.CharField(required=False, allow_blank=True, max_length=255)
        messages = MessagesField(child=MessageSerializer(), allow_empty=False)
        extract = serializers.BooleanField(default=True)
        metadata = serializers.DictField(
            required=False,
            help_text="Merged into the episode's metadata; every fact extracted from the episode carries it.",
        )

    class OutputSerializer(serializers.Serializer):
        class Meta:
            ref_name = "EpisodeStoreOutput"  # a unique schema component name

        id = serializers.IntegerField(source="episode.pk")
        session_id = serializers.CharField(source="episode.session_id")
        extraction_status = serializers.CharField(source="episode.extraction_status")
        created = serializers.BooleanField()
        appended = serializers.IntegerField()
        message_count = serializers.IntegerField(source="episode.message_count")

    @extend_schema(
        parameters=[FilterSerializer],
        responses=page_schema(EpisodeListOutputSerializer, "Episode"),
        operation_id="episodes_list",
    )
    def get(self, request):
        filters = self.FilterSerializer(data=request.query_params)
        filters.is_valid(raise_exception=True)
        data = filters.validated_data
        queryset = selectors.episodes_list(
            tenant=request_tenant(request),
            user_id=data["user_id"],
            session_id=data.get("session_id"),
            agent_id=data.get("agent_id"),
            statuses=data.get("status"),
        )
        return paginated_response(request, self, queryset, EpisodeListOutputSerializer)

    @extend_schema(request=InputSerializer, responses={202: OutputSerializer}, operation_id="episodes_store")
    def post(self, request):
        """Store a conversation; facts are extracted from it in the background.

        Post the session so far (after every turn, or once at the end) or only its latest turns: messages already
        stored are skipped, so nothing is duplicated. Two messages are the same when role and content are equal,
        and the timestamps too when both carry one (send timestamps to keep a repeated "ok" apart). A posted list
        that matches the stored session from its first message appends what follows; otherwise the longest run at
        its start that repeats the end of the stored session is skipped and the rest appended. System messages
        take no part in the matching (a system prompt rewritten every turn does not make a new session); one is
        stored when it comes after the point where the posted list joins the stored session.
        `extract: false` keeps this request's messages out of fact extraction (they are still stored, summarised
        and searchable). Answers 202 with the episode id and its extraction status; over a size limit, 413 and
        nothing is stored.
        """
        serializer = self.InputSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        result = services.episode_store(tenant=request_tenant(request), **serializer.validated_data)
        return Response(self.OutputSerializer(result).data, status=status.HTTP_202_ACCEPTED)


class EpisodeDetailApi(ApiView):
    @extend_schema(responses=EpisodeOutputSerializer, operation_id="episodes_get")
    def get(self, request, episode_id: int):
        episode = selectors.episode_get(tenant=request_tenant(request), episode_id=episode_id)
        return Response(EpisodeOutputSerializer(episode).data)


class EpisodeRetryApi(ApiView):
    takes_body = False

    @extend_schema(request=None, responses={202: EpisodeListOutputSerializer}, operation_id="episodes_retry")
    def post(self, request, episode_id: int):
        """Queue the extraction of a failed (or stalled) episode now, without waiting for its next attempt."""
        episode = services.episode_retry(tenant=request_tenant(request), episode_id=episode_id)
        return Response(EpisodeListOutputSerializer(episode).data, status=status.HTTP_202_ACCEPTED)


class ScoredEpisodeOutputSerializer(serializers.Serializer):
    class MatchSerializer(MessageSerializer):
        class Meta:
            ref_name = "EpisodeMessageMatch"  # a unique schema component name

        index = serializers.IntegerField()

    episode = EpisodeListOutputSerializer()
    score = serializers.FloatField()
    scores = serializers.SerializerMethodField()
    matches = MatchSerializer(many=True)

    def get_scores(self, hit) -> dict:
        return {"vector": hit.vector, "keyword": hit.keyword, "final": hit.score}


class EpisodeSearchApi(ApiView):
    reads_only = True  # may be answered from a replica (core.replicas)

    class InputSerializer(BodySerializer):
        class Meta:
            ref_name = "EpisodeSearchInput"  # a unique schema component name

        user_id = IdentifierField()
        query = serializers.CharField(max_length=4000, validators=[validate_visible_text])
        limit = serializers.IntegerField(min_value=1, max_value=100, default=10)
        session_id = IdentifierField(required=False)
        agent_id = serializers.CharField(required=False, max_length=255)

    class OutputSerializer(serializers.Serializer):
        class Meta:
            ref_name = "EpisodeSearchOutput"  # a unique schema component name

        results = ScoredEpisodeOutputSerializer(many=True)
        degraded = serializers.ListField(child=serializers.CharField(), help_text='["embeddings"]: keywords alone')

    @extend_schema(request=InputSerializer, responses=OutputSerializer, operation_id="episodes_search")
    def post(self, request):
        """Search a user's episodes: the summary's vector plus keyword search (BM25) over what was said. While the
        embedding provider fails, the episodes are ranked by keywords alone and `degraded` says `["embeddings"]`."""
        serializer = self.InputSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        tenant, data = request_tenant(request), serializer.validated_data
        vector = query_vector_or_none(data["query"], tenant=tenant, user_id=data["user_id"])
        hits = selectors.episodes_search(tenant=tenant, **data, vector=vector, keyword_only=vector is None)
        degraded = [DEGRADED_EMBEDDINGS] if vector is None else []
        return Response(self.OutputSerializer({"results": hits, "degraded": degraded}).data)
