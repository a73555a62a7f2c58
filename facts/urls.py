from django.urls import path

from .apis import FactDetailApi

urlpatterns = [
    path("facts/<int:fact_id>", FactDetailApi.as_view(), name="fact-detail"),
]
