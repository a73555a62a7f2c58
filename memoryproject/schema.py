"""OpenAPI schema generation (drf-spectacular): component names, the error answers of every operation, and an
example request for each."""

from drf_spectacular import openapi

from .schema_examples import REQUEST_EXAMPLES


class AutoSchema(openapi.AutoSchema):
    """Components are named after their view: each view nests its own InputSerializer / OutputSerializer, and by
    class name alone they would collide (one "Input" component for every endpoint, a wrong schema)."""

    def get_serializer_name(self, serializer, direction) -> str:
        outer, _, name = type(serializer).__qualname__.rpartition(".")
        return outer.removesuffix("Api").replace(".", "") + name


ERROR_SCHEMA = {
    "type": "object",
    "required": ["error"],
    "properties": {
        "error": {
            "type": "object",
            "required": ["code", "message", "details"],
            "properties": {
                "code": {"type": "string", "example": "validation_error"},
                "message": {"type": "string", "example": "content: Must contain visible characters."},
                "details": {"type": "object", "additionalProperties": True},
            },
        }
    },
}
ERROR_DESCRIPTIONS = {
    "400": "Invalid input: the message and `details` name the field (or query parameter).",
    "401": "No API key, or a wrong one.",
    "404": "No such object in this tenant (another tenant's objects are not found either).",
    "409": "The object is not in a state that allows this (the message says why).",
    "413": "The body is over a documented limit (API_MAX_BODY_BYTES, or the operation's own).",
    "415": "The body is not JSON (or multipart, where the operation takes a file).",
    "429": "Too many requests for this key (or failed authentications from this address); see Retry-After.",
    "500": "The server failed; the error is logged, nothing is shown.",
    "503": "The embedding or chat model endpoint is unavailable.",
}
# Operations that can find the object they act on in the wrong state.
CONFLICTING_OPERATIONS = {
    "facts_approve", "facts_reject", "facts_restore", "facts_undo_supersession", "conflicts_resolve",
    "episodes_retry",
}  # fmt: skip
# Operations that call the embedding (or chat) model on the request.
MODEL_OPERATIONS = {
    "facts_remember", "facts_update", "facts_import", "facts_search", "facts_approve", "conflicts_resolve",
    "context_build", "episodes_search", "kb_documents_upload", "kb_search",
}  # fmt: skip


# Probes outside /api/v1 whose documented error answers are in the error shape (the view gives the description).
PROBE_ERROR_STATUSES = {"health_ready": ["503"]}


def error_responses_hook(result, generator, request, public):
    """Every status an operation can answer, in the API's one error shape (core.api_errors)."""
    result["components"]["schemas"]["Error"] = ERROR_SCHEMA
    error_content = {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}}
    for path, operations in result["paths"].items():
        for operation in operations.values():
            for status in PROBE_ERROR_STATUSES.get(operation["operationId"], []):
                operation["responses"][status]["content"] = error_content
        if not path.startswith("/api/v1/"):
            continue
        for operation in operations.values():
            responses = operation["responses"]
            for status in _error_statuses(operation):
                responses.setdefault(
                    status,
                    {
                        "description": ERROR_DESCRIPTIONS[status],
                        "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}},
                    },
                )
            operation["responses"] = dict(sorted(responses.items()))
    return result


def _error_statuses(operation) -> list[str]:
    statuses = ["400", "401", "429", "500"]  # every operation refuses unknown query parameters: 400
    if any(parameter["in"] == "path" for parameter in operation.get("parameters", [])):
        statuses.append("404")
    if "requestBody" in operation:
        statuses += ["413", "415"]
    if operation["operationId"] in CONFLICTING_OPERATIONS:
        statuses.append("409")
    if operation["operationId"] in MODEL_OPERATIONS:
        statuses.append("503")
    return statuses


def request_examples_hook(result, generator, request, public):
    """The example request of each operation (schema_examples.py), on its JSON body or its parameters."""
    for operations in result["paths"].values():
        for operation in operations.values():
            example = REQUEST_EXAMPLES.get(operation["operationId"])
            if example is None:
                continue
            body = operation.get("requestBody", {}).get("content", {}).get("application/json")
            if body is not None and "body" in example:
                body["example"] = example["body"]
            for parameter in operation.get("parameters", []):
                if parameter["name"] in example.get("parameters", {}):
                    parameter["example"] = example["parameters"][parameter["name"]]
    return result


def fact_category_values() -> list[str]:
    """The fact categories as the API's inputs list them (values without labels), for ENUM_NAME_OVERRIDES."""
    from facts.models import Fact

    return Fact.Category.values
