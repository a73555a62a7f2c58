"""The Chinese statements the offline extractor keeps, in the order they are tried (the specific first)."""

import re

from .patterns import ZH_ADV, ZH_SUBJECT, Pattern, attribute_category

CHINESE_STATEMENTS: tuple[Pattern, ...] = (
    Pattern(
        re.compile(
            f"^(?:请)?(?:一定要|务必)?(?:我们|{ZH_SUBJECT})?(?P<adv>总是|始终|永远不要|绝对不要|永远不|从不|每次|每当)(?P<rest>.+)"
        ),
        lambda m: m["adv"] + m["rest"],
        "procedure",
        0.8,
    ),
    Pattern(
        re.compile(f"^{ZH_SUBJECT}{ZH_ADV}(?P<verb>不喜欢|讨厌|不爱)(?P<rest>.+)"),
        lambda m: m["verb"] + m["rest"],
        "preference",
        0.85,
    ),
    Pattern(
        re.compile(f"^{ZH_SUBJECT}{ZH_ADV}(?P<verb>更喜欢|最喜欢|喜欢|偏好|偏爱|热爱|爱)(?P<rest>.+)"),
        lambda m: m["verb"] + m["rest"],
        "preference",
        0.85,
    ),
    Pattern(
        re.compile(f"^{ZH_SUBJECT}{ZH_ADV}(?:正在|在)?(?P<verb>使用|用)(?P<rest>.+)"),
        lambda m: m["verb"] + m["rest"],
        "preference",
        0.8,
    ),
    Pattern(
        re.compile(f"^{ZH_SUBJECT}{ZH_ADV}(?:住在|居住在|生活在)(?P<rest>.+)"),
        lambda m: "住在" + m["rest"],
        "profile",
        0.85,
    ),
    Pattern(
        re.compile(f"^{ZH_SUBJECT}{ZH_ADV}在(?P<place>.+?)(?P<verb>工作|上班|任职)(?P<rest>.*)"),
        lambda m: f"在{m['place']}{m['verb']}{m['rest']}",
        "profile",
        0.85,
    ),
    Pattern(
        re.compile(f"^{ZH_SUBJECT}(?:叫|名叫|的名字是|的名字叫)(?P<rest>.+)"),
        lambda m: "叫" + m["rest"],
        "profile",
        0.85,
    ),
    Pattern(
        re.compile(f"^{ZH_SUBJECT}{ZH_ADV}(?:今年)?(?P<age>\\d{{1,3}})岁"),
        lambda m: f"{m['age']}岁",
        "profile",
        0.85,
    ),
    Pattern(
        re.compile(f"^{ZH_SUBJECT}的(?P<attribute>[^，,。！？]{{1,15}}?)(?:是|叫)(?P<rest>.+)"),
        lambda m: f"{m['attribute']}是{m['rest']}",
        lambda m: attribute_category(m["attribute"]),
        0.85,
    ),
    Pattern(
        re.compile(f"^{ZH_SUBJECT}是(?!说|不是|在|想|觉得)(?:一[个名位])?(?P<rest>.+)"),
        lambda m: "是" + m["rest"],
        "profile",
        0.8,
    ),
    Pattern(
        re.compile("^(?:我们|我)(?:已经|最终|最后)?(?P<verb>决定|商定|同意|约定|定了)了?(?P<rest>.+)"),
        lambda m: m["verb"] + m["rest"],
        "decision",
        0.85,
    ),
    Pattern(
        re.compile(f"^我们{ZH_ADV}(?:已经)?(?P<verb>不再使用|不再用|不用)(?P<rest>.+)"),
        lambda m: m["verb"] + m["rest"],
        "project",
        0.8,
    ),
    Pattern(
        re.compile(
            f"^我们{ZH_ADV}(?:正在|要|准备|打算|将|会)?(?P<verb>迁移到|换成|改用|转向|切换到|搬到|换到)了?(?P<rest>.+)"
        ),
        lambda m: m["verb"] + m["rest"],
        "project",
        0.8,
    ),
    Pattern(
        re.compile(f"^我们{ZH_ADV}(?:在)?(?P<verb>使用|用|采用)(?P<rest>.+)"),
        lambda m: m["verb"] + m["rest"],
        "project",
        0.8,
    ),
    Pattern(
        re.compile("^我们的(?P<rest>(?:项目|应用|服务|团队|代码库|仓库|后端|前端|产品|公司|系统|数据库).+)"),
        lambda m: m["rest"],
        "project",
        0.8,
    ),
    Pattern(
        re.compile("^我们(?:将|会|要|打算|计划|准备)?(?P<rest>.+)"),
        lambda m: m["rest"],
        "project",
        0.7,
        needs_date=True,
    ),
)
