"""Deterministic, real-looking news text in English and Chinese.

Every piece of text is drawn from a :class:`random.Random` seeded with a string: Python seeds string seeds
through SHA-512, so the same seed gives the same text on every run and machine, whatever the hash seed.
The phrase banks are fictional (invented towns, people and organisations) so that no page quotes a real story.
All Chinese text is encodable as GBK: the Chinese site is served in GBK.
"""

from __future__ import annotations

import random
import re
from dataclasses import dataclass

__all__ = ["CHINESE", "ENGLISH", "Language", "slugify"]


@dataclass(frozen=True)
class Language:
    """A phrase bank and the rules to assemble headlines, sentences, paragraphs and comments from it."""

    code: str
    subjects: tuple[str, ...]
    verbs: tuple[tuple[str, str, str], ...]  # (in a sentence, in a headline, in a headline after a plural)
    objects: tuple[str, ...]
    settings: tuple[str, ...]
    tails: tuple[str, ...]
    quotes: tuple[str, ...]
    given_names: tuple[str, ...]
    family_names: tuple[str, ...]
    places: tuple[str, ...]
    comments: tuple[str, ...]
    tags: tuple[str, ...]
    words_between: str  # what joins two words ("" in Chinese)
    plural_subjects: frozenset[str] = frozenset()

    def person(self, rng: random.Random) -> str:
        given, family = rng.choice(self.given_names), rng.choice(self.family_names)
        return f"{given} {family}" if self.words_between else f"{family}{given}"

    def headline(self, rng: random.Random) -> str:
        subject = rng.choice(self.subjects)
        _, singular, plural = rng.choice(self.verbs)
        verb = plural if subject in self.plural_subjects else singular
        obj = rng.choice(self.objects)
        if self.words_between:
            # Headline style drops the leading article: "City council approves ...".
            subject = re.sub(r"^(the|a|an) ", "", subject)
            return f"{subject[0].upper()}{subject[1:]} {verb} {obj}"
        return f"{rng.choice(self.places)}{subject}{verb}{obj}"

    def sentence(self, rng: random.Random) -> str:
        subject, verb, obj = rng.choice(self.subjects), rng.choice(self.verbs)[0], rng.choice(self.objects)
        setting, tail = rng.choice(self.settings), rng.choice(self.tails)
        if self.words_between:
            text = f"{subject} {verb} {obj} {setting}, {tail}."
            return text[0].upper() + text[1:]
        return f"{setting}{rng.choice(self.places)}{subject}{verb}{obj}，{tail}。"

    def quote(self, rng: random.Random) -> str:
        return rng.choice(self.quotes).format(person=self.person(rng), org=rng.choice(self.subjects),
                                              place=rng.choice(self.places))

    def paragraph(self, rng: random.Random) -> str:
        parts = [self.sentence(rng) for _ in range(rng.randint(2, 4))]
        if rng.random() < 0.35:
            parts.insert(rng.randint(1, len(parts)), self.quote(rng))
        return self.words_between.join(parts)

    def comment(self, rng: random.Random) -> str:
        return rng.choice(self.comments)


def _english_verbs(*pairs: tuple[str, str]) -> tuple[tuple[str, str, str], ...]:
    """(past, present) pairs -> (past, present after a singular subject, present after a plural one)."""
    return tuple((past, present, present.removesuffix("es" if present.endswith("ches") else "s"))
                 for past, present in pairs)


def slugify(text: str, limit: int = 60) -> str:
    """A URL slug of an English headline: lower case, ASCII letters and digits joined by hyphens."""
    slug = re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")
    if len(slug) <= limit:
        return slug
    return slug[:limit + 1].rsplit("-", 1)[0]  # cut at a word boundary


ENGLISH = Language(
    code="en",
    subjects=(
        "the city council", "regional officials", "a coalition of small businesses",
        "researchers at the Northfield Institute", "the transport ministry", "local residents",
        "the central bank", "union representatives", "the harbour authority", "a group of parents",
        "the health board", "opposition members", "the university", "emergency services", "the water company",
        "farmers in the valley", "the planning committee", "independent auditors", "the tourism office",
        "a panel of experts",
    ),
    verbs=_english_verbs(
        ("approved", "approves"), ("announced", "announces"), ("criticized", "criticizes"),
        ("postponed", "postpones"), ("unveiled", "unveils"), ("backed", "backs"), ("questioned", "questions"),
        ("rejected", "rejects"), ("expanded", "expands"), ("reviewed", "reviews"), ("launched", "launches"),
        ("defended", "defends"), ("proposed", "proposes"), ("welcomed", "welcomes"), ("opposed", "opposes"),
        ("finalized", "finalizes"),
    ),
    objects=(
        "a plan to extend the tram network", "new rules on short-term rentals", "a budget for flood defences",
        "a pilot scheme for free school meals", "plans for a new riverside park",
        "a review of hospital waiting times", "an overhaul of the bus timetable",
        "a tax break for first-time buyers", "stricter limits on night-time noise",
        "a proposal to close two branch libraries", "a study of air quality near schools",
        "a ten-year housing strategy", "funding for a solar farm", "a ban on single-use packaging at markets",
        "a new cycle lane along the seafront", "changes to parking charges", "a report on youth unemployment",
        "an agreement with neighbouring towns", "plans to restore the old mill", "a trial of four-day weeks",
    ),
    settings=(
        "after months of debate", "despite objections from campaigners", "in a vote on Tuesday",
        "at a packed public meeting", "following a consultation", "ahead of the winter season",
        "for the second time this year", "in a statement on Monday", "after a lengthy review",
        "at the request of residents", "earlier this week", "on Thursday evening",
    ),
    tails=(
        "citing rising costs", "saying the change was overdue", "although details remain unclear",
        "with work expected to start next spring", "a move that surprised many observers",
        "according to documents seen by this newspaper", "while critics called it a half-measure",
        "with a final decision due next month", "as pressure on public finances grows",
        "after a sharp rise in complaints", "in line with national guidance", "to mixed reactions",
    ),
    quotes=(
        "\u201cWe expect the first results within a year,\u201d said {person}, a spokesperson for {org}.",
        "\u201cThis is a good day for {place},\u201d {person} told reporters.",
        "\u201cNobody asked the people who actually live here,\u201d said {person}, who has lived in {place} "
        "for twenty years.",
        "{person}, who chairs {org}, said the figures \u201cspeak for themselves\u201d.",
        "\u201cWe will keep listening,\u201d {person} said in a written statement.",
    ),
    given_names=("Anna", "Ben", "Clara", "David", "Elena", "Farid", "Grace", "Hugo", "Ines", "James", "Kofi",
                 "Laura", "Maya", "Noah", "Olivia", "Priya", "Rosa", "Samuel", "Tom", "Yusuf"),
    family_names=("Archer", "Bennett", "Carvalho", "Dunmore", "Ellison", "Fairley", "Gallagher", "Hartley",
                  "Iqbal", "Jensen", "Kowalski", "Lindqvist", "Moreau", "Nakamura", "Okafor", "Petrov"),
    places=("Northfield", "Easton Harbour", "Millbrook", "Port Adley", "Ravensmoor", "Kingsbridge",
            "Ashcombe", "Highvale", "Westerby", "Larkhill"),
    comments=(
        "About time. This should have happened years ago.", "Who is going to pay for all of this?",
        "Great reporting, thank you.", "I was at the meeting and it was chaos.", "Same old promises.",
        "Does anyone know when the consultation closes?", "My street has been waiting for this for ages.",
        "Interesting, but the article leaves out the cost.", "Finally some good news.",
        "I'll believe it when I see it.",
    ),
    tags=("politics", "transport", "housing", "environment", "economy", "education", "health", "local",
          "business", "culture"),
    words_between=" ",
    plural_subjects=frozenset({
        "regional officials", "local residents", "union representatives", "opposition members",
        "emergency services", "farmers in the valley", "independent auditors",
        "researchers at the Northfield Institute",
    }),
)

CHINESE = Language(
    code="zh",
    subjects=(
        "市政府", "省教育厅", "统计部门", "多家科技企业", "专家学者", "当地居民", "交通运输部门", "研究团队",
        "人民银行分行", "消费者协会", "文化和旅游局", "生态环境部门", "农业农村部门", "卫生健康委员会",
        "市场监管部门", "住房和城乡建设部门",
    ),
    verbs=tuple((verb, verb.removesuffix("了"), verb.removesuffix("了")) for verb in (
        "发布了", "宣布启动", "正式推出", "审议通过了", "召开会议研究", "公布了", "部署推进", "印发了",
    )),
    objects=(
        "新一轮城市更新计划", "关于促进消费的若干措施", "年度经济运行数据", "乡村振兴重点项目",
        "新能源汽车推广方案", "中小学课后服务办法", "老旧小区改造清单", "数字政府建设规划",
        "冬季供暖保障方案", "夜间经济发展意见", "科技创新扶持政策", "养老服务体系建设方案",
        "河道综合治理工程", "旅游市场整治行动", "粮食生产支持措施", "住房公积金新政",
    ),
    settings=("近日，", "记者从有关部门获悉，", "据悉，", "本周二，", "日前，", "今年以来，", "截至目前，",
              "据了解，"),
    tails=(
        "相关工作将于下月全面展开", "这一举措受到社会各界广泛关注", "预计惠及群众超过十万人",
        "有关负责人表示将持续跟踪落实情况", "专家认为此举有利于稳定市场预期", "各区县已陆续制定实施细则",
        "下一步还将进一步扩大试点范围", "市民可通过官方网站查询具体内容", "项目总投资约十二亿元",
        "计划于年底前全部完成",
    ),
    quotes=(
        "“我们将把好事办好、实事办实。”{org}负责人{person}说。",
        "{person}表示：“这项工作事关{place}群众切身利益，必须抓紧抓好。”",
        "在{place}生活了二十多年的居民{person}说：“这些变化大家都看在眼里。”",
        "{org}相关负责人{person}介绍，目前各项准备工作已基本就绪。",
    ),
    given_names=("伟", "芳", "娜", "敏", "静", "磊", "洋", "艳", "勇", "军", "杰", "娟", "涛", "明", "超",
                 "秀英", "建华", "志强", "晓东", "海燕"),
    family_names=("王", "李", "张", "刘", "陈", "杨", "黄", "赵", "吴", "周", "徐", "孙", "马", "朱", "胡"),
    places=("北京", "上海", "广州", "成都", "杭州", "武汉", "西安", "南京", "重庆", "青岛"),
    comments=(
        "支持！希望尽快落实。", "这个政策好，点赞。", "什么时候能轮到我们小区？", "说得好，但关键看执行。",
        "已转发给家里人看了。", "希望多报道一些后续进展。", "感谢记者的深入报道。", "具体怎么申请呢？",
        "期待早日见到成效。", "这才是老百姓关心的事。",
    ),
    tags=("时政", "经济", "民生", "科技", "教育", "文化", "社会", "环保", "交通", "健康"),
    words_between="",
)
