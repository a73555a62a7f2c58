"""The project's admin site: Django's, with the review console under /admin/review/ and, on the index, what waits
for a person in each of the staff user's tenants."""

from functools import partial

from django.contrib import admin
from django.urls import path

from . import selectors, views
from .login import ThrottledAdminLoginForm


class MemoryAdminSite(admin.AdminSite):
    site_header = "memoryproject — memory review"
    site_title = "memoryproject"
    index_template = "review/index.html"
    login_form = ThrottledAdminLoginForm

    def get_urls(self):
        console = [
            path("review/", self._view(views.queue), name="review-queue"),
            path("review/decide/", self._view(views.decide), name="review-decide"),
            path("review/conflicts/", self._view(views.conflicts), name="review-conflicts"),
            path("review/conflicts/<int:conflict_id>/resolve/", self._view(views.resolve), name="review-resolve"),
            path("review/facts/<int:fact_id>/", self._view(views.fact_page), name="review-fact"),
        ]
        return console + super().get_urls()

    def _view(self, view):
        return self.admin_view(partial(view, site=self))

    def index(self, request, extra_context=None):
        counts = selectors.review_counts(user=request.user) if request.user.is_active else []
        return super().index(request, {"review_counts": counts, **(extra_context or {})})
