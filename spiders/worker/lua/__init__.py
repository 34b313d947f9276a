"""Lua scripts of the worker (package data: shipped with non-editable installs too)."""
