"""The routes of mem0ai's MemoryClient under /mem0/ (its `host` is this service's address + "/mem0")."""

from django.urls import path, re_path

from . import apis

_ERASE = "erase a user entirely with DELETE /api/v1/users/{user_id}"
# Mem0 features the client has routes for and this service does not: each answers 400 not_supported, saying why.
NOT_SUPPORTED = [
    (r"^v1/entities/", "entities", f"listing or deleting users, agents, apps and runs is not supported: {_ERASE}"),
    (r"^v2/entities/user/[^/]+/profile/", "profiles", "memory profiles are not supported"),
    (r"^v2/entities/", "entities", f"deleting users, agents, apps and runs is not supported: {_ERASE}"),
    (r"^v2/profiles/", "profiles", "memory profiles are not supported"),
    (r"^v1/batch/", "batch", "batch updates and deletions are not supported: update or delete each memory"),
    (r"^v1/exports/", "exports", "Mem0 exports are not supported: use GET /api/v1/users/{user_id}/export"),
    (r"^v1/summary/", "summary", "summaries are not supported"),
    (r"^v1/feedback/", "feedback", "feedback on memories is not supported"),
    (
        r"^v1/events?/",
        "events",
        "events are not supported: an add with infer=true answers its episode_id, whose extraction status "
        "GET /api/v1/episodes/{episode_id} shows",
    ),
    (r"^api/v1/orgs/", "organizations", "organizations and projects are not supported: the API key names the tenant"),
    (r"^api/v1/webhooks/", "webhooks", "webhooks are not supported"),
]

urlpatterns = [
    path("v1/ping/", apis.PingApi.as_view(), name="mem0-ping"),
    path("v1/memories/", apis.MemoriesV1Api.as_view(), name="mem0-memories-v1"),
    path("v2/memories/", apis.MemoriesListApi.as_view(), name="mem0-memories-v2"),
    path("v3/memories/", apis.MemoriesListApi.as_view(), name="mem0-memories-v3"),
    path("v3/memories/add/", apis.AddApi.as_view(), name="mem0-add"),
    path("v1/memories/search/", apis.SearchApi.as_view(), name="mem0-search-v1"),
    path("v2/memories/search/", apis.SearchApi.as_view(), name="mem0-search-v2"),
    path("v3/memories/search/", apis.SearchApi.as_view(), name="mem0-search-v3"),
    path("v1/memories/<str:memory_id>/", apis.MemoryDetailApi.as_view(), name="mem0-memory"),
    path("v1/memories/<str:memory_id>/history/", apis.MemoryHistoryApi.as_view(), name="mem0-memory-history"),
    *[
        re_path(pattern, apis.NotSupportedApi.as_view(feature=feature, reason=reason), name=f"mem0-{feature}")
        for pattern, feature, reason in NOT_SUPPORTED
    ],
    re_path(r"^", apis.UnknownRouteApi.as_view(), name="mem0-unknown"),
]
