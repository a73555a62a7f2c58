from django.urls import path

from . import apis

urlpatterns = [
    path("kb/documents", apis.DocumentListCreateApi.as_view(), name="kb-documents"),
    path("kb/documents/<int:document_id>", apis.DocumentDetailApi.as_view(), name="kb-document-detail"),
    path("kb/documents/<int:document_id>/retry", apis.DocumentRetryApi.as_view(), name="kb-document-retry"),
    path("kb/search", apis.SearchApi.as_view(), name="kb-search"),
]
