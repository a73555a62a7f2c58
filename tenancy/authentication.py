from dataclasses import dataclass

from drf_spectacular.extensions import OpenApiAuthenticationExtension
from rest_framework import authentication, exceptions, permissions

from core.request_context import tenant_id_set

from .models import ApiKey, Tenant
from .scopes import ANY_KEY, MEMORY_READ, MEMORY_WRITE
from .selectors import api_key_find_active
from .throttling import AuthFailureThrottle


@dataclass(frozen=True)
class ApiClient:
    """The authenticated caller of the API: an agent holding one tenant's key."""

    api_key: ApiKey

    is_authenticated = True
    is_anonymous = False

    @property
    def tenant(self) -> Tenant:
        return self.api_key.tenant

    @property
    def actor(self) -> str:
        """How audit records name this caller."""
        return f"api_key:{self.api_key.pk}"


class ApiKeyAuthentication(authentication.BaseAuthentication):
    """`Authorization: Bearer <key>`; the key decides the tenant, nothing in the request can."""

    keyword = "Bearer"  # what the challenge (WWW-Authenticate) and the malformed-header message name
    keywords = ("bearer",)  # the schemes accepted, lowercase

    def authenticate(self, request):
        header = authentication.get_authorization_header(request).decode("latin-1").split()
        if not header or header[0].lower() not in self.keywords:
            return None  # no key: HasApiKey refuses it (and counts the failure) where a key is required
        if len(header) != 2:
            refuse_failed_authentication(request, f"Malformed Authorization header: expected '{self.keyword} <key>'.")
        api_key = api_key_find_active(key=header[1])
        if api_key is None:
            refuse_failed_authentication(request, "Unknown or revoked API key.")
        # A valid key is served whatever its address's failures: one misbehaving client behind a shared proxy or
        # NAT must not lock out the tenants that authenticate from there.
        tenant_id_set(api_key.tenant_id)  # every log line of the request names its tenant from here on
        return ApiClient(api_key=api_key), api_key

    def authenticate_header(self, request):
        return f'{self.keyword} realm="api"'


class HasApiKey(permissions.IsAuthenticated):
    """The API's default permission: a request without a valid key is refused, and counts as a failed
    authentication of its address (a wrong key was counted when it was looked up); a key without the scope the
    operation needs (required_scope) is refused with 403 insufficient_scope."""

    code = "insufficient_scope"

    def has_permission(self, request, view):
        if not super().has_permission(request, view):
            failed_authentication_count(request)  # no key at all: a wrong one failed before permissions
            return False
        scope = required_scope(request, view)
        if scope == ANY_KEY or request.user.api_key.has_scope(scope):
            return True
        self.message = (
            f"This API key lacks the {scope!r} scope this operation needs; it has "
            f"{', '.join(request.user.api_key.scopes) or 'none'}. Issue a key with it: "
            f"manage.py create_api_key TENANT --scopes {scope}"
        )
        return False


def failed_authentication_count(request) -> None:
    """One failure more for the request's address (a wrong, revoked, malformed or missing key); Throttled (429) once
    the address is past AUTH_FAILURE_THROTTLE_RATE. Only failures are slowed, never the keys that work."""
    failures = AuthFailureThrottle()
    if not failures.allow_request(request):
        raise exceptions.Throttled(failures.wait())
    failures.record_failure(request)


def refuse_failed_authentication(request, message: str):
    failed_authentication_count(request)
    raise exceptions.AuthenticationFailed(message)


def required_scope(request, view) -> str:
    """The scope an API operation needs: the view's `required_scope` (one for all its methods, or a dict by
    method), else memory:read to read (GET, or a POST that only reads: `reads_only`) and memory:write to write."""
    declared = getattr(view, "required_scope", None)
    if isinstance(declared, dict):
        declared = declared.get(request.method)
    if declared:
        return declared
    if request.method in permissions.SAFE_METHODS or getattr(view, "reads_only", False):
        return MEMORY_READ
    return MEMORY_WRITE


def request_tenant(request) -> Tenant:
    return request.user.tenant


def request_actor(request) -> str:
    """How audit records name the caller of this request."""
    return request.user.actor


class ApiKeyAuthenticationScheme(OpenApiAuthenticationExtension):
    target_class = ApiKeyAuthentication
    name = "ApiKey"

    def get_security_definition(self, auto_schema):
        return {"type": "http", "scheme": "bearer", "description": "A tenant API key: `Bearer mp_...`"}
