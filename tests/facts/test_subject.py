"""A fact is written without its subject: what the chat model still writes with "I", "The user", "我" or "用户"."""

import pytest

from facts.extraction.subject import subjectless

REWRITTEN = [
    # English, first person: the verb agrees with the unnamed third person
    ("I live in Valencia", "Lives in Valencia"),
    ("i live in Rome", "Lives in Rome"),
    ("I am allergic to shellfish", "Is allergic to shellfish"),
    ("I'm allergic to shellfish", "Is allergic to shellfish"),
    ("I’m not a fan of jazz", "Is not a fan of jazz"),
    ("I have a dog named Rex", "Has a dog named Rex"),
    ("I've been to Japan twice", "Has been to Japan twice"),
    ("I don't eat meat", "Doesn't eat meat"),
    ("I do not eat meat", "Does not eat meat"),
    ("I do yoga on Sundays", "Does yoga on Sundays"),
    ("I go hiking on weekends", "Goes hiking on weekends"),
    ("I study law", "Studies law"),
    ("I watch anime", "Watches anime"),
    ("I play guitar", "Plays guitar"),
    ("I prefer PostgreSQL for JSONB support", "Prefers PostgreSQL for JSONB support"),
    ("I really like green tea", "Really likes green tea"),
    ("I no longer eat meat", "No longer eats meat"),
    ("I always use dark mode", "Always uses dark mode"),
    ("I moved to Lisbon on 2023-04-01", "Moved to Lisbon on 2023-04-01"),
    ("I was born in Porto", "Was born in Porto"),
    ("I went to Japan in 2019", "Went to Japan in 2019"),
    ("I can swim", "Can swim"),
    ("I'd like to learn Rust", "Would like to learn Rust"),
    ("I'll start at Initech on 2023-06-01", "Will start at Initech on 2023-06-01"),
    # English, "The user" / "User": already third person
    ("The user lives in Valencia", "Lives in Valencia"),
    ("User lives in Valencia", "Lives in Valencia"),
    ("The user is allergic to shellfish", "Is allergic to shellfish"),
    ("The user no longer eats meat", "No longer eats meat"),
    ("The user doesn't drink coffee", "Doesn't drink coffee"),
    ("The user moved to Lisbon", "Moved to Lisbon"),
    ("User: prefers tea", "Prefers tea"),
    # Chinese
    ("我住在瓦伦西亚", "住在瓦伦西亚"),
    ("我不再喜欢爬山", "不再喜欢爬山"),
    ("我养了一只猫", "养了一只猫"),
    ("用户住在成都", "住在成都"),
    ("该用户是一名中学老师", "是一名中学老师"),
]

UNCHANGED = [
    "Lives in Valencia",
    "Is allergic to shellfish",
    "不再喜欢爬山",
    "In 2020 moved to Lisbon",  # "In" is not "I"
    "User interface in dark mode",  # "User" here is not the subject of a verb
    "Users in the team prefer tea",
    "The user's dog is named Rex",  # a possession, not the user as subject
    "我们的项目使用 PostgreSQL",  # 我们: we, not the user alone
    "我的猫叫小白",  # 我的: my
    "用户名是 alex",  # 用户名: a username
    "I",  # nothing would be left
]


@pytest.mark.parametrize(("content", "expected"), REWRITTEN)
def test_a_leading_subject_is_taken_out(content, expected):
    assert subjectless(content) == expected


@pytest.mark.parametrize("content", UNCHANGED)
def test_a_content_without_a_leading_user_subject_stays_as_it_is(content):
    assert subjectless(content) == content


def test_surrounding_spaces_go():
    assert subjectless("  I live in Valencia ") == "Lives in Valencia"
    assert subjectless(" Lives in Valencia  ") == "Lives in Valencia"
