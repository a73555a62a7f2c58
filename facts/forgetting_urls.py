from django.urls import path

from . import forgetting_apis as apis

urlpatterns = [
    path("forget-policy", apis.ForgetPolicyApi.as_view(), name="forget-policy"),
    path("forget-policy/dry-run", apis.ForgetDryRunApi.as_view(), name="forget-dry-run"),
    path("forget-runs", apis.ForgetRunListApi.as_view(), name="forget-runs"),
    path("forget-runs/<int:run_id>", apis.ForgetRunDetailApi.as_view(), name="forget-run-detail"),
    path("facts/<int:fact_id>/restore", apis.FactRestoreApi.as_view(), name="fact-restore"),
    # path, not str: a user id may contain "/" (only spaces and control characters are refused).
    path("users/<path:user_id>", apis.UserEraseApi.as_view(), name="user-erase"),
]
