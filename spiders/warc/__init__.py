"""WARC archives of what the workers fetch (warcio; a CDXJ index per file by cdxj-indexer).

- ``files.py``: a worker's files, named ``<prefix>-<timestamp>-<serial>-<job>.warc.gz``, rotated at
  ``CRAWLFLEET_WARC_MAX_SIZE`` bytes, indexed when closed;
- ``writer.py``: the writer thread (records built, digested, gzipped and written off the reactor; duplicates of a
  payload written before as ``revisit`` records);
- ``middleware.py``: the downloader middleware that hands every fetch to it, on when ``CRAWLFLEET_WARC_DIR`` is set.
"""
