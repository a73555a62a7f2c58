from django.urls import path

from . import apis

urlpatterns = [
    path("forget-policy", apis.ForgetPolicyApi.as_view(), name="forget-policy"),
    path("forget-policy/dry-run", apis.ForgetDryRunApi.as_view(), name="forget-dry-run"),
    path("forget-runs", apis.ForgetRunListApi.as_view(), name="forget-runs"),
    path("forget-runs/<int:run_id>", apis.ForgetRunDetailApi.as_view(), name="forget-run-detail"),
]
