"""Reports a person reads: Markdown and self-contained HTML rendered from an analysis's JSON.

The JSON is the single source of every number; a report only formats and arranges it, so a
figure in a report can always be traced back to the JSON written beside it.
"""
