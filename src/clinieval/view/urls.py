"""Where each page of a results site lives, so other pages (and reports) can link to it.

The scheme, relative to the site folder ``OUT`` that ``clinieval view`` writes::

    OUT/index.html                   every sample, one row each; row anchor ``#s-<stem>``
    OUT/index.html#arm=A&error=K     the index opened with filters set (see :data:`FILTER_KEYS`)
    OUT/items/<stem>.html            one sample: question, context, answers, scores, verdicts
    OUT/items/<stem>.html#arm-<n>    one arm's answers on that page (n = the arm's position, from 0)
    OUT/items/<stem>.html#scores     the score table of every arm side by side

``<stem>`` is the sample id itself when the id is a plain file name (letters, digits, ``.``, ``_``,
``-``; not starting with ``.``; at most 100 characters), else its slug (``clinieval.fsutil.slug``,
leading dots removed), ``~`` and the first 12 hex digits of the SHA-256 of the id's UTF-8 bytes.
``~`` never occurs in a plain id, so two ids never share a page, and a report that knows a sample
id computes the link with :func:`item_href` alone (or the same rule in any language).
"""

from __future__ import annotations

import hashlib
import re

from clinieval.fsutil import slug

ITEMS = "items"
INDEX = "index.html"

FILTER_KEYS = ("arm", "score", "min", "max", "error", "cat")
"""Keys the index reads from its ``#`` fragment: ``arm`` (arm name), ``score`` (score name),
``min``/``max`` (a score range), ``error`` (an error kind), ``cat`` (``field=value``, URL-encoded)."""

_PLAIN = re.compile(r"^[A-Za-z0-9_-][A-Za-z0-9._-]{0,99}$")


def item_stem(sample_id: str) -> str:
    """The file name (without ``.html``) of a sample's page: see the module's scheme."""
    if _PLAIN.match(sample_id):
        return sample_id
    digest = hashlib.sha256(sample_id.encode("utf-8")).hexdigest()[:12]
    return f"{slug(sample_id).lstrip('.') or 'x'}~{digest}"  # never a hidden file


def item_href(sample_id: str) -> str:
    """A sample's page relative to the site folder: ``items/<stem>.html``."""
    return f"{ITEMS}/{item_stem(sample_id)}.html"


def row_anchor(sample_id: str) -> str:
    """The id of a sample's row in ``index.html``."""
    return f"s-{item_stem(sample_id)}"


def arm_anchor(position: int) -> str:
    """The id of an arm's column on an item page (arms keep the order they were given in)."""
    return f"arm-{position}"
