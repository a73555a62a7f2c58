"""The admin's sign-in is throttled per user and address, and the review console never redirects off the site."""

import pytest
from django.contrib.auth import get_user_model
from django.test import Client

from facts.models import Fact
from facts.services import fact_remember
from tenancy.services import tenant_membership_add
from tests.factories import make_tenant

pytestmark = pytest.mark.django_db

PASSWORD = "correct horse battery staple"


@pytest.fixture
def admin_user(settings):
    settings.ADMIN_LOGIN_MAX_FAILURES = 5
    return get_user_model().objects.create_superuser("root", password=PASSWORD)


def sign_in(password: str, address: str = "10.1.1.1", username: str = "root"):
    client = Client(REMOTE_ADDR=address)
    response = client.post("/admin/login/?next=/admin/", {"username": username, "password": password})
    return client, response


def signed_in(client) -> bool:
    return client.get("/admin/").status_code == 200


def test_after_five_wrong_passwords_the_right_one_waits_with_a_message_a_person_understands(admin_user):
    answers = [sign_in("wrong")[1].status_code for _ in range(5)]

    client, response = sign_in(PASSWORD)

    assert answers == [200] * 5  # the form again, with the usual error
    assert not signed_in(client)
    page = response.content.decode()
    assert "Too many failed sign-ins from your address. Try again in 15 minutes" in page


def test_the_lock_holds_one_user_at_one_address_only(admin_user):
    for _ in range(5):
        sign_in("wrong")

    elsewhere, _ = sign_in(PASSWORD, address="10.9.9.9")
    get_user_model().objects.create_superuser("other", password=PASSWORD)
    other_user, _ = sign_in(PASSWORD, username="other")

    assert signed_in(elsewhere)
    assert signed_in(other_user)


def test_a_successful_sign_in_starts_the_users_count_again(admin_user):
    for _ in range(4):
        sign_in("wrong")
    assert signed_in(sign_in(PASSWORD)[0])

    for _ in range(4):
        sign_in("wrong")

    assert signed_in(sign_in(PASSWORD)[0])


def test_the_review_console_returns_only_to_pages_of_this_site(admin_user):
    tenant, _ = make_tenant("acme")
    tenant_membership_add(tenant=tenant, user=admin_user)
    client = Client()
    client.force_login(admin_user)
    facts = [fact_remember(tenant=tenant, user_id="u", content=f"Likes tea {n}", confidence=0.1).fact for n in (1, 2)]

    away = client.post(
        "/admin/review/decide/", {"decision": "approve", "fact": facts[0].pk, "next": "https://evil.example/phish"}
    )
    home = client.post(
        "/admin/review/decide/", {"decision": "approve", "fact": facts[1].pk, "next": "/admin/review/?u=1"}
    )

    assert away["Location"] == "/admin/review/"
    assert home["Location"] == "/admin/review/?u=1"
    assert set(Fact.objects.filter(pk__in=[f.pk for f in facts]).values_list("status", flat=True)) == {"active"}
