"""Fixtures of the knowledge-base tests."""

import pytest
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Permission
from django.test import Client

from tenancy.services import tenant_membership_add


@pytest.fixture
def staff_of_acme(tenant):
    """A client logged in as a staff user of the `tenant` fixture, with the KB admin's permissions."""
    user = get_user_model().objects.create_user("librarian", password="pw", is_staff=True)
    user.user_permissions.add(*Permission.objects.filter(content_type__app_label="kb"))
    tenant_membership_add(tenant=tenant, user=user)
    client = Client()
    client.force_login(user)
    return client
