"""Undoing an answer's Content-Encoding: gzip, deflate and brotli (``br``), which the client asks for.

A reverse proxy (nginx's ``gzip on``, a CDN's brotli) or an API gateway compresses JSON whenever the
request says it may, and some do even when it does not; a client that cannot read them fails every
call. The decoder is bounded (:data:`MAX_DECODED`), since a compressed body can expand a thousandfold.
Brotli is Google's own binding (the ``brotli`` package, a dependency), imported on the first ``br``
answer only.
"""

from __future__ import annotations

import zlib

MAX_DECODED = 256 * 1024 * 1024
"""The largest body a compressed answer may decode to: an API answer is kilobytes; more is a
decompression bomb or a misrouted download, and either would exhaust memory."""


ACCEPT_ENCODING = "gzip, deflate, br"
"""What the client's ``Accept-Encoding`` offers: every coding :func:`decode_body` reads."""


class UndecodableBody(Exception):
    """What was wrong with an encoded body (the connection adds where it came from)."""


def decode_body(body: bytes, encoding: str) -> bytes:
    """``body`` with its Content-Encoding undone (gzip, deflate, br, identity; listed in the order applied).

    An empty body stays empty: a 204, a 304 or an answer to HEAD carries the header of the content it
    would have had, not a compressed nothing."""
    if not body:
        return body
    for coding in reversed([c.strip().lower() for c in encoding.split(",") if c.strip()]):
        if coding in {"gzip", "x-gzip"}:
            body = _inflate(body, 16 + zlib.MAX_WBITS, "gzip")
        elif coding == "deflate":
            # RFC 9110's deflate is zlib-wrapped; some servers send the raw stream, as browsers accept
            try:
                body = _inflate(body, zlib.MAX_WBITS, "deflate")
            except UndecodableBody:
                body = _inflate(body, -zlib.MAX_WBITS, "deflate")
        elif coding == "br":
            body = _unbrotli(body)
        elif coding != "identity":
            raise UndecodableBody(
                f"a body encoded as {coding!r}, which clinieval does not decode "
                f"(it asks for {ACCEPT_ENCODING})"
            )
    return body


def _inflate(data: bytes, wbits: int, name: str) -> bytes:
    inflater = zlib.decompressobj(wbits)
    try:
        out = inflater.decompress(data, MAX_DECODED)
    except zlib.error as e:
        raise UndecodableBody(f"a {name} body that cannot be decoded ({e})") from None
    if inflater.unconsumed_tail:
        raise UndecodableBody(f"a {name} body that decodes to more than {MAX_DECODED // 2**20} MiB")
    if not inflater.eof:
        raise UndecodableBody(f"a {name} body that is cut short")
    return out


def _unbrotli(data: bytes) -> bytes:
    """A brotli body decoded, bounded as :func:`_inflate` bounds the others."""
    import brotli  # lazily: only a server that chose ``br`` needs it

    decoder = brotli.Decompressor()
    try:
        out: bytes = decoder.process(data, output_buffer_limit=MAX_DECODED + 1)
    except brotli.error as e:
        raise UndecodableBody(f"a br body that cannot be decoded ({e})") from None
    if len(out) > MAX_DECODED:
        raise UndecodableBody(f"a br body that decodes to more than {MAX_DECODED // 2**20} MiB")
    if not decoder.is_finished():
        raise UndecodableBody("a br body that is cut short")
    return out
