from django.urls import path

from . import apis

urlpatterns = [
    # Before the erasure's catch-all: a user id may contain "/", so "users/a/b/export" is user "a/b"'s export.
    path("users/<path:user_id>/export", apis.UserExportApi.as_view(), name="user-export"),
    path("users/<path:user_id>/import", apis.UserImportApi.as_view(), name="user-import"),
    # path, not str: a user id may contain "/" (only spaces and control characters are refused).
    path("users/<path:user_id>", apis.UserEraseApi.as_view(), name="user-erase"),
]
