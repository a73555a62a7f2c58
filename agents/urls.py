from django.urls import path

from . import apis

urlpatterns = [
    path("tools", apis.ToolListApi.as_view(), name="tools"),
    path("tools/call", apis.ToolCallApi.as_view(), name="tools-call"),
]
