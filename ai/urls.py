from django.urls import path

from . import apis

urlpatterns = [
    path("embedding-cache", apis.EmbeddingCacheApi.as_view(), name="embedding-cache"),
]
