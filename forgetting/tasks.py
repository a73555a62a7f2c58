"""django-q tasks of forgetting: they take ids, load rows and call one service."""

import logging
from dataclasses import asdict

from django_q.tasks import async_task

from tenancy.selectors import tenant_get, tenants_active

from .services import forget_policy_apply

logger = logging.getLogger(__name__)


def forget_sweep() -> int:
    """The daily sweep (schedule "forget-sweep"): one forget_tenant task per active tenant, so each tenant gets
    its own task timeout and retries, and the cluster's workers share the tenants. Returns how many were queued."""
    tenant_ids = list(tenants_active().values_list("pk", flat=True))
    for tenant_id in tenant_ids:
        async_task("forgetting.tasks.forget_tenant", tenant_id, task_name=f"forget-tenant-{tenant_id}")
    return len(tenant_ids)


def forget_tenant(tenant_id: int) -> dict | None:
    """Apply one tenant's forget policy now (the run is recorded as a ForgetRun); a tenant gone meanwhile is skipped."""
    tenant = tenant_get(tenant_id=tenant_id)
    if tenant is None:
        logger.info("forget: tenant %s no longer exists", tenant_id)
        return None
    report = forget_policy_apply(tenant=tenant)
    return {key: value for key, value in asdict(report).items() if key != "as_of"}
