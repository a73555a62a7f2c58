"""A staff member of tenant B only, holding every permission on the project's apps, against every admin URL,
generated from the URL resolver: change, delete and history views of each of A's objects, every changelist action
on A's ids, the add forms aimed at A, the review console's pages and decisions on A's facts and conflicts. Each
answers 404, 403 or a redirect that changes nothing; no page shows A's data; A's rows stay as they were."""

import re
import uuid

import pytest
from django.contrib import admin
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.contrib.contenttypes.models import ContentType
from django.db import models
from django.forms.models import model_to_dict
from django.test import Client, RequestFactory
from django.urls import URLPattern, URLResolver, get_resolver
from django.urls.resolvers import RegexPattern
from django.utils import timezone
from django_q.models import OrmQ, Schedule, Task

from facts.models import FactConflict
from tenancy.services import tenant_membership_add
from tests.factories import make_fact, make_tenant
from tests.tenancy.cross_tenant import (
    USER_ID,
    assert_no_secret,
    give_every_permission,
    rows_of,
    tenant_a_with_everything,
)

pytestmark = pytest.mark.django_db

ADMIN_PREFIX = "admin/"
PARAMETER = re.compile(r"<(?:(?P<converter>\w+):)?(?P<name>\w+)>")
# Parameters naming one object: what the route shows or changes must be refused.
OBJECT_PARAMETERS = {"object_id", "id", "fact_id", "conflict_id"}
DECISIONS = ["approve", "reject", "edit_approve"]


def admin_routes() -> list[tuple[str, object, object]]:
    """(route, URL pattern, its ModelAdmin or None) of every URL of the admin site, walked from the resolver."""
    found = []

    def walk(patterns, prefix: str, model_admin) -> None:
        for entry in patterns:
            route = prefix + str(entry.pattern)
            if isinstance(entry, URLResolver):
                owner = next(
                    (
                        ma
                        for ma in admin.site._registry.values()
                        if route == f"{ADMIN_PREFIX}{ma.opts.app_label}/{ma.opts.model_name}/"
                    ),
                    None,
                )
                walk(entry.url_patterns, route, owner or model_admin)
            elif isinstance(entry, URLPattern) and route.startswith(ADMIN_PREFIX):
                found.append((route, entry, getattr(entry.callback, "model_admin", None) or model_admin))

    walk(get_resolver().url_patterns, "", None)
    return found


def objects_of(a, model) -> list:
    """A's rows of `model` (or, for a model no tenant owns, the rows made for this test)."""
    if model is get_user_model():
        return [a.staff]
    field = next(
        (f.name for f in model._meta.concrete_fields if f.is_relation and f.related_model is type(a.tenant)), None
    )
    if model is type(a.tenant):
        return [a.tenant]
    if field is None:
        return list(model._default_manager.all()[:1])
    return list(model._default_manager.filter(**{field: a.tenant}).order_by("pk")[:3])


def posted_form(obj) -> dict:
    """A change form's data for `obj` with every text rewritten by B, pointing at A's tenant."""
    data = {}
    for name, value in model_to_dict(obj).items():
        model_field = obj._meta.get_field(name)
        if isinstance(model_field, models.CharField | models.TextField) and not model_field.choices:
            value = f"rewritten by B {uuid.uuid4().hex[:6]}"
        if value is None or isinstance(value, dict | list) and not value:
            continue
        data[name] = value
    return data


def calls(a, b_staff) -> list[dict]:
    generated = []
    for route, pattern, model_admin in admin_routes():
        name = pattern.name
        if isinstance(pattern.pattern, RegexPattern):
            if name == "app_list":
                labels = re.search(r"\(\?P<app_label>([^)]*)\)", route)[1].split("|")
                paths = [f"/admin/{label}/" for label in labels]
            else:  # the catch-all: any other path under /admin/
                paths = ["/admin/no-such-page/"]
            generated += [
                {"route": route, "name": name, "path": path, "method": "GET", "data": None, "objects": False}
                for path in paths
            ]
            continue
        parameters = [match["name"] for match in PARAMETER.finditer(route)]
        fillings = _fillings(a, route, parameters, model_admin)
        for filling in fillings:
            path = "/" + PARAMETER.sub(lambda match, filling=filling: str(filling[match["name"]][0]), route)
            objects = bool(OBJECT_PARAMETERS & set(parameters))
            for method, data in _requests(a, b_staff, name, model_admin, filling):
                generated.append(
                    {"route": route, "name": name, "path": path, "method": method, "data": data, "objects": objects}
                )
    return generated


def _fillings(a, route, parameters, model_admin) -> list[dict]:
    if not parameters:
        return [{}]
    if parameters == ["object_id"] and model_admin is not None:
        rows = objects_of(a, model_admin.model)
        assert rows, f"/{route}: no row of {model_admin.model._meta.label} to fill <object_id> with"
        return [{"object_id": (row.pk, row)} for row in rows]
    if parameters == ["id"] and model_admin is not None:  # the user admin's password form
        return [{"id": (row.pk, row)} for row in objects_of(a, model_admin.model)]
    if parameters == ["content_type_id", "object_id"]:  # "view on site"
        return [
            {"content_type_id": (ContentType.objects.get_for_model(row).pk, None), "object_id": (row.pk, row)}
            for objects in a.objects.values()
            for row in objects
            if hasattr(row, "pk")
        ]
    if parameters in (["fact_id"], ["conflict_id"]):
        return [{parameters[0]: (row.pk, row)} for row in a.objects[parameters[0]]]
    pytest.fail(f"/{route}: no filler for {parameters}: add one to _fillings()")


def _requests(a, b_staff, name, model_admin, filling) -> list[tuple[str, dict | None]]:
    """(method, POST data) pairs: a GET, and the POSTs that would change something were the tenant not checked."""
    row = filling.get("object_id", filling.get("id", filling.get("fact_id", (None, None))))[1]
    model_name = f"{model_admin.opts.app_label}_{model_admin.opts.model_name}" if model_admin else None
    if name == f"{model_name}_changelist":
        ids = [obj.pk for obj in objects_of(a, model_admin.model)]
        # Every action the admin declares, whether or not it offers it to B (a hidden one must be refused too).
        declared = {getattr(action, "__name__", action) for action in model_admin.actions or []}
        actions = declared | set(model_admin.get_actions(_request(b_staff))) | {"delete_selected"}
        return [("GET", None), ("GET", {"q": "", "tenant": a.tenant.pk})] + [
            ("POST", {"action": action, "_selected_action": ids, "post": "yes", "index": "0"})
            for action in sorted(actions)
        ]
    if name == f"{model_name}_add":
        examples = objects_of(a, model_admin.model)
        data = {**posted_form(examples[0]), "tenant": a.tenant.pk} if examples else {}
        return [("GET", None), ("POST", data)]
    if name == f"{model_name}_change":
        return [("GET", None), ("POST", {**posted_form(row), "_save": "Save"})]
    if name == f"{model_name}_delete":
        return [("GET", None), ("POST", {"post": "yes"})]
    if name == "auth_user_password_change":
        return [("GET", None), ("POST", {"password1": "taken-by-B-1234", "password2": "taken-by-B-1234"})]
    if name == "review-decide":
        fact_ids = [fact.pk for fact in a.objects["fact_id"]]
        return [("POST", {"decision": d, "fact": fact_ids, "content": "edited by B"}) for d in DECISIONS]
    if name == "review-resolve":
        return [("GET", None)] + [
            ("POST", {"resolution": r, "content": "merged by B"}) for r in FactConflict.Resolution.values
        ]
    if name in ("review-queue", "review-conflicts"):
        return [("GET", {"tenant": a.tenant.pk, "user": USER_ID}), ("GET", None)]
    if name == "review-fact":
        return [("GET", {"q": "PostgreSQL"})]
    if name == "autocomplete":
        return [("GET", None)] + [
            ("GET", {"app_label": ma.model._meta.app_label, "model_name": ma.model._meta.model_name, "field_name": f})
            for ma in admin.site._registry.values()
            for f in ma.autocomplete_fields
        ]
    if name == "login":
        return [("GET", None), ("POST", {"username": b_staff.username, "password": "pw"})]
    return [("GET", None), ("POST", {})]


def _request(user):
    request = RequestFactory().get("/admin/")
    request.user = user
    return request


@pytest.fixture
def a():
    a = tenant_a_with_everything()
    # Rows of the admin's framework models, for their pages to have something to refuse.
    Group.objects.create(name="reviewers")
    Schedule.objects.create(name="nightly", func="forgetting.tasks.forget_sweep")
    OrmQ.objects.create(key="memoryproject", payload="x", lock=timezone.now())
    for success in (True, False):
        Task.objects.create(
            id=uuid.uuid4().hex, name=f"task-{success}", func="x.y", started=timezone.now(),
            stopped=timezone.now(), success=success,
        )  # fmt: skip
    return a


@pytest.fixture
def b_staff():
    tenant, _ = make_tenant("globex")
    make_fact(tenant=tenant, user_id=USER_ID, content="Prefers MySQL")
    user = get_user_model().objects.create_user("globex-staff", password="pw", is_staff=True)
    give_every_permission(user)
    tenant_membership_add(tenant=tenant, user=user)
    return user


def test_every_admin_url_refuses_tenant_b_staff_anything_of_tenant_a(a, b_staff):
    before = rows_of(a)
    client = Client()
    generated = calls(a, b_staff)
    assert {call["route"] for call in generated} == {route for route, _, _ in admin_routes()}

    for call in generated:
        client.force_login(b_staff)  # a logout (or login) call leaves the next one logged in again
        send = client.post if call["method"] == "POST" else client.get
        response = send(call["path"], call["data"], follow=True)
        what = f"{call['method']} {call['path']} {call['data'] or ''} as tenant B's staff"

        assert response.status_code in (200, 403, 404, 405), f"{what}: {response.status_code}"
        assert_no_secret(response, what)
        if call["objects"] and response.status_code == 200:
            # Redirected, with nothing done: Django sends a missing object to the index, the console to its list.
            final = response.redirect_chain[-1][0] if response.redirect_chain else call["path"]
            assert final in ("/admin/", "/admin/review/", "/admin/review/conflicts/"), f"{what}: ended on {final}"
        assert rows_of(a) == before, f"{what} changed tenant A's rows"


def test_every_object_page_shows_tenant_a_s_object_to_a_superuser(a, admin_client, admin_user):
    """The control: the same fillings, opened by a superuser, show A's objects (so B's refusals are B's). Delete
    pages count where the admin lets anyone delete; "view on site" needs a get_absolute_url no model has."""
    request = _request(admin_user)
    shown = {}
    for call in calls(a, admin_user):
        if not call["objects"] or call["method"] != "GET" or call["name"] in (None, "view_on_site", "review-resolve"):
            continue
        model_admin = next((ma for route, _, ma in admin_routes() if route == call["route"]), None)
        if call["name"].endswith("_delete") and not model_admin.has_delete_permission(request):
            continue
        shown.setdefault(call["route"], []).append(admin_client.get(call["path"], call["data"]).status_code)

    assert len(shown) > 30
    assert {route: statuses for route, statuses in shown.items() if set(statuses) != {200}} == {}
