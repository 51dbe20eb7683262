"""Which characters are unsafe in text one user writes and another reads, as
the service decides it (base/unsafe_text.h): control characters (C0, DEL,
C1), Unicode's bidi controls, and characters that show nothing or break a
line (issue 41: a zero-width space or a tag character makes two different
tags look alike; U+2028 breaks a line where none is shown). The client
escapes them where it shows text (_text.py); the helper refuses them in
scalar tags, which the service would drop (task.py)."""

from __future__ import annotations

_BIDI = frozenset([0x061C, 0x200E, 0x200F, *range(0x202A, 0x202F), *range(0x2066, 0x206A)])
_INVISIBLE = frozenset([
    0x00AD, 0x034F, 0x115F, 0x1160, 0x3164, 0xFFA0, 0x17B4, 0x17B5, *range(0x180B, 0x1810),
    *range(0x200B, 0x200E), 0x2028, 0x2029, *range(0x2060, 0x2065), *range(0x206A, 0x2070), 0xFEFF,
    *range(0xFFF9, 0xFFFC), *range(0x1BCA0, 0x1BCA4), *range(0xE0000, 0xE0080)])


def is_control(code: int) -> bool:
    return code < 0x20 or 0x7F <= code <= 0x9F


def is_unsafe(code: int) -> bool:
    """A control, bidi control, invisible character or line separator, or a
    lone surrogate (not UTF-8 at all)."""
    return is_control(code) or code in _BIDI or code in _INVISIBLE or 0xD800 <= code <= 0xDFFF
