from django.shortcuts import get_object_or_404

from memoryproject.tenancy.models import Tenant

from .models import Fact


def fact_get(*, tenant: Tenant, fact_id: int) -> Fact:
    """One fact of `tenant`; a fact of any other tenant is indistinguishable from a missing one (404)."""
    return get_object_or_404(Fact.objects.filter(tenant=tenant), pk=fact_id)
