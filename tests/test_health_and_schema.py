import pytest
from rest_framework.test import APIClient

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
