"""How wait() shows progress: escaped text, a notebook's block updated in
place (IPython's display, faked here), a terminal's status line."""
import io
import sys
import types as pytypes

import pytest

from tfslurm import _text, progress


def test_escape_shows_controls_as_tfctl_does():
    assert _text.escape("a\x1b]0;title\x07b") == "a\\x1b]0;title\\x07b"
    assert _text.escape("x\u202ey\u2028z\x9b") == "x\\u202ey\\u2028z\\u009b"
    # Invisible characters too (base/unsafe_text.h, issue 41): two tags that look alike.
    assert _text.escape("lo\u200bss\U000e0041") == "lo\\u200bss\\U000e0041"
    assert _text.escape("l1\nl2\r\n\tend\r") == "l1\\nl2\\r\\n\\tend\\r"
    assert _text.escape("l1\nl2\r\n\tend\r", keep_line_breaks=True) == "l1\nl2\r\n\tend\\r"
    assert _text.escape("café ✓ \\x1b") == "café ✓ \\x1b", "text and backslashes as they are"
    assert _text.escape_html("<b>\x1b</b>") == "&lt;b&gt;\\x1b&lt;/b&gt;"


class FakeHandle:
    def __init__(self, shown):
        self.shown = shown

    def update(self, obj):
        self.shown.append(("update", obj.data))


@pytest.fixture
def notebook(monkeypatch):
    """IPython as a notebook's kernel has it: get_ipython() a ZMQInteractiveShell."""
    shown = []

    class ZMQInteractiveShell:
        pass

    class HTML:
        def __init__(self, data):
            self.data = data

    def display(obj, display_id=False):
        shown.append(("display", obj.data))
        return FakeHandle(shown)

    ipython = pytypes.ModuleType("IPython")
    ipython.get_ipython = lambda: ZMQInteractiveShell()
    ipython_display = pytypes.ModuleType("IPython.display")
    ipython_display.HTML = HTML
    ipython_display.display = display
    monkeypatch.setitem(sys.modules, "IPython", ipython)
    monkeypatch.setitem(sys.modules, "IPython.display", ipython_display)
    return shown


def test_in_a_notebook_one_block_is_updated_in_place(notebook):
    display = progress.choose(None)
    assert isinstance(display, progress.Notebook)
    display.event("e1 <script>")
    display.status("running")
    display.status("running")  # unchanged: not drawn again
    for i in range(20):
        display.event(f"event {i}")
    assert [kind for kind, _ in notebook].count("display") == 1
    last = notebook[-1][1]
    assert "&lt;script&gt;" not in last, "only the newest events stay"
    assert "... 6 earlier events" in last and "event 19" in last and "<b>running</b>" in last
    assert "<script>" not in "".join(html for _, html in notebook)


def test_outside_a_notebook_ipython_is_not_taken_for_one(monkeypatch):
    ipython = pytypes.ModuleType("IPython")
    ipython.get_ipython = lambda: None  # a plain python with IPython installed
    monkeypatch.setitem(sys.modules, "IPython", ipython)
    assert isinstance(progress.choose(None, io.StringIO()), progress.Lines)
    assert isinstance(progress.choose(False), progress.Silent)


def test_a_terminal_redraws_the_status_below_the_events():
    out = io.StringIO()
    t = progress.Terminal(out)
    t.status("s1")
    t.event("ev")
    t.status("s2")
    t.close()
    assert out.getvalue() == "s1\r\x1b[2Kev\ns2\n"
