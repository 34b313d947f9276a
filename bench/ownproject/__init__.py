"""A plain Scrapy project, as a user writes one, for ``bench.crawl``'s own-project sides (issue 35): its spider
``articles`` (a ``CrawlSpider``) crawls the benchmark's sites under plain ``scrapy crawl`` and on the fleet."""
