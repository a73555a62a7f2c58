from drf_spectacular.utils import extend_schema
from rest_framework import serializers, status
from rest_framework.response import Response

from core.apis import ApiView, BodySerializer, PageQuerySerializer
from core.pagination import page_schema, paginated_response

from .authentication import request_tenant
from .scopes import ADMIN, ALL_SCOPES, ANY_KEY, DEFAULT_SCOPES
from .selectors import api_key_get, api_keys_list
from .services import api_key_create, api_key_revoke, api_key_scopes_set


class WhoAmIApi(ApiView):
    """Which tenant and key the request authenticated as: the quickest check that a key works."""

    required_scope = ANY_KEY

    class OutputSerializer(serializers.Serializer):
        tenant = serializers.CharField(source="tenant.name")
        key_prefix = serializers.CharField(source="api_key.prefix")
        key_name = serializers.CharField(source="api_key.name")
        scopes = serializers.ListField(child=serializers.CharField(), source="api_key.scopes")

    @extend_schema(responses=OutputSerializer, operation_id="whoami")
    def get(self, request):
        return Response(self.OutputSerializer(request.user).data)


class ApiKeyOutputSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    name = serializers.CharField()
    prefix = serializers.CharField(help_text="The key's first characters, to tell keys apart.")
    scopes = serializers.ListField(child=serializers.ChoiceField(ALL_SCOPES))
    created_at = serializers.DateTimeField()
    revoked_at = serializers.DateTimeField(allow_null=True)

    class Meta:
        ref_name = "ApiKey"


class ScopesField(serializers.ListField):
    def __init__(self, **kwargs):
        super().__init__(child=serializers.ChoiceField(ALL_SCOPES), max_length=len(ALL_SCOPES), **kwargs)


class ApiKeyListCreateApi(ApiView):
    """The tenant's API keys (needs the admin scope): list them, or issue one (its clear key is answered once)."""

    required_scope = ADMIN

    class FilterSerializer(PageQuerySerializer):
        pass

    class InputSerializer(BodySerializer):
        name = serializers.CharField(max_length=100, required=False, default="", allow_blank=True)
        scopes = ScopesField(required=False, help_text=f"Default: {', '.join(DEFAULT_SCOPES)}.")

        class Meta:
            ref_name = "ApiKeyInput"

    class IssuedSerializer(ApiKeyOutputSerializer):
        key = serializers.CharField(help_text="The clear key: shown this once, never stored.")

        class Meta:
            ref_name = "IssuedApiKey"

    @extend_schema(parameters=[FilterSerializer], responses=page_schema(ApiKeyOutputSerializer, "ApiKey"),
                   operation_id="api_keys_list")  # fmt: skip
    def get(self, request):
        filters = self.FilterSerializer(data=request.query_params)
        filters.is_valid(raise_exception=True)
        keys = api_keys_list(tenant=request_tenant(request))
        return paginated_response(request, self, keys, ApiKeyOutputSerializer)

    @extend_schema(request=InputSerializer, responses={201: IssuedSerializer}, operation_id="api_keys_create")
    def post(self, request):
        serializer = self.InputSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        data = serializer.validated_data
        issued = api_key_create(tenant=request_tenant(request), name=data["name"], scopes=data.get("scopes"))
        body = ApiKeyOutputSerializer(issued.api_key).data | {"key": issued.key}
        return Response(body, status=status.HTTP_201_CREATED)


class ApiKeyDetailApi(ApiView):
    """One key of the tenant (needs the admin scope): change its scopes, or revoke it (DELETE: kept, as revoked)."""

    required_scope = ADMIN

    class UpdateSerializer(BodySerializer):
        scopes = ScopesField(allow_empty=False)

        class Meta:
            ref_name = "ApiKeyUpdate"

    @extend_schema(request=UpdateSerializer, responses=ApiKeyOutputSerializer, operation_id="api_keys_update")
    def patch(self, request, key_id: int):
        serializer = self.UpdateSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        api_key = api_key_get(tenant=request_tenant(request), key_id=key_id)
        api_key = api_key_scopes_set(api_key=api_key, scopes=serializer.validated_data["scopes"])
        return Response(ApiKeyOutputSerializer(api_key).data)

    @extend_schema(request=None, responses=ApiKeyOutputSerializer, operation_id="api_keys_revoke")
    def delete(self, request, key_id: int):
        api_key = api_key_revoke(api_key=api_key_get(tenant=request_tenant(request), key_id=key_id))
        return Response(ApiKeyOutputSerializer(api_key).data)
