"""Labelled pairs for the offline judge's conflict detection: (new fact, existing fact) of one user, in English and
Chinese, written from what users say, not from what the rules catch. Shared by tests/facts/test_conflict_pairs.py
(each pair asserts its relation) and bench/conflicts.py (detection and false-conflict rates).

Contradiction kinds: a negation ("does not have a dog"), a changed value ("morning" -> "evening"), an explicit
replacement ("moved to", "switched from"), an exclusive state that another value ends (job, diet, relationship),
a count ("two children" -> "three children"). Not-a-conflict kinds: compatible facts that both hold (two allergies,
a city of birth and one of residence), and rewordings of one fact (duplicates).

A pair the rules still miss carries `xfail`: the reason it is missed. The test marks it xfail(strict=True), so the
table stays honest and fixing the rule flips it.
"""

import re
from dataclasses import dataclass

from core.text import CJK

_CJK_CHAR = re.compile(f"[{CJK}]")

CONTRADICTION_KINDS = ("negation", "value", "replacement", "exclusive", "count")
NOT_CONFLICT_KINDS = ("compatible", "rewording")


@dataclass(frozen=True)
class Pair:
    new: str
    existing: str
    kind: str
    xfail: str = ""  # why the rules still miss it; empty when they judge it right
    batch: str = "first"  # "second": written once the rules caught the first batch (see below)

    @property
    def contradiction(self) -> bool:
        return self.kind in CONTRADICTION_KINDS

    @property
    def language(self) -> str:
        return "zh" if _CJK_CHAR.search(self.new + self.existing) else "en"


def _pairs(kind: str, *rows: tuple[str, str] | tuple[str, str, str], batch: str = "first") -> list[Pair]:
    return [Pair(row[0], row[1], kind, *row[2:], batch=batch) for row in rows]


def _second(kind: str, *rows: tuple[str, str] | tuple[str, str, str]) -> list[Pair]:
    return _pairs(kind, *rows, batch="second")


PAIRS: list[Pair] = [
    # --- contradictions, English ---
    *_pairs(
        "negation",
        ("Does not have a dog", "Has a dog named Rex"),
        ("No longer drinks coffee", "Drinks coffee every morning"),
        ("Quit smoking last year", "Smokes a pack a day"),
        ("Has a cat", "Has no pets"),
        ("Dislikes spicy food", "Loves spicy food"),
        ("Stopped running because of a knee injury", "Runs 10 km every Sunday"),
        ("Doesn't own a car anymore", "Owns a Honda Civic", "needs to know a Honda Civic is a car"),
        ("Is not vegetarian anymore", "Is vegetarian"),
        ("Does not play the piano", "Plays the piano"),
        ("Never uses Windows", "Uses Windows at work"),
    ),
    *_pairs(
        "value",
        ("Prefers evening appointments now", "Prefers morning appointments"),
        ("Lives in Valencia now", "Lives in Madrid"),
        ("Is 35 years old", "Is 34 years old"),
        ("Favourite color is green", "Favourite color is blue"),
        ("Goes to bed at 11pm", "Goes to bed at 9pm"),
        ("Works at a startup called Finlo", "Works at Stripe"),
        ("Commutes by bike", "Commutes by car"),
        ("The budget for the trip is $3000", "The budget for the trip is $2000"),
        ("Studies at Stanford", "Studies at MIT"),
        ("Prefers coffee over tea", "Prefers tea over coffee"),
        ("Her daughter is 7", "Her daughter is 6"),
        ("Wakes up at 5am", "Wakes up at 7am"),
    ),
    *_pairs(
        "replacement",
        ("Moved to Seattle", "Lives in Portland"),
        ("Switched from Android to an iPhone", "Uses an Android phone"),
        ("Left Google and joined Microsoft", "Works at Google"),
        ("Uses PyCharm instead of VS Code", "Uses VS Code as the editor"),
        ("Replaced the Kindle with a Kobo", "Reads on a Kindle"),
        ("Changed the team standup to 10am", "The team standup is at 9am"),
        ("Relocated to Austin for the new job", "Lives in Denver"),
    ),
    *_pairs(
        "exclusive",
        ("Works as a nurse", "Works as a teacher"),
        ("Is a data scientist", "Is a software engineer"),
        ("Is divorced", "Is married to Sarah"),
        ("Is engaged to Tom", "Is single"),
        ("Is vegan", "Is vegetarian"),
        ("Is retired", "Works as an accountant"),
        ("Is a high school teacher", "Is a university lecturer"),
        ("Is a pescatarian", "Is vegan"),
    ),
    *_pairs(
        "count",
        ("Has three children", "Has two children"),
        ("Has one brother", "Has two brothers"),
        ("Has 4 cats", "Has 3 cats"),
        ("Speaks five languages", "Speaks three languages"),
        ("Runs twice a week", "Runs three times a week"),
    ),
    # --- contradictions, Chinese ---
    *_pairs(
        "negation",
        ("不养狗了", "养了一只狗"),
        ("不再喜欢爬山了", "喜欢爬山"),
        ("不喜欢吃辣", "很喜欢吃辣"),
        ("不会开车", "每天开车上班"),
        ("戒烟了", "每天抽烟"),
        ("不喝咖啡了", "每天早上喝咖啡"),
        ("没有宠物", "养了一只猫"),
    ),
    *_pairs(
        "value",
        ("现在住在上海", "住在北京"),
        ("在腾讯工作", "在阿里巴巴工作"),
        ("今年32岁", "今年31岁"),
        ("最喜欢的颜色是红色", "最喜欢的颜色是蓝色"),
        ("更喜欢晚上开会", "更喜欢早上开会"),
        ("女儿八岁", "女儿七岁"),
        ("喜欢喝茶而不是咖啡", "喜欢喝咖啡而不是茶"),
        ("每天晚上十二点睡觉", "每天晚上十点睡觉"),
    ),
    *_pairs(
        "replacement",
        ("搬到重庆了", "住在成都"),
        ("跳槽到字节跳动了", "在百度上班"),
        ("改用iPhone了", "用的是华为手机"),
        ("从上海搬到了深圳", "住在上海"),
        ("把早会改到了十点", "早会在九点"),
    ),
    *_pairs(
        "exclusive",
        ("是大学老师", "是一名中学老师"),
        ("已经离婚了", "已婚"),
        ("结婚了", "是单身"),
        ("是产品经理", "是软件工程师"),
        ("开始吃素了", "每天都吃肉"),
        ("退休了", "在银行工作"),
        ("开车上班", "骑自行车上班"),
    ),
    *_pairs(
        "count",
        ("有三个孩子", "有两个孩子"),
        ("有一个弟弟", "有两个弟弟"),
        ("养了3只猫", "养了2只猫"),
        ("每周健身四次", "每周健身两次"),
    ),
    # --- not conflicts, English ---
    *_pairs(
        "compatible",
        ("Is allergic to shellfish", "Is allergic to peanuts"),
        ("Drinks tea in the afternoon", "Drinks coffee in the morning"),
        ("Was born in Lyon", "Lives in Paris"),
        ("Likes painting", "Likes hiking"),
        ("Is working on a billing migration project", "Prefers PostgreSQL"),
        ("Has a cat named Miso", "Has a dog named Rex"),
        ("Has a daughter", "Has a son"),
        ("Plays the guitar", "Plays tennis on weekends"),
        ("Speaks Spanish", "Speaks French"),
        ("Uses Vim for Python", "Uses VS Code for TypeScript"),
        ("Used to work at Amazon", "Works at Google"),
        ("Visited Japan in 2019", "Visited Italy in 2022"),
        ("Her son is named Leo", "Her husband is named David"),
        ("Prefers window seats on flights", "Prefers morning appointments"),
        ("Works in Potsdam", "Lives in Berlin"),
        ("Does not eat pork", "Eats chicken"),
        ("Has two cats", "Has two children"),
        ("Her brother lives in Toronto", "Lives in Chicago"),
        ("Wants to move to Lisbon next year", "Lives in Porto"),
        ("Is a software engineer", "Is a father of two"),
        ("Is learning Korean", "Speaks Japanese"),
    ),
    *_pairs(
        "rewording",
        ("Owns a dog called Rex", "Has a dog named Rex"),
        ("Teaches at a high school", "Is a high school teacher"),
        ("Lives in Valencia", "Moved to Valencia"),
        ("Has 2 kids", "Has two children"),
        ("Prefers meetings in the morning", "Prefers morning appointments"),
        ("Is married to Sarah", "Her wife is Sarah"),
        ("Doesn't drink alcohol", "Never drinks alcohol"),
        ("Is a vegetarian", "Is vegetarian"),
    ),
    # --- not conflicts, Chinese ---
    *_pairs(
        "compatible",
        ("对花生过敏", "对海鲜过敏"),
        ("下午喝茶", "早上喝咖啡"),
        ("出生在成都", "住在重庆"),
        ("喜欢画画", "喜欢爬山"),
        ("在做一个支付系统重构项目", "偏好PostgreSQL"),
        ("养了一只猫", "养了一条狗"),
        ("有一个女儿", "有一个儿子"),
        ("会说日语", "会说英语"),
        ("以前在百度工作", "在腾讯工作"),
        ("去年去过日本", "前年去过泰国"),
        ("不吃猪肉", "喜欢吃鸡肉"),
        ("弟弟住在北京", "住在上海"),
        ("打算明年搬到杭州", "住在南京"),
        ("周末打羽毛球", "每天早上跑步"),
        ("老家是湖南的", "在深圳工作"),
        ("是中学老师", "有两个孩子"),
    ),
    *_pairs(
        "rewording",
        ("是中学老师", "是一名中学老师"),
        ("有一条狗叫旺财", "养了一只狗叫旺财"),
        ("有2个孩子", "有两个孩子"),
        ("住在重庆", "搬到重庆了"),
        ("从不喝酒", "不喝酒"),
        ("在北京生活", "住在北京"),
    ),
]


# Written once the rules caught the first batch, to see how they do on pairs they were not tuned on: 19 of its 32
# contradictions were caught then (0.59), 0 of 24 compatible pairs flagged. The rules were tuned on it afterwards, so
# its figure now is no longer a held-out one; the bench still prints it apart.
PAIRS += [
    *_second(
        "negation",
        ("Has no siblings", "Has an older sister"),
        ("Doesn't drink alcohol anymore", "Drinks a glass of wine with dinner"),
        ("Gave up coffee", "Drinks three coffees a day"),
        ("Is no longer with Anna", "Is dating Anna"),
        ("不再用Windows了", "用Windows办公"),
        ("从不吃早饭", "每天都吃早饭"),
        ("不养猫了", "养了两只猫"),
    ),
    *_second(
        "value",
        ("Is now based in Toronto", "Lives in Montreal"),
        ("Works at Shopify now", "Works for Amazon"),
        ("Is 41", "Is 40 years old"),
        ("Drives a Toyota now", "Drives a BMW"),
        ("Prefers Python over Java", "Prefers Java over Python"),
        ("现在住在杭州", "在上海生活"),
        ("今年40岁了", "今年39岁"),
        ("更喜欢用Vim", "更喜欢用Emacs"),
    ),
    *_second(
        "replacement",
        ("Moved back to London", "Lives in Berlin"),
        ("Uses Linux instead of macOS", "Uses macOS"),
        ("Sold the house and rents a flat", "Owns a house"),
        ("Has moved to the night shift", "Works the day shift", "'moved to' names a home, not a shift"),
        ("搬去了广州", "住在武汉"),
        ("换了新工作，在京东上班", "在美团工作"),
    ),
    *_second(
        "exclusive",
        ("Is a widow", "Is married to John"),
        ("Usually takes the train to work", "Drives to work"),
        ("Is now a manager", "Is a software developer"),
        ("Started eating meat again", "Is vegetarian"),
        ("辞职了", "在华为工作"),
        ("是护士", "是医生"),
        ("改吃素了", "喜欢吃牛肉"),
        ("分手了", "有女朋友"),
    ),
    *_second(
        "count",
        ("Has four grandchildren", "Has three grandchildren"),
        ("有了第二个孩子", "有一个孩子"),
        ("每周跑步三次", "每周跑步一次"),
    ),
    *_second(
        "compatible",
        ("Is allergic to cats", "Has a dog"),
        ("Lives in Berlin", "Grew up in Munich"),
        ("Likes jazz", "Likes classical music"),
        ("Has a sister", "Has a brother"),
        ("Works on the payments team", "Works at Stripe"),
        ("Drinks green tea", "Does not drink coffee"),
        ("Is a software engineer", "Is a mother of three"),
        ("Goes to the gym at 7am", "Wakes up at 6am"),
        ("Uses Slack at work", "Uses WhatsApp with family"),
        ("Married in 2015", "Has two kids"),
        ("Is vegetarian", "Likes Italian food"),
        ("Speaks German at home", "Speaks English at work"),
        ("对猫过敏", "养了一条狗"),
        ("在北京出生", "在上海工作"),
        ("喜欢听爵士乐", "喜欢古典音乐"),
        ("有一个姐姐", "有一个哥哥"),
        ("早上喝豆浆", "晚上喝牛奶"),
        ("是程序员", "是两个孩子的妈妈"),
        ("周末去钓鱼", "周末去爬山"),
        ("用微信和家人联系", "用钉钉办公"),
    ),
    *_second(
        "rewording",
        ("Resides in Lisbon", "Lives in Lisbon"),
        ("Is a vegan", "Follows a vegan diet"),
        ("现在在上海住", "住在上海"),
        ("有一个7岁的女儿", "女儿七岁"),
    ),
]
