"""Lua scripts of the module beside this package (package data: shipped with non-editable installs too)."""
