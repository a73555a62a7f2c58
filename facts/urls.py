from django.urls import path

from . import apis

urlpatterns = [
    path("facts", apis.FactListCreateApi.as_view(), name="facts"),
    path("facts/import", apis.FactImportApi.as_view(), name="facts-import"),
    path("facts/delete", apis.FactDeleteByFilterApi.as_view(), name="facts-delete-by-filter"),
    path("facts/search", apis.FactSearchApi.as_view(), name="facts-search"),
    path("facts/<int:fact_id>", apis.FactDetailApi.as_view(), name="fact-detail"),
    path("facts/<int:fact_id>/history", apis.FactHistoryApi.as_view(), name="fact-history"),
    path("facts/<int:fact_id>/approve", apis.FactApproveApi.as_view(), name="fact-approve"),
    path("facts/<int:fact_id>/reject", apis.FactRejectApi.as_view(), name="fact-reject"),
    path("facts/<int:fact_id>/restore", apis.FactRestoreApi.as_view(), name="fact-restore"),
    path(
        "facts/<int:fact_id>/undo-supersession", apis.FactSupersessionUndoApi.as_view(), name="fact-undo-supersession"
    ),
    path("conflicts", apis.ConflictListApi.as_view(), name="conflicts"),
    path("conflicts/<int:conflict_id>/resolve", apis.ConflictResolveApi.as_view(), name="conflict-resolve"),
]
