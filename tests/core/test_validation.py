import pytest
from django.core.exceptions import ValidationError

from core.validation import validate_user_id


@pytest.mark.parametrize("user_id", ["alice", "user/42", "名字", "a" * 255])
def test_an_id_without_spaces_or_control_characters_is_accepted(user_id):
    assert validate_user_id(user_id) == user_id


@pytest.mark.parametrize("user_id", ["", "alice\n", "al ice", "tab\there", "a" * 256, 42, None])
def test_an_id_with_a_space_a_control_character_or_a_trailing_newline_is_refused(user_id):
    with pytest.raises(ValidationError):
        validate_user_id(user_id)
