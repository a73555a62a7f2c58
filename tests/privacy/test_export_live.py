"""Export and import over real HTTP (the live server streams the export from its own thread and connection)."""

import json

import pytest
import requests

from facts.models import Fact
from privacy.services import user_erase
from tests.factories import make_tenant
from tests.privacy.memories import build_memories

pytestmark = pytest.mark.django_db(transaction=True)


def test_an_export_streamed_over_http_imports_back_over_http(live_server):
    tenant, key = make_tenant("acme-live")
    build_memories(tenant)
    before = sorted(Fact.objects.filter(tenant=tenant, user_id="alice").values_list("content", "status"))
    headers = {"Authorization": f"Bearer {key}"}

    with requests.get(f"{live_server.url}/api/v1/users/alice/export", headers=headers, stream=True, timeout=30) as got:
        assert got.status_code == 200
        assert got.headers["Content-Type"] == "application/x-ndjson"
        lines = list(got.iter_lines())
    assert json.loads(lines[0])["type"] == "header"
    user_erase(tenant=tenant, user_id="alice", actor="test")
    posted = requests.post(
        f"{live_server.url}/api/v1/users/alice/import",
        data=b"\n".join(lines) + b"\n",
        headers=headers | {"Content-Type": "application/x-ndjson"},
        timeout=30,
    )

    assert posted.status_code == 200, posted.text
    assert posted.json()["facts"]["created"] == len(before)
    assert sorted(Fact.objects.filter(tenant=tenant, user_id="alice").values_list("content", "status")) == before
