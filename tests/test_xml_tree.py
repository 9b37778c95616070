"""clinieval.ehr.xml_tree: elements with their line, content in document order, one error line."""

from __future__ import annotations

import pytest

from clinieval.ehr.xml_tree import parse_xml_tree
from clinieval.errors import UserError


def test_elements_keep_their_line_and_content_in_order() -> None:
    root = parse_xml_tree('<record>\n<note type="x">before <b>bold</b> after</note>\n</record>', "f.xml")
    assert (root.tag, root.line) == ("record", 1)
    (note,) = root.children
    assert (note.tag, note.attrib, note.line) == ("note", {"type": "x"}, 2)
    assert note.text() == "before bold after"
    assert note.own_text() == "before  after"
    assert [p if isinstance(p, str) else p.tag for p in note.parts] == ["before ", "b", " after"]


def test_bytes_are_read_with_their_declared_encoding() -> None:
    root = parse_xml_tree('<?xml version="1.0" encoding="latin-1"?><r>caf\xe9</r>'.encode("latin-1"), "f")
    assert root.text() == "café"


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ("<record>\n<visit>\n</record>", r"^f\.xml: malformed XML at line 3, column 3: mismatched tag$"),
        (
            b'<?xml version="1.0" encoding="no-such"?><r/>',
            r"^f\.xml: malformed XML at line 1: the XML declaration",
        ),
    ],
)
def test_malformed_xml_is_one_user_error(data: str | bytes, message: str) -> None:
    with pytest.raises(UserError, match=message):
        parse_xml_tree(data, "f.xml")
