"""The list spider's rule (seed 4.3.1.3, table 4-9): list pages of entries, each entry maybe with a detail page.

A rule::

    {"first_page_xpath": {"list_from": "//ul[@class='news']/li",      # the entries of a list page
                          "second_page_url": "a/@href",               # an entry's detail link (relative XPath)
                          "next_page": "//a[@class='next']/@href",    # the next list page(s), on the whole page
                          "continue": true,                           # follow detail links (default true)
                          "title": "a/text()", ...},                  # user fields, relative to the entry
     "second_page_xpath": {"body": "//div[@id='text']", ...},         # user fields of the detail page
     "required": ["title", "body"]}

On a list page (:meth:`ListRule.parse_list`) every entry's user fields are evaluated relative to the entry. An entry
with a detail link, when ``continue`` is not false, becomes ``Link(detail_url, "detail", meta=entry_fields)`` and no
item: its item is made on the detail page (:meth:`ListRule.parse_detail`) from the carried list fields and the
``second_page_xpath`` fields (a detail field found on the page wins over a carried one of the same name), as the
seed's ``parse_inform_detail`` does. Any other entry is an item of the list page, with ``detail_url`` when it has a
detail link. Entries with neither fields nor a detail link (separator rows, like the ``<hr/>`` row of the seed's
figure 4-22) are skipped. ``next_page`` links are ``Link(url, "list")``; a link to the page itself is left out.
"""

from __future__ import annotations

from typing import Any

from lxml import etree
from scrapy.http import Response

from spiders.rules.fields import FieldSet, FieldXPath, Link, LinkMaker, PageResult, RuleError, link_values, page_root

LIST = "list"
DETAIL = "detail"
DETAIL_URL_FIELD = "detail_url"  # an item made on a list page carries its entry's detail link under this name
RESERVED = frozenset(("list_from", "continue", "second_page_url", "next_page"))


class ListRule:
    """A list crawl's rule, compiled once per crawl; ``parse_list``/``parse_detail`` per page."""

    def __init__(self, list_from: FieldXPath, entry_fields: FieldSet, detail_link: FieldXPath | None,
                 next_page: FieldXPath | None, follow_details: bool, detail_fields: FieldSet,
                 required: tuple[str, ...] = (), ignore_robots_meta: bool = False):
        self.list_from = list_from
        self.entry_fields = entry_fields
        self.detail_link = detail_link
        self.next_page = next_page
        self.follow_details = follow_details
        self.detail_fields = detail_fields
        self.required = required
        self.ignore_robots_meta = ignore_robots_meta  # rel="nofollow" links, meta robots, X-Robots-Tag

    @classmethod
    def from_json(cls, rule: dict[str, Any]) -> ListRule:
        """The rule of a crawl request (already valid against ``rule-list.json``); RuleError if it cannot be built."""
        try:
            first = rule["first_page_xpath"]
            list_from = FieldXPath("first_page_xpath.list_from", first["list_from"])
        except (KeyError, TypeError) as exc:
            raise RuleError(f"a list rule needs first_page_xpath.list_from ({exc!r})") from exc
        detail_link = first.get("second_page_url")
        next_page = first.get("next_page")
        return cls(
            list_from=list_from,
            entry_fields=FieldSet("first_page_xpath",
                                  {name: xpath for name, xpath in first.items() if name not in RESERVED}),
            detail_link=FieldXPath("first_page_xpath.second_page_url", detail_link) if detail_link else None,
            next_page=FieldXPath("first_page_xpath.next_page", next_page) if next_page else None,
            follow_details=first.get("continue", True) is not False,
            detail_fields=FieldSet("second_page_xpath", rule.get("second_page_xpath") or {}),
            required=tuple(rule.get("required") or ()),
            ignore_robots_meta=rule.get("ignore_robots_meta") is True,
        )

    def parse_list(self, response: Response) -> PageResult:
        """A list page: entries (items or detail links) and the next list page(s)."""
        result = PageResult()
        root = page_root(response, result.errors)
        if root is None:
            return result
        links = LinkMaker(response)
        entries = self.list_from.evaluate(root, result.errors)
        skipped = 0
        for entry in entries:
            if not isinstance(entry, etree._Element):
                skipped += 1
                continue
            self._parse_entry(entry, links, result)
        if skipped:
            result.errors.append(f"first_page_xpath.list_from: {skipped} result(s) are no elements (text, "
                                 "attributes or numbers); list entries must be elements")
        if self.next_page is not None:
            # A pagination block often links to the page itself ("1 2 [3] 4"): never worth a task.
            links.seen.add(links.absolute(response.url) or response.url)
            obey = not self.ignore_robots_meta
            for value in link_values(self.next_page.evaluate(root, result.errors), obey, result):
                url = links.new(value)
                if url is not None:
                    result.links.append(Link(url, LIST, {}))
        return result

    def _parse_entry(self, entry: etree._Element, links: LinkMaker, result: PageResult) -> None:
        fields = self.entry_fields.extract(entry, result.errors)
        detail_url = None
        if self.detail_link is not None:
            values = link_values(self.detail_link.evaluate(entry, result.errors), not self.ignore_robots_meta, result)
            for value in values:
                detail_url = links.absolute(value)
                if detail_url is not None:
                    break
        if detail_url is not None and self.follow_details:
            # Two entries pointing at one detail page make one task (and one item): the first entry's fields.
            if detail_url not in links.seen:
                links.seen.add(detail_url)
                result.links.append(Link(detail_url, DETAIL, fields))
            return
        if detail_url is not None:
            fields.setdefault(DETAIL_URL_FIELD, detail_url)
        if fields:
            result.items.append(fields)

    def parse_detail(self, response: Response, carried: dict[str, Any]) -> PageResult:
        """A detail page: one item, the carried list-page fields updated with the detail fields found here."""
        result = PageResult()
        root = page_root(response, result.errors)
        if root is None:
            return result
        item = dict(carried or {})
        item.update(self.detail_fields.extract(root, result.errors))
        result.items.append(item)
        return result
