from django.urls import path

from . import apis

urlpatterns = [
    # path, not str: a user id may contain "/" (only spaces and control characters are refused).
    path("users/<path:user_id>", apis.UserEraseApi.as_view(), name="user-erase"),
]
