"""Downloader and spider middlewares of the crawlfleet Scrapy project."""
