"""Schemathesis against a live server: every operation of /api/schema/, inputs that fit the schema and inputs that
do not, a fixed seed and a bounded number of examples. No answer may be a 500, and every answer must match what
the schema documents (status, content type, body). bench/fuzz_api.py runs the same with many more examples."""

import json
import os

import hypothesis
import pytest
import requests
import schemathesis
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from facts.models import Fact, FactConflict
from memoryproject.services import worker_heartbeat_record
from tests.factories import make_fact, make_tenant

# bench/fuzz_api.py raises the examples and changes the seed through these.
SEED = int(os.environ.get("SCHEMATHESIS_SEED", "20261201"))
EXAMPLES_PER_OPERATION = int(os.environ.get("SCHEMATHESIS_EXAMPLES", "25"))
CHECKS = [not_a_server_error, status_code_conformance, content_type_conformance, response_schema_conformance]


@schemathesis.serializer("application/x-ndjson", "application/jsonl")
def json_lines(ctx, value) -> dict:
    """The import's JSON Lines bodies (a text in the schema) as they are sent; anything else one JSON value a line."""
    if isinstance(value, str):
        return {"data": value.encode("utf-8", "surrogatepass")}
    items = value if isinstance(value, list) else [value]
    return {"data": "\n".join(json.dumps(item) for item in items).encode("utf-8", "surrogatepass")}


@pytest.fixture
def tenant_key(transactional_db):
    """A tenant with something to find: facts (one pending, in conflict), so generated ids now and then exist."""
    tenant, key = make_tenant("fuzz")
    old = make_fact(tenant=tenant, user_id="alice", content="Lives in Lisbon")
    new = make_fact(tenant=tenant, user_id="alice", content="Lives in Porto", status=Fact.Status.PENDING)
    FactConflict.objects.create(tenant=tenant, user_id="alice", existing_fact=old, new_fact=new, reason="city")
    worker_heartbeat_record()  # a worker is alive: /api/health/ready answers 200, not a 5xx
    return key


def generated_schema() -> dict:
    """The schema /api/schema/ serves (the same generator), built at collection so each operation is a test."""
    from drf_spectacular.generators import SchemaGenerator

    return SchemaGenerator().get_schema(request=None, public=True)


schema = schemathesis.openapi.from_dict(json.loads(json.dumps(generated_schema(), default=str)))
schema.config.generation.update(modes=["positive", "negative"], max_examples=EXAMPLES_PER_OPERATION, deterministic=True)
schema.config.seed = SEED


@schema.parametrize()
@hypothesis.settings(suppress_health_check=[hypothesis.HealthCheck.function_scoped_fixture], deadline=None)
def test_the_api_matches_its_schema_and_never_fails(case, live_server, tenant_key):
    case.call_and_validate(base_url=live_server.url, headers={"Authorization": f"Bearer {tenant_key}"}, checks=CHECKS)


def test_the_served_schema_is_the_one_tested(live_server, transactional_db):
    served = requests.get(f"{live_server.url}/api/schema/?format=json", timeout=30).json()

    assert served["paths"] == json.loads(json.dumps(generated_schema(), default=str))["paths"]
