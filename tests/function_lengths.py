#!/usr/bin/env python3
"""Prints every C++ function longer than a limit, one line each.

    tests/function_lengths.py MAX_LINES DIR_OR_FILE...

A function's length runs from the first line of its declaration (after
the comment above it) to its closing brace, both counted; a lambda counts
in the function that holds it. The files are read as tokens (comments,
string and character literals, raw strings and preprocessor lines skipped),
so a brace in a string or a comment changes nothing, and a function is a
body that opens at namespace or class scope after a parameter list: member
functions defined in a class body count as well as those defined outside.
A file whose braces do not balance is named as unreadable rather than
passed over. Prints nothing when every function is within the limit.

docs/contributing.md ("The layering, checked") runs it on service/, agent/
and client/.
"""
import os
import re
import sys

TOKEN = re.compile(
    r"""
    (?P<ws>\s+)
  | (?P<comment>//[^\n]*|/\*.*?\*/)
  | (?P<raw>(?:u8|u|U|L)?R"(?P<delim>[^()\\\s]{0,16})\(.*?\)(?P=delim)")
  | (?P<string>(?:u8|u|U|L)?"(?:\\.|[^"\\\n])*")
  | (?P<char>(?:u8|u|U|L)?'(?:\\.|[^'\\\n])*')
  | (?P<pp>\#(?:\\\n|[^\n])*)
  | (?P<number>\.?\d(?:[eEpP][+-]|[\w.'])*)
  | (?P<id>[A-Za-z_]\w*)
  | (?P<punct>::|->|.)
    """,
    re.S | re.X,
)

# What may stand between a function's parameter list and its body.
AFTER_PARAMS = {"const", "override", "final", "noexcept", "mutable", "volatile", "try", "&", "&&"}
TYPE_KEYWORDS = {"class", "struct", "union", "enum"}


def tokens(text):
    """(kind, text, line) of every token that is code."""
    line = 1
    for m in TOKEN.finditer(text):
        kind = m.lastgroup if m.lastgroup != "delim" else "raw"
        value = m.group()
        if kind not in ("ws", "comment", "pp"):
            yield kind, value, line
        line += value.count("\n")


def opens_function(decl):
    """Whether a '{' after the declaration tokens `decl` opens a function body."""
    if not decl:
        return False
    words = [v for k, v, _ in decl]
    # template <...> before the declaration proper.
    start = 0
    if words[0] == "template":
        depth = 0
        for i, w in enumerate(words):
            if w == "<":
                depth += 1
            elif w == ">":
                depth -= 1
                if depth == 0:
                    start = i + 1
                    break
    head = words[start:]
    if not head or head[0] in TYPE_KEYWORDS or head[0] in ("namespace", "extern"):
        return False
    if "(" not in head:
        return False
    last = head[-1]
    if last == ")" or last in AFTER_PARAMS or last == "}":
        return "=" not in head[: head.index("(")]
    # A trailing return type: ... ) -> Type {
    if "->" in head:
        return True
    return False


def function_name(decl):
    """The (qualified) name before the declaration's parameter list."""
    words = [v for _, v, _ in decl]
    i = words.index("(") - 1
    name = []
    while i >= 0 and (words[i] == "::" or re.match(r"\w", words[i]) or words[i] == "~"):
        if name and name[0] != "::" and words[i] != "::" and words[i] != "~":
            break
        name.insert(0, words[i])
        i -= 1
    return "".join(name) or "?"


def functions(path):
    """(first line, last line, name) of each function in the file."""
    with open(path, encoding="utf-8", errors="replace") as f:
        text = f.read()
    found = []
    # Each open scope: (kind, first line of its declaration, name).
    stack = [("namespace", 0, "")]
    decl = []  # the tokens of the declaration being read at namespace/class scope
    depth = 0  # parentheses open in it
    for kind, value, line in tokens(text):
        top = stack[-1][0]
        if top in ("function", "block"):
            if value == "{":
                stack.append(("block", line, ""))
            elif value == "}":
                scope, first, name = stack.pop()
                if scope == "function":
                    found.append((first, line, name))
                    decl = []
                    depth = 0
            continue
        # Namespace, class or initializer scope: reading declarations.
        if value == "(":
            depth += 1
        elif value == ")":
            depth -= 1
        if value == "{":
            if top == "init" or depth > 0:
                # Inside an initializer, or inside parentheses (a lambda or a
                # braced value passed in a constructor's member initializers).
                stack.append(("init", line, ""))
            elif opens_function(decl):
                stack.append(("function", decl[0][2], function_name(decl)))
            elif decl and decl[0][1] in ("namespace", "extern"):
                stack.append(("namespace", line, ""))
                decl = []
            elif decl and (decl[0][1] in TYPE_KEYWORDS or decl[0][1] == "template") and not (
                decl[-1][1] in ("=",) or decl[0][1] == "enum"
            ):
                stack.append(("class", line, ""))
                decl = []
            else:
                # A brace initializer, an enum's list: part of the declaration.
                stack.append(("init", line, ""))
            continue
        if value == "}":
            if len(stack) == 1:
                raise ValueError("a '}' closes nothing at line %d" % line)
            scope = stack.pop()[0]
            if scope in ("namespace", "class"):
                decl = []
            elif stack[-1][0] != "init":
                # A brace initializer ended: `x_{a} {` may open a constructor's body.
                decl.append(("punct", "}", line))
            continue
        if top == "init":
            continue
        if value == ";" or (
            value == ":" and decl and decl[-1][1] in ("public", "private", "protected")
        ):
            decl = []
            depth = 0
            continue
        decl.append((kind, value, line))
    if len(stack) != 1:
        raise ValueError("%d scope(s) still open at the end" % (len(stack) - 1))
    return found


def sources(paths):
    for p in paths:
        if os.path.isfile(p):
            yield p
            continue
        for root, dirs, files in os.walk(p):
            dirs.sort()
            for name in sorted(files):
                if name.endswith((".cc", ".h", ".cpp", ".hpp")):
                    yield os.path.join(root, name)


def main(argv):
    if len(argv) < 3 or not argv[1].isdigit():
        sys.stderr.write(__doc__)
        return 2
    limit = int(argv[1])
    for path in sources(argv[2:]):
        try:
            for first, last, name in functions(path):
                if last - first + 1 > limit:
                    print("%s:%d: %s is %d lines (at most %d)" % (path, first, name, last - first + 1, limit))
        except ValueError as e:
            print("%s: cannot read its functions: %s" % (path, e))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
