"""The literals of the .proto language as proto-schema-parser hands them over: a string literal's
body with its escapes as written (`unescape` gives its bytes; `escape_bytes`/`escape_text` write
them back as protoc's CEscape does), integers that may still be hex or octal text (`parse_int`).
Shared by the normalized printer (protobuf_model) and the descriptor conversion. Pure.
"""

from __future__ import annotations

import re

__all__ = ["escape_bytes", "escape_text", "parse_int", "quoted", "unescape"]


_SIMPLE_ESCAPES = {
    "n": 10, "r": 13, "t": 9, "a": 7, "b": 8, "f": 12, "v": 11,
    "\\": 92, "'": 39, '"': 34, "?": 63,
}


def unescape(raw: str) -> bytes:
    """The bytes of a .proto string literal's body as written (escapes kept by the parser)."""
    out = bytearray()
    i, n = 0, len(raw)
    while i < n:
        c = raw[i]
        if c != "\\" or i + 1 == n:
            out += c.encode("utf-8")
            i += 1
            continue
        e = raw[i + 1]
        if e in _SIMPLE_ESCAPES:
            out.append(_SIMPLE_ESCAPES[e])
            i += 2
        elif e in "xX":
            m = re.match(r"[0-9A-Fa-f]{1,2}", raw[i + 2 :])
            if m:
                out.append(int(m.group(), 16))
                i += 2 + len(m.group())
            else:
                out.append(ord(e))
                i += 2
        elif e in "01234567":
            m = re.match(r"[0-7]{1,3}", raw[i + 1 :])
            assert m is not None
            out.append(int(m.group(), 8) & 0xFF)
            i += 1 + len(m.group())
        elif e in "uU":
            width = 4 if e == "u" else 8
            digits = raw[i + 2 : i + 2 + width]
            if len(digits) == width and all(d in "0123456789abcdefABCDEF" for d in digits):
                code = int(digits, 16)
                out += chr(code).encode("utf-8", "surrogatepass") if code <= 0x10FFFF else b"?"
                i += 2 + width
            else:
                out.append(ord(e))
                i += 2
        else:
            out += e.encode("utf-8")
            i += 2
    return bytes(out)


def escape_bytes(data: bytes) -> str:
    """protoc's CEscape: printable ASCII as is, the rest as octal escapes."""
    out: list[str] = []
    for b in data:
        if b == 10:
            out.append("\\n")
        elif b == 13:
            out.append("\\r")
        elif b == 9:
            out.append("\\t")
        elif b in (34, 39, 92):
            out.append("\\" + chr(b))
        elif 32 <= b < 127:
            out.append(chr(b))
        else:
            out.append(f"\\{b:03o}")
    return "".join(out)


def escape_text(text: str) -> str:
    """A string for a .proto literal: printable non-ASCII characters kept, the rest escaped."""
    out: list[str] = []
    for c in text:
        if ord(c) >= 128 and c.isprintable():
            out.append(c)
        else:
            out.append(escape_bytes(c.encode("utf-8", "surrogatepass")))
    return "".join(out)


def parse_int(value: object) -> int:
    if isinstance(value, bool):
        raise TypeError(value)
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, str):
        text = value.strip()
        sign = -1 if text.startswith("-") else 1
        body = text.lstrip("+-")
        if body.lower().startswith("0x"):
            return sign * int(body, 16)
        if len(body) > 1 and body.startswith("0"):
            return sign * int(body, 8)
        return sign * int(body)
    raise ValueError(value)


def quoted(raw: str) -> str:
    """A string literal (its body as the parser keeps it) written canonically: double quotes, the
    characters protoc escapes escaped, printable non-ASCII kept, bytes that are not UTF-8 in octal."""
    text = unescape(raw).decode("utf-8", "surrogateescape")
    out: list[str] = []
    for c in text:
        if 0xDC80 <= ord(c) <= 0xDCFF:  # a byte that is not UTF-8
            out.append(f"\\{ord(c) - 0xDC00:03o}")
        else:
            out.append(escape_text(c))
    return '"' + "".join(out) + '"'
