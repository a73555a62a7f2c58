"""django-q's admin shows every tenant's tasks and their arguments: superusers only."""

import pytest
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Permission
from django.test import Client
from django.utils import timezone
from django_q.models import Schedule, Success

from tenancy.services import tenant_membership_add

pytestmark = pytest.mark.django_db

TASK_PAGES = [
    "/admin/django_q/success/",
    "/admin/django_q/failure/",
    "/admin/django_q/schedule/",
    "/admin/django_q/ormq/",
]


@pytest.fixture
def staff_with_task_permissions(tenant):
    user = get_user_model().objects.create_user("operator", password="pw", is_staff=True)
    user.user_permissions.add(*Permission.objects.filter(content_type__app_label="django_q"))
    tenant_membership_add(tenant=tenant, user=user)
    client = Client()
    client.force_login(user)
    return client


@pytest.fixture
def task():
    now = timezone.now()
    return Success.objects.create(
        id="a" * 32, name="episode_extract-1", func="episodes.tasks.episode_extract", args=(1,), started=now,
        stopped=now, success=True,
    )  # fmt: skip


@pytest.mark.parametrize("url", TASK_PAGES)
def test_staff_get_no_task_pages_superusers_do(staff_with_task_permissions, admin_client, url):
    assert staff_with_task_permissions.get(url).status_code == 403
    assert admin_client.get(url).status_code == 200


def test_staff_can_neither_read_nor_change_a_task(staff_with_task_permissions, admin_client, task):
    schedule = Schedule.objects.create(func="forgetting.tasks.forget_sweep", name="sweep")

    assert staff_with_task_permissions.get(f"/admin/django_q/success/{task.pk}/change/").status_code == 403
    staff_with_task_permissions.post(f"/admin/django_q/schedule/{schedule.pk}/delete/", {"post": "yes"})
    assert Schedule.objects.filter(pk=schedule.pk).exists()
    assert "django_q" not in staff_with_task_permissions.get("/admin/").content.decode()
    assert admin_client.get(f"/admin/django_q/success/{task.pk}/change/").status_code == 200
    assert "episode_extract-1" in admin_client.get("/admin/django_q/success/").content.decode()
