"""The forgetting API: the tenant's forget policy, dry runs and recorded runs."""

from drf_spectacular.utils import extend_schema
from rest_framework import serializers
from rest_framework.response import Response

from core.api_fields import TimestampField
from core.apis import ApiView, BodySerializer, PageQuerySerializer
from core.pagination import page_schema, paginated_response
from facts.models import Fact
from tenancy.authentication import request_tenant
from tenancy.scopes import ADMIN, MEMORY_READ

from . import selectors, services
from .models import ForgetPolicy, ForgetRun

MAX_DAYS = 36500  # a century: anything longer is a typo, and it keeps date arithmetic in range


class ForgetPolicyOutputSerializer(serializers.ModelSerializer):
    is_default = serializers.SerializerMethodField(help_text="True while the tenant follows the FORGET_* settings.")
    updated_at = serializers.DateTimeField(read_only=True, allow_null=True, help_text="null while it is the default.")

    class Meta:
        model = ForgetPolicy
        fields = [
            "enabled", "max_unused_days", "min_usage_count", "max_facts_per_user", "archive_retention_days",
            "exempt_categories", "is_default", "updated_at",
        ]  # fmt: skip

    def get_is_default(self, policy) -> bool:
        return policy.pk is None


class ForgetRunOutputSerializer(serializers.ModelSerializer):
    class Meta:
        model = ForgetRun
        fields = [
            "id", "dry_run", "status", "as_of", "started_at", "duration_ms", "archived", "evicted", "purged",
            "superseded_purged", "timings", "policy", "error",
        ]  # fmt: skip


class ForgetPolicyApi(ApiView):
    required_scope = {"PUT": ADMIN, "PATCH": ADMIN, "DELETE": ADMIN}

    class InputSerializer(BodySerializer):
        enabled = serializers.BooleanField()
        max_unused_days = serializers.IntegerField(
            min_value=1, max_value=MAX_DAYS, allow_null=True, help_text="null switches the unused rule off."
        )
        min_usage_count = serializers.IntegerField(min_value=0, max_value=1_000_000)
        max_facts_per_user = serializers.IntegerField(
            min_value=1, max_value=100_000_000, allow_null=True, help_text="null: no cap."
        )
        archive_retention_days = serializers.IntegerField(min_value=0, max_value=MAX_DAYS)
        exempt_categories = serializers.ListField(child=serializers.ChoiceField(Fact.Category.values), allow_empty=True)

        class Meta:
            ref_name = "ForgetPolicyInput"  # a unique schema component name ("Input" is taken by many views)

    @extend_schema(responses=ForgetPolicyOutputSerializer, operation_id="forget_policy_get")
    def get(self, request):
        policy = selectors.forget_policy_get(tenant=request_tenant(request))
        return Response(ForgetPolicyOutputSerializer(policy).data)

    @extend_schema(request=InputSerializer, responses=ForgetPolicyOutputSerializer, operation_id="forget_policy_put")
    def put(self, request):
        return self._save(request, partial=False)

    @extend_schema(
        request=InputSerializer(partial=True),
        responses=ForgetPolicyOutputSerializer,
        operation_id="forget_policy_patch",
    )
    def patch(self, request):
        return self._save(request, partial=True)

    @extend_schema(request=None, responses={200: ForgetPolicyOutputSerializer}, operation_id="forget_policy_reset")
    def delete(self, request):
        """Back to the defaults from settings."""
        policy = services.forget_policy_reset(tenant=request_tenant(request))
        return Response(ForgetPolicyOutputSerializer(policy).data)

    def _save(self, request, *, partial: bool):
        serializer = self.InputSerializer(data=request.data, partial=partial)
        serializer.is_valid(raise_exception=True)
        policy = services.forget_policy_set(tenant=request_tenant(request), **serializer.validated_data)
        return Response(ForgetPolicyOutputSerializer(policy).data)


class ForgetDryRunApi(ApiView):
    required_scope = MEMORY_READ  # a POST that only measures

    class InputSerializer(BodySerializer):
        as_of = TimestampField(
            required=False, help_text="Measure the rules at this moment (default: now), e.g. to preview next month."
        )

        class Meta:
            ref_name = "ForgetDryRunInput"

    @extend_schema(request=InputSerializer, responses={201: ForgetRunOutputSerializer}, operation_id="forget_dry_run")
    def post(self, request):
        serializer = self.InputSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        tenant = request_tenant(request)
        report = services.forget_policy_apply(tenant=tenant, now=serializer.validated_data.get("as_of"), dry_run=True)
        run = selectors.forget_run_get(tenant=tenant, run_id=report.run_id)
        return Response(ForgetRunOutputSerializer(run).data, status=201)


class ForgetRunListApi(ApiView):
    class FilterSerializer(PageQuerySerializer):
        dry_run = serializers.BooleanField(required=False, allow_null=True, default=None)

    @extend_schema(
        parameters=[FilterSerializer],
        responses=page_schema(ForgetRunOutputSerializer, "ForgetRun"),
        operation_id="forget_runs_list",
    )
    def get(self, request):
        filters = self.FilterSerializer(data=request.query_params)
        filters.is_valid(raise_exception=True)
        runs = selectors.forget_runs_list(tenant=request_tenant(request), **filters.filter_values)
        return paginated_response(request, self, runs, ForgetRunOutputSerializer)


class ForgetRunDetailApi(ApiView):
    @extend_schema(responses=ForgetRunOutputSerializer, operation_id="forget_runs_get")
    def get(self, request, run_id: int):
        run = selectors.forget_run_get(tenant=request_tenant(request), run_id=run_id)
        return Response(ForgetRunOutputSerializer(run).data)
