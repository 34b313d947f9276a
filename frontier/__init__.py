"""crawlfleet frontier floor: the cluster protocol that workers and the master share.

The politeness step, the domain walk, the site-config watch, the robots.txt cache, the worker registry and its
weights, the Bloom filter, and their Lua scripts. The master (``master/``) leads: it dispatches and finishes; the
workers (``spiders/``) take, fetch and complete through this floor."""
