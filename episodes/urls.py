from django.urls import path

from . import apis

urlpatterns = [
    path("episodes", apis.EpisodeListCreateApi.as_view(), name="episodes"),
    path("episodes/search", apis.EpisodeSearchApi.as_view(), name="episodes-search"),
    path("episodes/<int:episode_id>", apis.EpisodeDetailApi.as_view(), name="episode-detail"),
    path("episodes/<int:episode_id>/retry", apis.EpisodeRetryApi.as_view(), name="episode-retry"),
]
