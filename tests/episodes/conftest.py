import pytest


@pytest.fixture
def post_episode(api, django_capture_on_commit_callbacks):
    """POST /api/v1/episodes, then run what was queued after commit (test settings run django-q tasks inline)."""

    def post(payload: dict, client=None):
        with django_capture_on_commit_callbacks(execute=True):
            return (client or api).post("/api/v1/episodes", payload, format="json")

    return post


@pytest.fixture
def retry_episode(api, django_capture_on_commit_callbacks):
    def retry(episode_id: int, client=None):
        with django_capture_on_commit_callbacks(execute=True):
            return (client or api).post(f"/api/v1/episodes/{episode_id}/retry")

    return retry
