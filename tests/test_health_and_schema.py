import jsonschema
import pytest
import referencing
from referencing.jsonschema import DRAFT4
from rest_framework.test import APIClient

from core.validation import IDENTIFIER_PATTERN
from memoryproject.schema_examples import REQUEST_EXAMPLES

pytestmark = pytest.mark.django_db


def test_health_reports_database_pgvector_and_embedder():
    response = APIClient().get("/api/health")

    assert response.status_code == 200
    body = response.json()
    assert body["status"] == "ok"
    assert body["database"]["reachable"] is True
    assert body["database"]["pgvector_version"].startswith("0.8")
    assert body["embedding"]["provider"] == "hash"
    assert body["embedding"]["model"] == "hash-v2"
    assert body["embedding"]["dimensions"] == 384
    assert body["embedding"]["problems"] == []
    assert "cache" not in body["embedding"]  # per tenant, at /api/v1/embedding-cache


def test_health_is_503_and_says_why_when_the_embedder_is_misconfigured(settings):
    settings.EMBEDDING_PROVIDER = "word2vec"

    response = APIClient().get("/api/health")

    assert response.status_code == 503
    assert response.json()["embedding"]["problems"] == [
        "Unknown EMBEDDING_PROVIDER 'word2vec': use local, openai or hash."
    ]


def test_openapi_schema_builds_and_lists_the_api():
    response = APIClient().get("/api/schema/", HTTP_ACCEPT="application/vnd.oai.openapi+json")

    assert response.status_code == 200
    schema = response.json()
    assert schema["info"]["title"] == "memoryproject API"
    assert "/api/v1/whoami" in schema["paths"]
    assert "/api/v1/facts/{fact_id}" in schema["paths"]
    assert schema["components"]["securitySchemes"]["ApiKey"]["scheme"] == "bearer"


def test_each_endpoint_documents_its_own_request_body():
    schema = APIClient().get("/api/schema/", HTTP_ACCEPT="application/vnd.oai.openapi+json").json()

    def request_fields(path: str) -> set[str]:
        reference = schema["paths"][path]["post"]["requestBody"]["content"]["application/json"]["schema"]["$ref"]
        return set(schema["components"]["schemas"][reference.rsplit("/", 1)[1]]["properties"])

    # Every view nests a class named InputSerializer: by class name alone they shared one component.
    assert {"user_id", "query", "max_tokens"} <= request_fields("/api/v1/context")
    assert {"user_id", "query", "as_of"} <= request_fields("/api/v1/facts/search")
    assert request_fields("/api/v1/conflicts/{conflict_id}/resolve") == {"resolution", "content"}
    assert "Input" not in schema["components"]["schemas"]


def test_docs_page_uses_bundled_assets_only():
    response = APIClient().get("/api/docs/")

    assert response.status_code == 200
    page = response.content.decode()
    assert "/static/drf_spectacular_sidecar/swagger-ui-dist/" in page
    assert "cdn." not in page
    assert "unpkg" not in page


def served_schema() -> dict:
    return APIClient().get("/api/schema/", HTTP_ACCEPT="application/vnd.oai.openapi+json").json()


def test_every_operation_documents_the_errors_it_can_answer():
    schema = served_schema()

    for path, operations in schema["paths"].items():
        if not path.startswith("/api/v1/"):
            continue
        for operation in operations.values():
            statuses = set(operation["responses"])
            assert {"400", "401", "429", "500"} <= statuses, operation["operationId"]
            if "{" in path:
                assert "404" in statuses, operation["operationId"]
            if "requestBody" in operation:
                assert {"413", "415"} <= statuses, operation["operationId"]
            error = operation["responses"]["401"]["content"]["application/json"]["schema"]
            assert error == {"$ref": "#/components/schemas/Error"}
    assert "409" in schema["paths"]["/api/v1/facts/{fact_id}/approve"]["post"]["responses"]
    assert "503" in schema["paths"]["/api/v1/context"]["post"]["responses"]


def test_lists_are_documented_as_pages_with_their_parameters():
    schema = served_schema()

    for path in [
        "/api/v1/facts",
        "/api/v1/conflicts",
        "/api/v1/episodes",
        "/api/v1/forget-runs",
        "/api/v1/kb/documents",
    ]:
        operation = schema["paths"][path]["get"]
        reference = operation["responses"]["200"]["content"]["application/json"]["schema"]["$ref"]
        page = schema["components"]["schemas"][reference.rsplit("/", 1)[1]]
        assert set(page["properties"]) == {"next", "previous", "results"}, path
        assert page["properties"]["next"]["nullable"] is True
        assert {"limit", "cursor"} <= {parameter["name"] for parameter in operation["parameters"]}, path


def test_every_operation_has_an_example_request_that_fits_its_schema():
    schema = served_schema()
    registry = referencing.Registry().with_resource("urn:api", referencing.Resource.from_contents(schema, DRAFT4))
    operations = {
        operation["operationId"]: operation
        for operations in schema["paths"].values()
        for operation in operations.values()
    }

    assert set(operations) == set(REQUEST_EXAMPLES)
    for operation_id, operation in operations.items():
        body = operation.get("requestBody", {}).get("content", {}).get("application/json")
        if body is not None:
            assert "example" in body, operation_id
            validator = jsonschema.Draft4Validator({"$ref": "urn:api" + body["schema"]["$ref"]}, registry=registry)
            assert list(validator.iter_errors(body["example"])) == [], operation_id
        for parameter in operation.get("parameters", []):
            if parameter.get("required"):
                assert "example" in parameter, (operation_id, parameter["name"])


def test_the_user_id_pattern_is_in_the_schema():
    schema = served_schema()
    parameter = schema["paths"]["/api/v1/users/{user_id}"]["delete"]["parameters"][0]

    assert parameter["schema"]["pattern"] == IDENTIFIER_PATTERN.pattern
    listed = {parameter["name"]: parameter for parameter in schema["paths"]["/api/v1/facts"]["get"]["parameters"]}
    assert listed["user_id"]["schema"]["pattern"] == "^[^\\s\\u0000-\\u001f]{1,255}$"
