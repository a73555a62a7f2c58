from django.apps import AppConfig
from django.contrib.admin.apps import AdminConfig


class ReviewConfig(AppConfig):
    """The review console: templates, static files and the views of the project's admin site."""

    name = "review"
    verbose_name = "Review console"


class ReviewAdminConfig(AdminConfig):
    """django.contrib.admin, with the project's admin site (review.site.MemoryAdminSite) as the default site."""

    default_site = "review.site.MemoryAdminSite"
