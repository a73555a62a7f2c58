from django.contrib import admin
from django.urls import include, path
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerView

from agents.mcp import mcp_view
from retrieval.apis import ContextApi
from tenancy.apis import ApiKeyDetailApi, ApiKeyListCreateApi, WhoAmIApi

from .apis import HealthApi, LiveApi, ReadyApi
from .metrics import metrics_view

urlpatterns = [
    path("admin/", admin.site.urls),
    path("api/health", HealthApi.as_view(), name="health"),
    path("api/health/live", LiveApi.as_view(), name="health-live"),
    path("api/health/ready", ReadyApi.as_view(), name="health-ready"),
    path("metrics", metrics_view, name="metrics"),
    path("api/schema/", SpectacularAPIView.as_view(), name="schema"),
    path("api/docs/", SpectacularSwaggerView.as_view(url_name="schema"), name="docs"),
    path("api/v1/whoami", WhoAmIApi.as_view(), name="whoami"),
    path("api/v1/keys", ApiKeyListCreateApi.as_view(), name="api-keys"),
    path("api/v1/keys/<int:key_id>", ApiKeyDetailApi.as_view(), name="api-key-detail"),
    path("api/v1/context", ContextApi.as_view(), name="context"),
    path("api/v1/", include("facts.urls")),
    path("api/v1/", include("forgetting.urls")),
    path("api/v1/", include("privacy.urls")),
    path("api/v1/", include("episodes.urls")),
    path("api/v1/", include("kb.urls")),
    path("api/v1/", include("ai.urls")),
    path("api/v1/", include("agents.urls")),
    path("mem0/", include("mem0api.urls")),
    path("mcp", mcp_view, name="mcp"),  # MCP over streamable HTTP (agents.mcp); under ASGI asgi.py serves it first
]
