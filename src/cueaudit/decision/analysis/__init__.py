"""The decision audit's analyses: every one reads the three frames of :mod:`.frames` and
returns a table; :mod:`.outputs` writes them for the workflow's rules."""
