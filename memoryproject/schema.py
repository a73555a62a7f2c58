"""OpenAPI schema generation (drf-spectacular)."""

from drf_spectacular import openapi


class AutoSchema(openapi.AutoSchema):
    """Components are named after their view: each view nests its own InputSerializer / OutputSerializer, and by
    class name alone they would collide (one "Input" component for every endpoint, a wrong schema)."""

    def get_serializer_name(self, serializer, direction) -> str:
        outer, _, name = type(serializer).__qualname__.rpartition(".")
        return outer.removesuffix("Api").replace(".", "") + name


def fact_category_values() -> list[str]:
    """The fact categories as the API's inputs list them (values without labels), for ENUM_NAME_OVERRIDES."""
    from facts.models import Fact

    return Fact.Category.values
