"""crawlfleet frontier floor: the cluster protocol that workers and the master share.

Its face is the frontier's client (:mod:`frontier.client`: take, reserve, complete, renew, requeue, robots.txt
records, the ready index), which applies the politeness rules (:mod:`frontier.politeness`); beside it the domain
walk, the site-config watch, the robots.txt cache, the worker registry and its weights, the Bloom filter, and their
Lua. The master (``master/``) leads: it dispatches and finishes; the workers (``spiders/``) take, fetch and complete
through this floor."""
