"""The offline judge: how a new fact relates to an existing one, by rules, in English and Chinese.

Similarity values are what the two embedders give for each pair (the hashing embedder scores paraphrases without
shared words low; all-MiniLM-L6-v2 scores most Chinese pairs high): each case uses a value one of them produces,
the lower one where the rule must hold without help from the embedding.
"""

import dataclasses

import pytest

from core.stemming import stem
from facts.judging import Judgement, Relation, judge_by_rules
from facts.judging.analysis import analyse, word_stem
from facts.judging.lexicon import IRREGULAR, MARKER_FAMILIES

SUPERSEDE_AT = 0.75  # the caller retires the old fact from this certainty up, else opens a conflict

DUPLICATES = [
    pytest.param("I prefer PostgreSQL", "User prefers PostgreSQL", 0.50, id="subject-i-vs-user"),
    pytest.param("Prefers PostgreSQL", "I prefer PostgreSQL.", 0.65, id="no-subject-and-full-stop"),
    pytest.param("The user likes hiking", "I love hiking", 0.31, id="synonym-love-like"),
    pytest.param("I enjoy hiking in the Alps", "Likes hiking in the Alps", 0.74, id="synonym-enjoy-like"),
    pytest.param("We use Jira for task tracking", "Uses Jira for task tracking", 0.84, id="subject-we"),
    pytest.param("User is using VS Code", "I use Visual Studio Code", 0.23, id="verb-form-and-alias"),
    pytest.param("Works for Google", "I work at Google", 0.49, id="works-for-vs-at"),
    pytest.param("Is based in Berlin", "Lives in Berlin", 0.53, id="based-in-vs-lives-in"),
    pytest.param("My name is Anna", "User is called Anna", 0.47, id="name-is-vs-called"),
    pytest.param("Is 30 years old", "User's age is 30", 0.41, id="age-two-ways"),
    pytest.param("Prefers PostgreSQL", "Prefers PostgreSQL because it supports JSONB", 0.40, id="new-says-less"),
    pytest.param("I don't like tea", "User dislikes tea", 0.25, id="both-negative"),
    pytest.param("Always runs the tests before pushing", "Runs the tests before pushing", 0.90, id="filler-always"),
    pytest.param("Switched to Vim", "Uses Vim", 0.33, id="switched-to-what-is-already-used"),
    pytest.param("Now lives in Paris", "Lives in Paris", 0.89, id="now-lives-where-already-known"),
    pytest.param("Prefers dark mode in every editor", "User prefers dark mode in all editors", 0.82, id="every-vs-all"),
    pytest.param("Uses tabs instead of spaces", "Uses tabs rather than spaces", 0.69, id="instead-of-vs-rather-than"),
    pytest.param("Lives in Berlin", "Lives in Berlin with her partner", 0.74, id="less-detail-than-existing"),
    pytest.param("Is a vegetarian", "I am a vegetarian", 0.62, id="is-vs-i-am"),
    pytest.param("Migrated from MySQL to PostgreSQL", "Switched from MySQL to PostgreSQL", 0.75, id="same-change"),
    pytest.param(
        "Runs unit tests and integration tests locally before every push to main",
        "Before pushing to main, runs unit and integration tests on the laptop",
        0.80,
        id="close-word-sets",
    ),
    pytest.param(
        "我们每周五下午在会议室开例会讨论进度", "每周五下午我们开例会在会议室讨论进度", 0.90, id="zh-word-order"
    ),
    pytest.param("我喜欢用 PostgreSQL", "用户喜欢使用PostgreSQL", 0.52, id="zh-user-and-shiyong"),
    pytest.param("我住在柏林", "用户住在柏林。", 0.72, id="zh-subject-and-full-stop"),
    pytest.param("我叫安娜", "我的名字是安娜", 0.31, id="zh-called-vs-name-is"),
    pytest.param("我们用Slack沟通", "我们使用 Slack 来沟通", 0.72, id="zh-yong-vs-shiyong"),
    pytest.param("我不喝咖啡", "我从不喝咖啡", 0.73, id="zh-both-negative"),
    pytest.param("我们改用了PostgreSQL", "我们使用PostgreSQL", 0.51, id="zh-switched-to-what-is-used"),
    pytest.param("我在谷歌工作", "我在谷歌上班", 0.62, id="zh-gongzuo-vs-shangban"),
    pytest.param("我偏好深色主题", "我喜欢深色主题", 0.55, id="zh-prefer-vs-like"),
    pytest.param("我今年30岁", "我30岁", 0.63, id="zh-age-this-year"),
    # word forms the stemmer unifies: "have"/"has", "came"/"comes", "morning"/"mornings", "resident"/"lives"
    pytest.param("I have two cats", "User has two cats", 0.56, id="have-vs-has"),
    pytest.param("Came from Germany", "Comes from Germany", 0.68, id="irregular-came-vs-comes"),
    pytest.param("Jogs every morning", "Jogs in the mornings", 0.46, id="morning-vs-mornings"),
    pytest.param("Is a resident of Lisbon", "Lives in Lisbon", 0.40, id="resident-of-vs-lives-in"),
    pytest.param("Her employer is Google", "Works at Google", 0.36, id="employer-vs-works-at"),
]

REFINEMENTS = [
    pytest.param("Prefers PostgreSQL because it has JSONB", "Prefers PostgreSQL", 0.42, id="adds-reason"),
    pytest.param("Lives in Berlin, in the Mitte district", "Lives in Berlin", 0.78, id="adds-district"),
    pytest.param("Uses Vim for Python and Go", "Uses Vim", 0.61, id="adds-purpose"),
    pytest.param("Works at Google as a site reliability engineer", "Works at Google", 0.52, id="adds-role"),
    pytest.param("Prefers dark mode in all editors and terminals", "Prefers dark mode", 0.62, id="adds-scope"),
    pytest.param("Likes hiking in the Alps on weekends", "Likes hiking", 0.55, id="adds-place-and-time"),
    pytest.param("Is allergic to peanuts and shellfish", "Is allergic to peanuts", 0.81, id="adds-second-item"),
    pytest.param("Switched from MySQL to PostgreSQL", "Uses PostgreSQL", 0.36, id="adds-previous-value"),
    pytest.param(
        "Runs the full test suite before pushing to main", "Runs the test suite before pushing", 0.84, id="adds-branch"
    ),
    pytest.param("Drinks green tea every morning", "Drinks green tea", 0.73, id="adds-habit-time"),
    pytest.param("Speaks German and French", "Speaks German", 0.74, id="adds-language"),
    pytest.param(
        "Project Atlas uses PostgreSQL 16 with pgvector", "Project Atlas uses PostgreSQL", 0.81, id="adds-version"
    ),
    pytest.param(
        "Decided to release on Friday after the security review",
        "Decided to release on Friday",
        0.74,
        id="adds-condition",
    ),
    pytest.param("Has a dog named Rex", "Has a dog", 0.57, id="adds-name"),
    pytest.param("Moved from Berlin to Paris", "Lives in Paris", 0.32, id="adds-previous-home"),
    pytest.param("No longer uses MySQL, now uses PostgreSQL", "Uses PostgreSQL", 0.69, id="no-longer-x-now-y"),
    pytest.param("Prefers tea over coffee in the afternoon", "Prefers tea over coffee", 0.77, id="comparison-kept"),
    pytest.param("I prefer PostgreSQL for analytics workloads", "User prefers PostgreSQL", 0.33, id="other-subject"),
    pytest.param("我喜欢用PostgreSQL，因为它支持JSONB", "我喜欢用 PostgreSQL", 0.75, id="zh-adds-reason"),
    pytest.param("我住在柏林的米特区", "我住在柏林", 0.72, id="zh-adds-district"),
    pytest.param("我们用Jira管理任务和缺陷", "我们用Jira管理任务", 0.83, id="zh-adds-item"),
    pytest.param("我每天早上喝绿茶", "我喝绿茶", 0.50, id="zh-adds-time"),
    pytest.param("从MySQL换成了PostgreSQL", "我们用PostgreSQL", 0.34, id="zh-adds-previous-value"),
    pytest.param("我会说德语和法语", "我会说德语", 0.78, id="zh-adds-language"),
    pytest.param("我在谷歌做后端开发工作", "我在谷歌工作", 0.63, id="zh-adds-role"),
]

# (new, existing, similarity, how the reason starts): negation, explicit replacement, exclusive attributes.
STRONG_CONTRADICTIONS = [
    pytest.param("User no longer uses MySQL", "Uses MySQL", 0.15, "negation", id="no-longer"),
    pytest.param("I don't like coffee", "Likes coffee", 0.25, "negation", id="do-not"),
    pytest.param("Never drinks coffee", "Drinks coffee every morning", 0.58, "negation", id="never-vs-more-detail"),
    pytest.param("Stopped using Windows", "Uses Windows", 0.49, "negation", id="stopped"),
    pytest.param("Quit smoking", "Smokes", 0.28, "negation", id="quit"),
    pytest.param("Is not a morning person", "Is a morning person", 0.90, "negation", id="is-not"),
    pytest.param("Doesn't use Docker anymore", "Uses Docker for local development", 0.37, "negation", id="anymore"),
    pytest.param("Hates tea", "Loves tea", 0.45, "negation", id="hates-vs-loves"),
    pytest.param("I used to live in Berlin", "Lives in Berlin", 0.60, "negation", id="used-to"),
    pytest.param("我们的项目不再使用 MySQL", "我们的项目使用MySQL", 0.80, "negation", id="zh-buzai"),
    pytest.param("我不喜欢咖啡", "我喜欢喝咖啡", 0.50, "negation", id="zh-bu"),
    pytest.param("我没有车", "我有一辆车", 0.16, "negation", id="zh-meiyou"),
    pytest.param("我已经停止使用Windows", "我使用Windows", 0.55, "negation", id="zh-tingzhi"),
    pytest.param("我不再住在上海", "我住在上海", 0.67, "negation", id="zh-buzai-live"),
    pytest.param("我不用Vim", "我用Vim", 0.15, "negation", id="zh-buyong"),
    pytest.param("Switched from MySQL to PostgreSQL", "Uses MySQL", 0.30, "replacement", id="switched-from-to"),
    pytest.param("Moved from Berlin to Paris", "Lives in Berlin", 0.28, "replacement", id="moved-from-to"),
    pytest.param(
        "Replaced Jenkins with GitHub Actions", "Uses Jenkins for CI", 0.28, "replacement", id="replaced-with"
    ),
    pytest.param("Uses PostgreSQL instead of MySQL", "Prefers MySQL", 0.19, "replacement", id="instead-of"),
    pytest.param(
        "No longer uses Slack, now uses Teams", "Uses Slack at work", 0.60, "replacement", id="no-longer-x-now-y"
    ),
    pytest.param("Lives in Berlin", "Moved from Berlin to Paris", 0.28, "replacement", id="existing-moved-away"),
    pytest.param("从MySQL换成了PostgreSQL", "我们使用MySQL", 0.28, "replacement", id="zh-cong-huancheng"),
    pytest.param("不再用MySQL，改用PostgreSQL", "我们用MySQL", 0.34, "replacement", id="zh-buzai-gaiyong"),
    pytest.param("我们把Jenkins换成了GitHub Actions", "我们用Jenkins做CI", 0.43, "replacement", id="zh-ba-huancheng"),
    pytest.param("我从北京搬到了上海", "我住在北京", 0.24, "replacement", id="zh-cong-bandao"),
    pytest.param("Lives in Berlin", "Lives in Paris", 0.52, "changed value of 'lives in'", id="lives-in"),
    pytest.param("Works at Meta", "Works at Google", 0.54, "changed value of 'works at'", id="works-at"),
    pytest.param("My name is Anna", "My name is Bea", 0.69, "changed value of 'name'", id="name"),
    pytest.param("Is 31 years old", "Is 30 years old", 0.78, "changed value of 'age'", id="age"),
    pytest.param(
        "Favourite colour is green", "Favourite colour is blue", 0.77, "changed value of 'favourite'", id="favourite"
    ),
    pytest.param("Was born in 1990", "Was born in 1991", 0.77, "changed value of 'born'", id="born-in"),
    pytest.param("Timezone is CET", "Timezone is UTC", 0.69, "changed value of '<attribute> is'", id="copula"),
    pytest.param("Is from Germany", "Is from France", 0.50, "changed value of 'comes from'", id="from"),
    pytest.param("我住在巴黎", "我住在柏林", 0.52, "changed value of 'lives in'", id="zh-zhuzai"),
    pytest.param("我今年31岁", "我今年30岁", 0.73, "changed value of 'age'", id="zh-sui"),
    pytest.param("我在Meta工作", "我在谷歌工作", 0.57, "changed value of 'works at'", id="zh-zai-gongzuo"),
    pytest.param("我叫贝拉", "我叫安娜", 0.38, "changed value of 'name'", id="zh-jiao"),
    pytest.param(
        "我最喜欢的颜色是绿色", "我最喜欢的颜色是蓝色", 0.80, "changed value of 'favourite'", id="zh-zuixihuan"
    ),
    pytest.param("Moved to Paris", "Lives in Berlin", 0.03, "change", id="moved-to-without-from"),
    pytest.param("Relocated to Lisbon", "Lives in Porto", 0.04, "change", id="relocated-to-without-from"),
    pytest.param("现在住在巴黎", "我住在柏林", 0.29, "change", id="zh-xianzai-zhuzai"),
]

# Weakly exclusive attributes and bare "switched to Y": a human settles them.
WEAK_CONTRADICTIONS = [
    pytest.param("Prefers MySQL", "Prefers PostgreSQL", 0.65, "changed value of 'prefers'", id="prefers"),
    pytest.param("Prefers tea", "Prefers coffee", 0.52, "changed value of 'prefers'", id="prefers-drinks"),
    pytest.param(
        "Uses Emacs as main editor", "Uses Vim as main editor", 0.73, "changed value of 'uses", id="uses-x-as"
    ),
    pytest.param("Switched to Vim", "Uses Emacs", 0.33, "change", id="switched-to-over-similarity-gate"),
    pytest.param("Now uses Neovim", "Uses Vim", 0.53, "change", id="now-uses"),
    pytest.param("Uses Emacs", "Switched to Vim", 0.33, "change", id="existing-switched-to"),
    pytest.param("Doesn't use MySQL for analytics", "Uses MySQL", 0.48, "negation", id="negation-narrower-scope"),
    pytest.param("我偏好浅色主题", "我偏好深色主题", 0.77, "changed value of 'prefers'", id="zh-pianhao"),
    pytest.param("我们用Trello管理任务", "我们用Jira管理任务", 0.78, "changed value of 'uses", id="zh-yong-x-zuo"),
    pytest.param("改用Vim", "我用Emacs写代码", 0.06, "change", id="zh-gaiyong"),
    pytest.param("Release on 2023-05-12", "Release on 2023-05-19", 0.80, "changed value of 'date'", id="date"),
    pytest.param("Migrated to PostgreSQL", "Uses MySQL", 0.03, "change", id="migrated-to-names-use"),
]

UNRELATED = [
    pytest.param("Likes Python", "Likes Rust", 0.56, id="likes-two-languages"),
    pytest.param("Prefers tea", "Prefers dark mode", 0.29, id="prefers-different-topics"),
    pytest.param("Prefers tea", "Prefers dark mode", 0.52, id="prefers-different-kinds-over-gate"),
    pytest.param("Lives in Berlin", "Works in Berlin", 0.78, id="lives-vs-works-same-city"),
    pytest.param("Has visited Japan", "Has visited Italy", 0.69, id="visited-two-countries"),
    pytest.param("Uses Python", "Uses Rust", 0.57, id="uses-two-languages"),
    pytest.param("Is a vegetarian", "Is a software engineer", 0.51, id="two-identities"),
    pytest.param("Loves jazz", "Lives in Berlin", 0.17, id="different-topics"),
    pytest.param("Works at Google", "Likes Google Docs", 0.46, id="shared-name-only"),
    pytest.param("Switched to Vim", "Lives in Berlin", 0.11, id="switch-of-another-attribute"),
    pytest.param("Switched to Vim", "Uses Emacs", 0.00, id="bare-switch-under-similarity-gate"),
    pytest.param("Switched from MySQL to PostgreSQL", "Uses Redis for caching", 0.00, id="change-of-unmentioned-x"),
    pytest.param("Doesn't like tea", "Likes coffee", 0.52, id="negation-of-another-thing"),
    pytest.param("Does not use Windows", "Uses macOS", 0.53, id="negation-compatible"),
    pytest.param("Prefers tabs", "Prefers PostgreSQL", 0.39, id="prefers-under-similarity-gate"),
    pytest.param("Prefers MySQL", "Prefers PostgreSQL", 0.47, id="prefers-just-under-gate"),
    pytest.param("Moved to Paris", "Works at Google", 0.22, id="move-vs-employer"),
    pytest.param("Never pushes directly to main", "Always runs the tests before pushing", 0.50, id="two-procedures"),
    pytest.param("Uses Vim for Python", "Uses VS Code for Rust", 0.32, id="tools-for-different-things"),
    pytest.param("No longer uses MySQL", "Uses PostgreSQL", 0.41, id="gave-up-something-else"),
    pytest.param("No longer lives in Berlin", "Lives in Paris", 0.40, id="left-another-city"),
    pytest.param("Works with us on the API", "Uses the API", 0.42, id="pronoun-us-is-no-use"),
    pytest.param("Has an adorable dog", "Likes dogs", 0.41, id="adorable-is-no-liking"),
    pytest.param(
        "Runs unit tests and integration tests locally before every push to main",
        "Before pushing to main, runs unit and integration tests on the laptop",
        0.30,
        id="close-word-sets-but-dissimilar",
    ),
    pytest.param("我喜欢Python", "我喜欢Rust", 0.73, id="zh-likes-two-languages"),
    pytest.param("我住在柏林", "我在柏林工作", 0.99, id="zh-lives-vs-works-same-city"),
    pytest.param("我喜欢喝茶", "我喜欢深色模式", 0.99, id="zh-likes-different-topics"),
    pytest.param("我们用Jira管理任务", "我们用Slack沟通", 0.79, id="zh-tools-for-different-things"),
    pytest.param("我养了一只猫", "我喜欢狗", 0.05, id="zh-cat-vs-dog"),
    pytest.param("我不喝咖啡", "我喜欢喝茶", 0.10, id="zh-negation-of-another-thing"),
    pytest.param("我去过日本", "我去过意大利", 0.64, id="zh-visited-two-countries"),
    pytest.param("改用Vim", "我住在柏林", 0.00, id="zh-switch-of-another-attribute"),
    pytest.param("我们换成了PostgreSQL", "我住在北京", 0.90, id="zh-unnamed-change-never-moves-home"),
    pytest.param("我偏好茶", "我偏好深色模式", 0.90, id="zh-prefers-different-kinds"),
    pytest.param("我偏好浅色主题", "我偏好深色主题", 0.30, id="zh-prefers-under-similarity-gate"),
]


def _judge(new: str, existing: str, similarity: float) -> Judgement:
    judgement = judge_by_rules(new, existing, similarity=similarity)
    assert judgement.reason.strip()
    assert 0.0 <= judgement.certainty <= 1.0
    return judgement


@pytest.mark.parametrize(("new", "existing", "similarity"), DUPLICATES)
def test_duplicate(new, existing, similarity):
    assert _judge(new, existing, similarity).relation == Relation.DUPLICATE


@pytest.mark.parametrize(("new", "existing", "similarity"), REFINEMENTS)
def test_refines(new, existing, similarity):
    assert _judge(new, existing, similarity).relation == Relation.REFINES


@pytest.mark.parametrize(("new", "existing", "similarity", "reason"), STRONG_CONTRADICTIONS)
def test_strong_contradiction_supersedes(new, existing, similarity, reason):
    judgement = _judge(new, existing, similarity)

    assert judgement.relation == Relation.CONTRADICTS
    assert judgement.certainty >= SUPERSEDE_AT
    assert judgement.reason.startswith(reason)


@pytest.mark.parametrize(("new", "existing", "similarity", "reason"), WEAK_CONTRADICTIONS)
def test_weak_contradiction_goes_to_a_human(new, existing, similarity, reason):
    judgement = _judge(new, existing, similarity)

    assert judgement.relation == Relation.CONTRADICTS
    assert 0.5 <= judgement.certainty < SUPERSEDE_AT
    assert judgement.reason.startswith(reason)


@pytest.mark.parametrize(("new", "existing", "similarity"), UNRELATED)
def test_unrelated(new, existing, similarity):
    assert _judge(new, existing, similarity).relation == Relation.UNRELATED


@pytest.mark.parametrize(("new", "existing", "similarity", "reason"), STRONG_CONTRADICTIONS)
def test_strong_contradiction_does_not_hinge_on_similarity(new, existing, similarity, reason):
    judgements = {judge_by_rules(new, existing, similarity=value) for value in (0.0, 0.5, 1.0)}

    assert len(judgements) == 1


def test_negation_certainty_follows_overlap():
    same = judge_by_rules("Does not drink coffee", "Drinks coffee", similarity=0.5)
    narrower = judge_by_rules("Never drinks coffee", "Drinks coffee every morning", similarity=0.5)
    wider = judge_by_rules("Doesn't drink coffee after 6pm", "Drinks coffee", similarity=0.5)

    assert (same.relation, same.certainty) == (Relation.CONTRADICTS, 0.95)
    assert (narrower.relation, narrower.certainty) == (Relation.CONTRADICTS, 0.9)
    assert (wider.relation, wider.certainty) == (Relation.CONTRADICTS, 0.6)


def test_weak_attribute_needs_similar_facts():
    below = judge_by_rules("Prefers MySQL", "Prefers PostgreSQL", similarity=0.49)
    at_gate = judge_by_rules("Prefers MySQL", "Prefers PostgreSQL", similarity=0.5)

    assert below.relation == Relation.UNRELATED
    assert "similarity 0.49" in below.reason
    assert (at_gate.relation, at_gate.certainty) == (Relation.CONTRADICTS, 0.6)


def test_bare_change_needs_the_attribute_named_or_a_shared_topic():
    named = judge_by_rules("Now uses Neovim", "Uses Vim", similarity=0.0)
    unnamed_unrelated = judge_by_rules("Switched to Neovim", "Uses Vim", similarity=0.19)
    unnamed_related = judge_by_rules("Switched to Neovim", "Uses Vim", similarity=0.2)

    assert (named.relation, named.certainty) == (Relation.CONTRADICTS, 0.65)
    assert unnamed_unrelated.relation == Relation.UNRELATED
    assert (unnamed_related.relation, unnamed_related.certainty) == (Relation.CONTRADICTS, 0.6)


def test_moving_home_retires_the_old_home_with_high_certainty():
    judgement = judge_by_rules("搬到了上海", "我住在北京", similarity=0.1)

    assert judgement.relation == Relation.CONTRADICTS
    assert judgement.certainty == 0.85


def test_change_to_a_value_the_existing_fact_denies():
    judgement = judge_by_rules("Switched to Vim", "Doesn't use Vim", similarity=0.3)

    assert (judgement.relation, judgement.certainty) == (Relation.CONTRADICTS, 0.9)


def test_reversed_comparison_contradicts():
    judgement = judge_by_rules("Prefers tea over coffee", "Prefers coffee over tea", similarity=0.95)

    assert judgement.relation == Relation.CONTRADICTS
    assert judgement.certainty >= SUPERSEDE_AT


def test_exact_duplicate_is_certain():
    judgement = judge_by_rules("  Prefers dark-mode!! ", "prefers dark mode", similarity=0.9)

    assert judgement == Judgement(Relation.DUPLICATE, 1.0, "same statement after normalisation")


def test_empty_fact_is_unrelated():
    assert judge_by_rules("", "Lives in Berlin", similarity=0.0).relation == Relation.UNRELATED
    assert judge_by_rules("的了", "我住在柏林", similarity=0.0).relation == Relation.UNRELATED


def test_reason_names_the_changed_value():
    judgement = judge_by_rules("Lives in Paris", "Lives in Berlin", similarity=0.6)

    assert judgement.reason == "changed value of 'lives in': 'berlin' -> 'paris'"


def test_relation_and_judgement_are_plain_values():
    judgement = judge_by_rules("I prefer tea", "User prefers tea", similarity=0.7)

    assert Relation("contradicts") is Relation.CONTRADICTS
    assert judgement.relation == "duplicate"
    with pytest.raises(dataclasses.FrozenInstanceError):
        judgement.certainty = 0.1  # type: ignore[misc]


@pytest.mark.parametrize(
    ("words", "key"),
    [
        pytest.param(("use", "uses", "used", "using", "utilize", "utilises"), "use", id="use"),
        pytest.param(
            ("like", "likes", "liked", "loves", "enjoys", "prefers", "preferred", "adores"), "like", id="like"
        ),
        pytest.param(("live", "lives", "living", "lived", "resides", "based"), "live", id="live"),
        pytest.param(("work", "works", "worked", "employed", "employer", "job"), "work", id="work"),
        pytest.param(("name", "names", "named", "called"), "name", id="name"),
        pytest.param(("favorite", "favourite", "favourites"), "favorite", id="favorite"),
        pytest.param(("have", "has", "had", "having"), "have", id="have"),
        pytest.param(("go", "goes", "going", "went", "gone"), "go", id="go"),
        pytest.param(("us",), "us", id="the-pronoun-us"),
        pytest.param(("likely",), "likely", id="likely-kept-whole"),
    ],
)
def test_word_forms_share_one_key(words, key):
    assert {word: analyse(word).keys for word in words} == {word: (key,) for word in words}


def test_irregular_lemmas_are_their_own_stems():
    assert {lemma: stem(lemma) for lemma in IRREGULAR.values()} == {lemma: lemma for lemma in IRREGULAR.values()}


@pytest.mark.parametrize(
    ("verbs", "family"),
    [
        pytest.param(("move", "moved", "moves", "moving"), "live", id="move"),
        pytest.param(("relocate", "relocated", "relocates", "relocating"), "live", id="relocate"),
        pytest.param(("migrate", "migrated", "migrates", "migrating"), "use", id="migrate"),
    ],
)
def test_english_change_markers_name_their_attribute_by_stem(verbs, family):
    assert {verb: MARKER_FAMILIES.get(word_stem(verb)) for verb in verbs} == {verb: {family} for verb in verbs}


@pytest.mark.parametrize(
    ("new", "existing", "quoted"),
    [
        pytest.param("住在重庆", "住在成都", "'成都' -> '重庆'", id="zh-city-whose-last-character-is-a-filler"),
        pytest.param("在重庆工作", "在成都工作", "'成都' -> '重庆'", id="zh-employer-city"),
        pytest.param("开车上班", "骑自行车上班", "'骑自行车' -> '开车'", id="zh-value-of-single-characters"),
        pytest.param("换了新工作，在京东上班", "在美团工作", "'美团' -> '京东'", id="zh-value-after-in"),
        pytest.param("Has three children", "Has two children", "'2' -> '3'", id="number-words-as-digits"),
    ],
)
def test_reason_quotes_whole_words(new, existing, quoted):
    # given two facts that differ in one value, when judged, then the reason names both values whole
    judgement = judge_by_rules(new, existing, similarity=0.5)

    assert judgement.relation == Relation.CONTRADICTS
    assert judgement.reason.endswith(quoted), judgement.reason


def test_a_plan_is_not_a_change():
    # given a home, when the user only plans to move, then the home still holds
    for new, existing in [("Wants to move to Lisbon next year", "Lives in Porto"), ("打算明年搬到杭州", "住在南京")]:
        assert judge_by_rules(new, existing, similarity=0.3).relation != Relation.CONTRADICTS


def test_a_negation_deep_in_a_long_sentence_denies_a_clause_only():
    judgement = judge_by_rules(
        "Encourages Jon to keep pushing for his dreams and not give up",
        "Encourages Jon to keep pushing, assuring him he will reach his dreams",
        similarity=0.8,
    )

    assert judgement.relation != Relation.CONTRADICTS


def test_every_text_a_change_pattern_matches_has_a_change_marker():
    """CHANGE_MARKER lets analyse skip the change patterns: it must be a necessary condition of every one of them,
    on the labelled pairs and on a sentence per marker (English and Chinese)."""
    from facts.judging.analysis import _normalise
    from facts.judging.lexicon import CHANGE_MARKER, CHANGE_PATTERNS

    from .conflict_pairs import PAIRS

    sentences = [
        "Switched from Vim to Emacs", "Moved our database over to Postgres from MySQL", "Replaced Jira with Linear",
        "Left Google and joined Stripe", "Quit the band for a solo career", "The old laptop was replaced by a Mac",
        "Drinks tea instead of coffee", "Takes the train rather than the car", "No longer eats meat, now vegan",
        "Not a manager anymore but an engineer", "Relocated to Berlin", "Now lives in Porto", "Converted to Linux",
        "从上海搬到了北京", "把数据库换成了PostgreSQL", "用Rust代替了C++", "喝茶而不是咖啡", "不再吃肉，现在吃素",
        "改用Linux", "现在住在深圳", "Transitioned to a remote role", "Migrated the blog to Hugo",
    ]  # fmt: skip
    texts = [_normalise(text) for text in [*sentences, *(p.new for p in PAIRS), *(p.existing for p in PAIRS)]]
    changed = [text for text in texts if any(pattern.search(text) for pattern in CHANGE_PATTERNS)]

    assert len(changed) >= len(sentences)  # the patterns do match these
    assert [text for text in changed if not CHANGE_MARKER.search(text)] == []
    assert analyse("Went hiking with friends on Sunday").change is None
    assert analyse("Switched from Vim to Emacs").change is not None
