"""The review console: admin views (in the admin's look, behind its login) that read through review.selectors and
decide through the facts services, as the API does. Every id is looked up within the staff user's tenants: any
other answers 404."""

from django.contrib import messages
from django.core.exceptions import PermissionDenied, ValidationError
from django.core.paginator import Paginator
from django.http import Http404, JsonResponse
from django.shortcuts import redirect
from django.template.response import TemplateResponse
from django.urls import reverse
from django.utils.http import url_has_allowed_host_and_scheme
from django.views.decorators.http import require_POST

from core.admin import staff_actor
from core.errors import ApplicationError
from facts.models import Fact, FactConflict
from facts.services import conflict_resolve, fact_approve, fact_reject, fact_update

from . import selectors

DECISIONS = ("approve", "reject", "edit_approve")


def _require(request, permission: str) -> None:
    if not request.user.has_perm(permission):
        raise PermissionDenied


def queue(request, site):
    _require(request, "facts.view_fact")
    filters = _filters(request)
    page = _page_number(request)
    items, total = selectors.review_queue(user=request.user, page=page, **filters)
    paginator = Paginator(range(total), selectors.QUEUE_PAGE)
    context = {
        **site.each_context(request),
        "title": "Review queue",
        "subtitle": None,
        "items": items,
        "total": total,
        "page": paginator.get_page(page),
        "filters": filters,
        "tenants": selectors.visible_tenants(user=request.user),
        "sources": Fact.Source.choices,
        "categories": Fact.Category.choices,
        "can_decide": request.user.has_perm("facts.change_fact"),
    }
    return TemplateResponse(request, "review/queue.html", context)


@require_POST
def decide(request, site):
    """Approve, reject or edit-then-approve the selected pending facts, each through its service. Answers JSON to
    the console's script, or redirects back to the queue with a message."""
    _require(request, "facts.change_fact")
    decision = request.POST.get("decision", "")
    if decision not in DECISIONS:
        return _answer(request, {"error": f"Unknown decision {decision!r}."}, status=400)
    fact_ids = [int(value) for value in request.POST.getlist("fact") if value.isdigit()]
    actor = staff_actor(request)
    facts = {
        fact.pk: fact
        for fact in Fact.objects.filter(pk__in=fact_ids, tenant__in=selectors.visible_tenants(user=request.user))
    }
    results = {}
    for fact_id in fact_ids:
        fact = facts.get(fact_id)
        if fact is None:
            results[fact_id] = {"ok": False, "error": "Fact not found."}
            continue
        try:
            if decision == "edit_approve":
                fact_update(tenant=fact.tenant, fact_id=fact.pk, actor=actor, content=request.POST.get("content", ""))
            service = fact_reject if decision == "reject" else fact_approve
            decided = service(tenant=fact.tenant, fact_id=fact.pk, actor=actor)
            results[fact_id] = {
                "ok": True,
                "status": decided.status,
                "superseded_by": decided.superseded_by_id,
                "content": decided.content,
            }
        except ApplicationError as exc:
            results[fact_id] = {"ok": False, "error": exc.message, "code": exc.code}
        except ValidationError as exc:
            results[fact_id] = {"ok": False, "error": " ".join(exc.messages)}
    return _answer(request, {"decision": decision, "results": results})


def _answer(request, body: dict, status: int = 200):
    if request.headers.get("Accept", "").startswith("application/json"):
        return JsonResponse(body, status=status)
    if status != 200:
        messages.error(request, body["error"])
    for fact_id, result in body.get("results", {}).items():
        if result["ok"]:
            messages.success(request, f"#{fact_id}: {body['decision'].replace('_', ' ')}d ({result['status']}).")
        else:
            messages.warning(request, f"#{fact_id}: {result['error']}")
    return redirect(_back(request, default=reverse("admin:review-queue")))


def conflicts(request, site):
    _require(request, "facts.view_factconflict")
    filters = _filters(request, keys=("tenant_id", "user_id"))
    page = _page_number(request)
    items, total = selectors.review_conflicts(user=request.user, page=page, **filters)
    context = {
        **site.each_context(request),
        "title": "Open conflicts",
        "subtitle": None,
        "items": items,
        "total": total,
        "page": Paginator(range(total), selectors.QUEUE_PAGE).get_page(page),
        "filters": filters,
        "tenants": selectors.visible_tenants(user=request.user),
        "can_decide": request.user.has_perm("facts.change_factconflict"),
    }
    return TemplateResponse(request, "review/conflicts.html", context)


@require_POST
def resolve(request, site, conflict_id: int):
    _require(request, "facts.change_factconflict")
    conflict = FactConflict.objects.filter(
        pk=conflict_id, tenant__in=selectors.visible_tenants(user=request.user)
    ).first()
    if conflict is None:
        raise Http404("No such conflict.")
    resolution = request.POST.get("resolution", "")
    # The form holds the merge's textarea whichever button was pressed: its text counts for a merge only.
    content = request.POST.get("content") if resolution == FactConflict.Resolution.MERGE else None
    try:
        conflict_resolve(
            tenant=conflict.tenant,
            conflict_id=conflict.pk,
            resolution=resolution,
            content=content or None,
            actor=staff_actor(request),
        )
        result = {"ok": True, "resolution": resolution}
    except ApplicationError as exc:
        result = {"ok": False, "error": exc.message}
    except ValidationError as exc:
        result = {"ok": False, "error": " ".join(exc.messages)}
    if request.headers.get("Accept", "").startswith("application/json"):
        return JsonResponse(result, status=200 if result["ok"] else 400)
    if result["ok"]:
        messages.success(request, f"Conflict #{conflict.pk} resolved: {resolution.replace('_', ' ')}.")
    else:
        messages.warning(request, f"Conflict #{conflict.pk}: {result['error']}")
    return redirect(_back(request, default=reverse("admin:review-conflicts")))


def _back(request, *, default: str) -> str:
    """Where a decision returns to: the posted `next` when it is a page of this site, else `default` (a posted
    address elsewhere would make the console an open redirect)."""
    target = request.POST.get("next") or ""
    if url_has_allowed_host_and_scheme(target, allowed_hosts={request.get_host()}, require_https=request.is_secure()):
        return target
    return default


def fact_page(request, site, fact_id: int):
    _require(request, "facts.view_fact")
    query = request.GET.get("q", "")[:500]
    story = selectors.review_fact(user=request.user, fact_id=fact_id, query=query)
    if story is None:
        raise Http404("No such fact.")
    context = {
        **site.each_context(request),
        "title": f"Fact #{story.fact.pk}",
        "subtitle": None,
        "story": story,
        "query": query,
        "proposal_lines": selectors.proposal_lines(story.fact.proposal),
    }
    return TemplateResponse(request, "review/fact.html", context)


def _filters(request, keys=("tenant_id", "user_id", "source", "category")) -> dict:
    values = {
        "tenant_id": request.GET.get("tenant", ""),
        "user_id": request.GET.get("user", "").strip(),
        "source": request.GET.get("source", ""),
        "category": request.GET.get("category", ""),
    }
    values["tenant_id"] = int(values["tenant_id"]) if values["tenant_id"].isdigit() else None
    if values["source"] not in Fact.Source.values:
        values["source"] = ""
    if values["category"] not in Fact.Category.values:
        values["category"] = ""
    return {key: values[key] for key in keys}


def _page_number(request) -> int:
    value = request.GET.get("page", "1")
    return int(value) if value.isdigit() and int(value) > 0 else 1
