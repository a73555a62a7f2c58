"""The tools API: the agent tools' definitions for a model, and one tool call run for it (agents.tools)."""

from drf_spectacular.utils import extend_schema, extend_schema_field
from rest_framework import serializers
from rest_framework.negotiation import DefaultContentNegotiation
from rest_framework.response import Response

from core.api_fields import IdentifierField
from core.apis import ApiView, BodySerializer, QuerySerializer
from tenancy.authentication import request_actor, request_tenant
from tenancy.scopes import MEMORY_READ

from .tools import FORMATS, MAX_AGENT_ID_CHARS, tool_call, tool_definitions


class _NoFormatOverride:
    URL_FORMAT_OVERRIDE = None


class ToolsContentNegotiation(DefaultContentNegotiation):
    """Here `?format=` names the tools' format (openai, anthropic), not a renderer as DRF reads it by default."""

    settings = _NoFormatOverride()


class ToolListApi(ApiView):
    content_negotiation_class = ToolsContentNegotiation

    class FilterSerializer(QuerySerializer):
        format = serializers.ChoiceField(
            FORMATS,
            default="openai",
            help_text="openai: [{type: function, function: {name, description, parameters}}] (function calling); "
            "anthropic: [{name, description, input_schema}] (tool use).",
        )

    class OutputSerializer(serializers.Serializer):
        tools = serializers.ListField(child=serializers.DictField(), help_text="Pass as `tools` to the model.")

    @extend_schema(parameters=[FilterSerializer], responses=OutputSerializer, operation_id="tools_list")
    def get(self, request):
        """The memory and knowledge-base tools, with JSON Schema arguments and descriptions that tell the model
        when to call each. Run a call the model makes with POST /api/v1/tools/call."""
        filters = self.FilterSerializer(data=request.query_params)
        filters.is_valid(raise_exception=True)
        return Response({"tools": tool_definitions(filters.validated_data["format"])})


@extend_schema_field(
    {
        "oneOf": [{"type": "object", "additionalProperties": True}, {"type": "string"}],
        "description": "The tool's arguments: an object, or the JSON text of one (as OpenAI hands them over).",
    }
)
class ArgumentsField(serializers.Field):
    default_error_messages = {"invalid": "Must be an object or a JSON string."}

    def to_internal_value(self, data):
        if not isinstance(data, dict | str):
            self.fail("invalid")
        return data


class ToolCallApi(ApiView):
    required_scope = MEMORY_READ  # each tool that writes also needs memory:write (agents.tools)

    class InputSerializer(BodySerializer):
        user_id = IdentifierField(help_text="The end user whose memory the tool works on.")
        name = serializers.CharField(max_length=100, help_text="The tool's name, as the model called it.")
        arguments = ArgumentsField(required=False, default=dict)
        agent_id = serializers.CharField(
            required=False,
            allow_blank=True,
            default="",
            max_length=MAX_AGENT_ID_CHARS,
            help_text="Narrows the tools to this agent's facts of the user; new facts carry it.",
        )

    class OutputSerializer(serializers.Serializer):
        content = serializers.CharField(help_text="Text for the model: hand it back as the tool's result.")
        data = serializers.JSONField(allow_null=True, help_text="The structured result (null for an error).")
        is_error = serializers.BooleanField(
            help_text="The call was wrong (unknown tool, bad arguments, a fact not found...): `content` says how."
        )

    @extend_schema(request=InputSerializer, responses=OutputSerializer, operation_id="tools_call")
    def post(self, request):
        """Run one tool call. A wrong call is still a 200, with is_error and a content that says what was wrong,
        for the agent loop to show the model."""
        serializer = self.InputSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        result = tool_call(
            tenant=request_tenant(request),
            actor=request_actor(request),
            scopes=request.user.api_key.scopes,
            **serializer.validated_data,
        )
        return Response({"content": result.content, "data": result.data, "is_error": result.is_error})
