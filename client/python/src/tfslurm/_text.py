"""Text that came from another user or a program, made safe to show.

What the service answers (ids, reasons, events, tags, log lines) may hold
text anyone with a token wrote: an ESC in it would let that person set the
reader's window title or clear the screen, and a bidi override would
reorder what the reader sees. As tfctl does (client/terminal_text.h), such
characters are shown as visible escapes: C0 controls and DEL as \\xNN (a
line break and a tab kept where asked), the others (C1 and bidi controls,
invisible characters, line separators: _unsafe.py) as \\uNNNN.
"""

from __future__ import annotations

import html

from ._unsafe import is_unsafe as _is_unsafe


def escape(text: str, keep_line_breaks: bool = False) -> str:
    """`text` with every unsafe character as a visible escape.

    keep_line_breaks: a log or a message, whose \\n and \\t (and \\r before
    \\n) stay as they are; otherwise (a field, one line) they are escaped.
    """
    out = []
    last = len(text) - 1
    for i, ch in enumerate(text):
        code = ord(ch)
        if not _is_unsafe(code):
            out.append(ch)
        elif keep_line_breaks and (ch in "\n\t" or (ch == "\r" and i < last and text[i + 1] == "\n")):
            out.append(ch)
        elif ch == "\n":
            out.append("\\n")
        elif ch == "\t":
            out.append("\\t")
        elif ch == "\r":
            out.append("\\r")
        elif code < 0x80:
            out.append(f"\\x{code:02x}")
        elif code <= 0xFFFF:
            out.append(f"\\u{code:04x}")
        else:
            out.append(f"\\U{code:08x}")
    return "".join(out)


def escape_html(text: str) -> str:
    """For a notebook's HTML: the same escapes, then HTML's own."""
    return html.escape(escape(text, keep_line_breaks=True))
