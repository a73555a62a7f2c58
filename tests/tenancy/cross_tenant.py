"""Shared by the cross-tenant tests: tenant A holding one of everything, and a snapshot of every row A owns.

Every text of A's rows carries SECRET, so any answer to tenant B that shows one of them is caught by a substring
test; A's user id is not secret (B may well have a user of the same id), so B's requests use it freely."""

from dataclasses import dataclass, field

from django.apps import apps
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Permission
from django.utils import timezone

from episodes.services import episode_store
from facts.models import Fact, FactConflict
from facts.services import fact_remember
from facts.services.transitions import fact_supersede
from forgetting.models import ForgetRun
from forgetting.services import forget_policy_apply, forget_policy_set
from kb.services import document_index
from tenancy.models import Tenant
from tenancy.services import tenant_create, tenant_membership_add

SECRET = "zq-acme-secret"
USER_ID = "shared-user"  # A's end user; B tries it as its own
# Models that hold no tenant's rows (each is checked for another reason elsewhere, or is framework bookkeeping).
NOT_TENANT_DATA = {
    "ai.embeddingcache",  # vectors by text hash, shared on purpose: they reveal nothing without the text
    "admin.logentry",
    "auth.group",
    "auth.permission",
    "auth.user",  # A's staff user is snapshotted by hand below
    "contenttypes.contenttype",
    "sessions.session",
    "django_q.ormq",
    "django_q.schedule",
    "django_q.task",
    "django_q.success",
    "django_q.failure",
    "memoryproject.workerheartbeat",  # a cluster name and a time
}


@dataclass
class TenantA:
    tenant: Tenant
    key: str
    staff: object
    facts: dict[str, Fact] = field(default_factory=dict)
    objects: dict[str, list] = field(default_factory=dict)  # path parameter name -> A's objects it may name


def tenant_a_with_everything() -> TenantA:
    tenant, issued = tenant_create(name=f"{SECRET}-tenant")
    staff = get_user_model().objects.create_user(f"{SECRET}-staff", password="pw", is_staff=True)
    tenant_membership_add(tenant=tenant, user=staff)

    def remember(content, **fields):
        return fact_remember(tenant=tenant, user_id=USER_ID, content=f"{content} ({SECRET})", **fields).fact

    active = remember("Prefers PostgreSQL for new projects", category="preference")
    pending = remember("Works as a nurse in Valencia", source=Fact.Source.EXTRACTED, confidence=0.5)
    old = remember("Lives in Lisbon", category="profile")
    new = remember("Moved to Porto last spring", category="profile")
    fact_supersede(old, new, f"moved ({SECRET})", actor="test")
    archived = remember("Drinks green tea every morning")
    Fact.objects.filter(pk=archived.pk).update(status=Fact.Status.ARCHIVED, archived_at=timezone.now())
    conflict = FactConflict.objects.create(
        tenant=tenant, user_id=USER_ID, existing_fact=active, new_fact=pending, reason=f"which database ({SECRET})"
    )
    episode = episode_store(
        tenant=tenant,
        user_id=USER_ID,
        session_id=f"{SECRET}-session",
        messages=[
            {"role": "user", "content": f"I prefer PostgreSQL and green tea ({SECRET})."},
            {"role": "assistant", "content": f"Noted ({SECRET})."},
        ],
    ).episode
    document = document_index(
        tenant=tenant,
        doc_id=f"{SECRET}-runbook",
        title=f"Runbook ({SECRET})",
        text=f"# Deploys\n\nDeploy PostgreSQL on Fridays with green tea ({SECRET}).\n",
        content_type="markdown",
    ).document
    # Queued for the worker (whose task never runs here): what POST .../retry acts on.
    indexing = document_index(
        tenant=tenant,
        doc_id=f"{SECRET}-handbook",
        text=f"# Handbook\n\nOn call rotates weekly ({SECRET}).\n",
        content_type="markdown",
        background=True,
    ).document
    forget_policy_set(tenant=tenant, max_unused_days=45)
    run = forget_policy_apply(tenant=tenant, dry_run=True)
    facts = {"active": active, "pending": pending, "superseded": old, "superseding": new, "archived": archived}
    for fact in facts.values():
        fact.refresh_from_db()
    return TenantA(
        tenant=tenant,
        key=issued.key,
        staff=staff,
        facts=facts,
        objects={
            "fact_id": list(facts.values()),
            "conflict_id": [conflict],
            "episode_id": [episode],
            "document_id": [document, indexing],
            "run_id": [ForgetRun.objects.get(pk=run.run_id)],
            "user_id": [USER_ID],
            "key_id": [issued.api_key],
        },
    )


def give_every_permission(user, app_labels=("tenancy", "facts", "episodes", "kb", "forgetting", "ai")) -> None:
    """So that only the tenant scoping stands between the user and another tenant's rows."""
    user.user_permissions.add(*Permission.objects.filter(content_type__app_label__in=app_labels))


def tenant_models() -> list:
    """Every model holding tenants' rows; a model neither here nor in NOT_TENANT_DATA fails loudly."""
    found, unknown = [], []
    for model in apps.get_models():
        if model._meta.label_lower in NOT_TENANT_DATA:
            continue
        if model is Tenant or _tenant_field(model):
            found.append(model)
        else:
            unknown.append(model._meta.label_lower)
    assert not unknown, f"Rows of {unknown} belong to no tenant: add a tenant field, or list them in NOT_TENANT_DATA"
    return found


def _tenant_field(model) -> str | None:
    for model_field in model._meta.concrete_fields:
        if model_field.is_relation and model_field.related_model is Tenant:
            return model_field.name
    return None


def rows_of(a: TenantA) -> dict[str, list[dict]]:
    """Every row tenant A owns, as plain values, by model."""
    snapshot = {}
    for model in tenant_models():
        queryset = (
            model._default_manager.filter(pk=a.tenant.pk)
            if model is Tenant
            else model._default_manager.filter(**{_tenant_field(model): a.tenant})
        )
        snapshot[model._meta.label] = [_plain(row) for row in queryset.order_by("pk").values()]
    snapshot["auth.User"] = [
        _plain(row)
        for row in get_user_model().objects.filter(pk=a.staff.pk).values("pk", "username", "password", "is_staff")
    ]
    return snapshot


def _plain(row: dict) -> dict:
    return {name: value.tolist() if hasattr(value, "tolist") else value for name, value in row.items()}


def assert_no_secret(response, what: str) -> None:
    content = b"".join(response.streaming_content) if response.streaming else response.content  # an export streams
    body = content.decode(errors="replace")
    assert SECRET not in body, f"{what} shows tenant A's data: ...{_around(body, SECRET)}..."


def _around(text: str, needle: str, width: int = 200) -> str:
    at = text.find(needle)
    return text[max(0, at - width) : at + width]
