"""django-q's admin (successful and failed tasks, schedules, the queue) is for superusers only: tasks carry every
tenant's ids and arguments, and django-q knows nothing of tenants."""

from django.contrib import admin
from django_q.models import Failure, OrmQ, Schedule, Success


class SuperusersOnly:
    def has_module_permission(self, request):
        return request.user.is_active and request.user.is_superuser

    def has_view_permission(self, request, obj=None):
        return request.user.is_superuser and super().has_view_permission(request, obj)

    def has_add_permission(self, request):
        return request.user.is_superuser and super().has_add_permission(request)

    def has_change_permission(self, request, obj=None):
        return request.user.is_superuser and super().has_change_permission(request, obj)

    def has_delete_permission(self, request, obj=None):
        return request.user.is_superuser and super().has_delete_permission(request, obj)


# django_q comes before this app in INSTALLED_APPS: its admin is registered by the time this module is imported.
for model in (Success, Failure, Schedule, OrmQ):
    if admin.site.is_registered(model):
        registered = type(admin.site.get_model_admin(model))
        admin.site.unregister(model)
        admin.site.register(model, type(registered.__name__, (SuperusersOnly, registered), {}))
