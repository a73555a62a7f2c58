"""The knowledge-base API: thin views that validate, call one service or selector, and present the result."""

from django.conf import settings
from django.urls import reverse
from drf_spectacular.utils import extend_schema, extend_schema_field
from rest_framework import serializers, status
from rest_framework.parsers import MultiPartParser
from rest_framework.response import Response

from core.api_fields import DegradedField, DocIdField
from core.apis import ApiView, BodySerializer, PageQuerySerializer
from core.errors import ApplicationError
from core.pagination import page_schema, paginated_response
from core.parsers import JSONParser
from core.validation import validate_visible_text
from tenancy.authentication import request_tenant

from . import selectors, services
from .models import Document, KBChunk

POSTABLE_CONTENT_TYPES = ["markdown", "text", "rst", "html", "code"]
# A JSON body escapes what it carries (newlines, quotes, non-ASCII as \uXXXX): the body a text at the limit
# needs can be several times larger. Past this many times the limit, the body is refused unread.
JSON_ESCAPING_ALLOWANCE = 4
MULTIPART_OVERHEAD_BYTES = 64 * 1024  # boundaries and the small form fields beside the file


class DocumentOutputSerializer(serializers.ModelSerializer):
    chunk_count = serializers.IntegerField()
    metadata = serializers.SerializerMethodField()

    class Meta:
        model = Document
        fields = [
            "id", "doc_id", "title", "content_type", "source_path", "size_bytes", "content_hash", "metadata",
            "chunk_count", "status", "error", "created_at", "updated_at",
        ]  # fmt: skip
        extra_kwargs = {
            "status": {
                "help_text": "ready: the chunks are this text's; indexing: a new text waits for the worker (the "
                "chunks, if any, are the previous text's, and stay searchable until it is ready); failed: the worker "
                "gave up on the new text (error says why; POST .../retry queues it again)."
            },
            "error": {"help_text": "Why the last indexing attempt failed; empty when none did."},
        }

    def get_metadata(self, document) -> dict:
        return {key: value for key, value in document.metadata.items() if key != services.CHUNKING_KEY}


class DocumentHitOutputSerializer(serializers.Serializer):
    """A knowledge-base passage (kb.selectors.DocumentHit), in KB search results and in the context."""

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


class ChunkOutputSerializer(serializers.ModelSerializer):
    class Meta:
        model = KBChunk
        fields = ["ordinal", "heading_path", "line_start", "line_end", "token_count", "text"]


class IndexingOutputSerializer(serializers.Serializer):
    """The worker's progress on a document's waiting text."""

    attempts = serializers.IntegerField(help_text="Runs started so far.")
    max_attempts = serializers.SerializerMethodField()
    chunks_total = serializers.IntegerField(help_text="0 until the current run has chunked the text.")
    chunks_embedded = serializers.IntegerField()
    next_attempt_at = serializers.DateTimeField(help_text="When it is queued again if this run does not finish.")

    def get_max_attempts(self, indexing) -> int:
        return settings.KB_INDEX_MAX_ATTEMPTS


class DocumentDetailOutputSerializer(DocumentOutputSerializer):
    chunks = serializers.SerializerMethodField()
    indexing = serializers.SerializerMethodField()

    class Meta(DocumentOutputSerializer.Meta):
        fields = [*DocumentOutputSerializer.Meta.fields, "indexing", "chunks"]

    @extend_schema_field(IndexingOutputSerializer(allow_null=True))
    def get_indexing(self, document) -> dict | None:
        indexing = self.context["indexing"]
        return None if indexing is None else IndexingOutputSerializer(indexing).data

    def get_chunks(self, document) -> list[dict]:
        # The view passes them, read through the tenant-scoped selector, in reading order.
        return ChunkOutputSerializer(self.context["chunks"], many=True).data


class DocumentListCreateApi(ApiView):
    parser_classes = [JSONParser, MultiPartParser]

    class FilterSerializer(PageQuerySerializer):
        path_prefix = serializers.CharField(required=False, max_length=500)

    class TextInputSerializer(BodySerializer):
        doc_id = DocIdField()
        text = serializers.CharField(trim_whitespace=False, validators=[validate_visible_text])
        title = serializers.CharField(required=False, allow_blank=True, max_length=500, default="")
        content_type = serializers.ChoiceField(POSTABLE_CONTENT_TYPES, default="markdown")

    class FileInputSerializer(BodySerializer):
        file = serializers.FileField(allow_empty_file=True)
        doc_id = DocIdField(required=False, help_text="Defaults to the file's name.")
        title = serializers.CharField(required=False, allow_blank=True, max_length=500, default="")

    class OutputSerializer(serializers.Serializer):
        outcome = serializers.ChoiceField(["new", "changed", "unchanged"])
        chunks_written = serializers.IntegerField(help_text="0 when the document was unchanged or is indexing.")
        document = DocumentOutputSerializer()
        poll = serializers.CharField(
            required=False, help_text="With 202: the document's URL, whose status turns ready (or failed)."
        )

    @extend_schema(
        parameters=[FilterSerializer],
        responses=page_schema(DocumentOutputSerializer, "Document"),
        operation_id="kb_documents_list",
    )
    def get(self, request):
        filters = self.FilterSerializer(data=request.query_params)
        filters.is_valid(raise_exception=True)
        documents = selectors.documents_with_chunk_counts(tenant=request_tenant(request), **filters.filter_values)
        return paginated_response(request, self, documents, DocumentOutputSerializer, ordering="doc_id")

    @extend_schema(
        request={"application/json": TextInputSerializer, "multipart/form-data": FileInputSerializer},
        responses={201: OutputSerializer, 200: OutputSerializer, 202: OutputSerializer},
        operation_id="kb_documents_upload",
    )
    def post(self, request):
        """Index a document: JSON {doc_id, text, title, content_type}, or multipart with `file` (type by
        extension) and optional doc_id and title. 201 when new; 200 when it replaced or matched a document.
        A text longer than KB_INLINE_INDEX_MAX_CHARS is checked and stored, then indexed by the worker: 202, the
        document's status indexing, and `poll` (also the Location header) the URL that shows its progress."""
        _refuse_oversized_body(request)
        tenant = request_tenant(request)
        if request.content_type.startswith("multipart/form-data"):
            serializer = self.FileInputSerializer(data=request.data)
            serializer.is_valid(raise_exception=True)
            upload = serializer.validated_data["file"]
            result = services.document_upload(
                tenant=tenant,
                doc_id=serializer.validated_data.get("doc_id") or upload.name,
                data=upload.read(),
                filename=upload.name,
                title=serializer.validated_data["title"],
            )
        else:
            serializer = self.TextInputSerializer(data=request.data)
            serializer.is_valid(raise_exception=True)
            data = serializer.validated_data
            result = services.document_upload(
                tenant=tenant,
                doc_id=data["doc_id"],
                data=data["text"].encode(),
                filename=data["doc_id"],
                content_type=data["content_type"],
                title=data["title"],
            )
        document = selectors.document_with_chunk_count(tenant=tenant, document_id=result.document.pk)
        body = {"outcome": result.outcome, "chunks_written": result.chunks, "document": document}
        if result.queued:
            poll = reverse("kb-document-detail", kwargs={"document_id": document.pk})
            return Response(
                self.OutputSerializer({**body, "poll": poll}).data,
                status=status.HTTP_202_ACCEPTED,
                headers={"Location": poll},
            )
        code = status.HTTP_201_CREATED if result.outcome == "new" else status.HTTP_200_OK
        return Response(self.OutputSerializer(body).data, status=code)


class DocumentDetailApi(ApiView):
    @extend_schema(responses=DocumentDetailOutputSerializer, operation_id="kb_documents_get")
    def get(self, request, document_id: int):
        tenant = request_tenant(request)
        document = selectors.document_with_chunk_count(tenant=tenant, document_id=document_id)
        chunks = selectors.document_chunks(tenant=tenant, document=document).defer("embedding")
        indexing = selectors.document_indexing_progress(tenant=tenant, document=document)
        context = {"chunks": chunks, "indexing": indexing}
        return Response(DocumentDetailOutputSerializer(document, context=context).data)

    @extend_schema(responses={204: None}, operation_id="kb_documents_delete")
    def delete(self, request, document_id: int):
        services.document_delete_by_id(tenant=request_tenant(request), document_id=document_id)
        return Response(status=status.HTTP_204_NO_CONTENT)


class DocumentRetryApi(ApiView):
    @extend_schema(request=None, responses={202: DocumentOutputSerializer}, operation_id="kb_documents_retry")
    def post(self, request, document_id: int):
        """Queue the indexing of a failed (or stalled) document again, with a fresh budget of attempts. 409 when
        the document is ready."""
        tenant = request_tenant(request)
        services.document_index_retry(tenant=tenant, document_id=document_id)
        document = selectors.document_with_chunk_count(tenant=tenant, document_id=document_id)
        return Response(DocumentOutputSerializer(document).data, status=status.HTTP_202_ACCEPTED)


class SearchApi(ApiView):
    reads_only = True  # may be answered from a replica (core.replicas)

    class InputSerializer(BodySerializer):
        query = serializers.CharField(max_length=4000, validators=[validate_visible_text])
        limit = serializers.IntegerField(min_value=1, max_value=50, default=10)
        doc_ids = serializers.ListField(child=DocIdField(), required=False, min_length=1, max_length=1000)
        path_prefix = serializers.CharField(required=False, max_length=500, default="")

    class OutputSerializer(serializers.Serializer):
        results = DocumentHitOutputSerializer(many=True)
        degraded = DegradedField()

    @extend_schema(request=InputSerializer, responses=OutputSerializer, operation_id="kb_search")
    def post(self, request):
        serializer = self.InputSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        found = selectors.kb_search_answer(tenant=request_tenant(request), **serializer.validated_data)
        return Response(self.OutputSerializer(found).data)


def _refuse_oversized_body(request) -> None:
    """Refuse a body that cannot hold an acceptable document before it is parsed (or spooled to disk)."""
    try:
        length = int(request.META.get("CONTENT_LENGTH") or 0)
    except ValueError:
        return
    limit = settings.KB_MAX_UPLOAD_BYTES
    if request.content_type.startswith("multipart/form-data"):
        allowed = limit + MULTIPART_OVERHEAD_BYTES
    else:
        allowed = limit * JSON_ESCAPING_ALLOWANCE + MULTIPART_OVERHEAD_BYTES
    if length > allowed:
        raise ApplicationError(
            f"The request body is {length:,} bytes; documents are limited to {limit:,} bytes.",
            code="payload_too_large",
            status_code=status.HTTP_413_REQUEST_ENTITY_TOO_LARGE,
            details={"size_bytes": length, "max_bytes": limit},
        )
