"""A small XML tree read with expat, for the EHR files a user hands over.

Kept apart from :mod:`clinieval.ehr.medalign_xml` because it is a different concern: turning bytes
into elements, with the line each one starts on (so a reader's errors can point at it), character
data and child elements kept in document order (a note's text may be interleaved with markup), and
every parser failure, including an unknown encoding in the XML declaration, reported as one
:class:`~clinieval.errors.UserError`. expat is used rather than ElementTree because it gives line
numbers per element and does not fetch external entities.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from xml.parsers import expat

from clinieval.errors import UserError

__all__ = ["XmlNode", "parse_xml_tree"]


@dataclass
class XmlNode:
    """One element: its tag, attributes, the line it starts on, and its content in order."""

    tag: str
    attrib: dict[str, str]
    line: int
    children: list[XmlNode] = field(default_factory=list)
    parts: list[str | XmlNode] = field(default_factory=list)  # character data and children, in order

    def text(self) -> str:
        """All character data inside, children's included (a note or code should have no children)."""
        return "".join(p if isinstance(p, str) else p.text() for p in self.parts)

    def own_text(self) -> str:
        return "".join(p for p in self.parts if isinstance(p, str))


def parse_xml_tree(data: bytes | str, where: str) -> XmlNode:
    """The document's root element; malformed XML is a UserError naming ``where``, line and column."""
    parser = expat.ParserCreate()
    parser.buffer_text = True
    stack: list[XmlNode] = []
    root: list[XmlNode] = []

    def start(tag: str, attrib: dict[str, str]) -> None:
        node = XmlNode(tag, attrib, parser.CurrentLineNumber)
        if stack:
            stack[-1].children.append(node)
            stack[-1].parts.append(node)
        else:
            root.append(node)
        stack.append(node)

    def end(tag: str) -> None:
        stack.pop()

    def chars(data: str) -> None:
        if stack:
            stack[-1].parts.append(data)

    parser.StartElementHandler = start
    parser.EndElementHandler = end
    parser.CharacterDataHandler = chars
    try:
        parser.Parse(data, True)
    except expat.ExpatError as e:
        msg = expat.ErrorString(e.code) if e.code else str(e)
        raise UserError(f"{where}: malformed XML at line {e.lineno}, column {e.offset + 1}: {msg}") from None
    except LookupError as e:  # expat looks up the encoding named by the XML declaration
        raise UserError(f"{where}: malformed XML at line 1: the XML declaration names an {e}") from None
    return root[0]
