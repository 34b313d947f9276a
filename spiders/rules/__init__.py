"""Pure rule logic of the two rule-driven spiders (seed 4.3.1.3): no Redis, no Scrapy engine.

A crawl's rule JSON (already valid against ``messaging/schemas/rule-list.json`` or ``rule-universal.json``) becomes a
:class:`ListRule` or :class:`UniversalRule` once per crawl; the spiders in :mod:`spiders.spiders` call it per response
and get a :class:`PageResult`: items (user fields only), :class:`Link` s to follow and the rule's failures on the page
(to log and count; nothing here raises on a page). :mod:`spiders.rules.fields` holds what both share.
"""

from spiders.rules.fields import Link, PageResult, RuleError
from spiders.rules.list_rule import DETAIL, DETAIL_URL_FIELD, LIST, ListRule
from spiders.rules.universal_rule import RULE_PREFIX, SITEMAP, START, UniversalRule, rule_callback

__all__ = [
    "DETAIL",
    "DETAIL_URL_FIELD",
    "LIST",
    "RULE_PREFIX",
    "SITEMAP",
    "START",
    "Link",
    "ListRule",
    "PageResult",
    "RuleError",
    "UniversalRule",
    "rule_callback",
]
