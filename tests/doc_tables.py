#!/usr/bin/env python3
"""Checks docs/design.md's tables against the tree; prints each difference.

    tests/doc_tables.py files      the file tables against the folders
    tests/doc_tables.py protocol   the agent protocol's tables against
                                   schema/agent.proto

files: every source file of service/core/ (its ports aside: they have a
table of their own, checked by docs/contributing.md) is named in "core,
file by file", and every file that table's first column names exists;
likewise service/sweeps/ and "sweeps, file by file";
likewise each folder of "The adapters" (its files column) and base/ (its
row of "Components").

protocol: the two tables of "The agent protocol" name every message of
AgentMessage's and ServiceMessage's oneof, each written Name{field, ...}
with exactly the fields agent.proto gives it ({} for none).

Prints nothing when the document and the tree agree. Run from the
repository root; docs/contributing.md ("The layering, checked") runs both.
"""
import os
import re
import sys

DESIGN = "docs/design.md"
PROTO = "schema/agent.proto"
SOURCE = re.compile(r"\.(cc|h)$")


def section(text, heading):
    """The lines under `heading` (a markdown heading's text) up to the next heading."""
    lines = text.split("\n")
    for i, line in enumerate(lines):
        if re.match(r"#+ +" + re.escape(heading) + r" *$", line):
            out = []
            for rest in lines[i + 1 :]:
                if re.match(r"#+ ", rest):
                    break
                out.append(rest)
            return out
    raise SystemExit("%s: no heading '%s'" % (DESIGN, heading))


def rows(lines):
    """The cells of each table row, header and rule rows left out."""
    out = []
    for line in lines:
        if not line.startswith("|") or re.match(r"\|[-| ]+\|\s*$", line):
            continue
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        out.append(cells)
    return out[1:] if out else out  # the header


def file_names(cell):
    """Every file name a cell writes in backquotes: `a.{h,cc}` is a.h and a.cc."""
    names = set()
    for quoted in re.findall(r"`([^`]+)`", cell):
        for word in re.findall(r"[\w./-]+(?:\.\{[\w,]+\}|\.\w+)", quoted):
            m = re.match(r"(.*)\.\{([\w,]+)\}$", word)
            if m:
                names.update(m.group(1) + "." + ext for ext in m.group(2).split(","))
            elif SOURCE.search(word):
                names.add(word)
    return names


def sources(folder):
    return {f for f in os.listdir(folder) if SOURCE.search(f) and os.path.isfile(os.path.join(folder, f))}


def compare(table, folder, named, listed):
    """Differences between the files of `folder` and those its table names."""
    out = []
    here = sources(folder)
    for f in sorted(here - named):
        out.append("%s: %s/%s is not in the table \"%s\"" % (DESIGN, folder, f, table))
    for f in sorted(listed - here):
        out.append("%s: the table \"%s\" names %s/%s, which does not exist" % (DESIGN, table, folder, f))
    return out


def check_files(text):
    out = []
    core_rows = rows(section(text, "core, file by file"))
    named = set().union(*(file_names(" ".join(r)) for r in core_rows))
    listed = set().union(*(file_names(r[0]) for r in core_rows))
    # Files another folder's name in the table (ports/x.h) are not core's own.
    named = {n.rsplit("/", 1)[-1] for n in named if "/" not in n or n.startswith("core/")}
    listed = {n for n in listed if "/" not in n}
    out += compare("core, file by file", "service/core", named, listed)
    sweep_rows = rows(section(text, "sweeps, file by file"))
    named = set().union(*(file_names(r[0]) for r in sweep_rows))
    out += compare("sweeps, file by file", "service/sweeps", named, named)
    for r in rows(section(text, "The adapters")):
        folder = r[0].strip("`").rstrip("/")
        names = file_names(r[1])
        out += compare("The adapters", "service/" + folder, names, names)
    for r in rows(section(text, "Components")):
        if r[0].strip("`").rstrip("/") == "base":
            names = {n for n in file_names(r[1])}
            # base's row names headers: each stands for its .cc too.
            here = sources("base")
            covered = names | {n[:-2] + ".cc" for n in names if n.endswith(".h")}
            out += compare("Components (base/)", "base", covered, names)
            del here
    return out


def proto_messages(proto):
    """{message: [field names]} of agent.proto."""
    text = re.sub(r"//[^\n]*", "", proto)
    out = {}
    for m in re.finditer(r"message (\w+) \{", text):
        depth, i = 1, m.end()
        while depth:
            depth += {"{": 1, "}": -1}.get(text[i], 0)
            i += 1
        name, body = m.group(1), text[m.end() : i - 1]
        fields = re.findall(r"^\s*(?:(?:repeated|optional)\s+)?(?:map<[^>]*>|[\w.]+)\s+(\w+)\s*=\s*\d+", body, re.M)
        out[name] = fields
    return out


def oneof(proto, message):
    text = re.sub(r"//[^\n]*", "", proto)
    body = re.search(r"message %s \{.*?oneof \w+ \{(.*?)\}" % message, text, re.S).group(1)
    return re.findall(r"^\s*(\w+)\s+\w+\s*=", body, re.M)


def documented(lines):
    """{message: [fields]} of the tables' first columns: `Name{a, b: [...], c}`."""
    out = {}
    for r in rows(lines):
        m = re.match(r"`(\w+)\{(.*)\}`", r[0])
        if not m:
            continue
        inner = m.group(2)
        # Drop nested shapes ({...} and [...]) so that only top-level names stay.
        while True:
            flat = re.sub(r"\{[^{}]*\}|\[[^\[\]]*\]", "", inner)
            if flat == inner:
                break
            inner = flat
        out[m.group(1)] = [f.split(":")[0].strip() for f in inner.split(",") if f.strip()]
    return out


def check_protocol(text):
    with open(PROTO) as f:
        proto = f.read()
    messages = proto_messages(proto)
    table = documented(section(text, "The agent protocol"))
    out = []
    for envelope in ("AgentMessage", "ServiceMessage"):
        for name in oneof(proto, envelope):
            if name not in table:
                out.append("%s: %s's %s is not in the protocol tables" % (DESIGN, envelope, name))
                continue
            if sorted(table[name]) != sorted(messages[name]):
                out.append(
                    "%s: the protocol tables give %s{%s}; %s has {%s}"
                    % (DESIGN, name, ", ".join(table[name]), PROTO, ", ".join(messages[name]))
                )
    sent = set(oneof(proto, "AgentMessage")) | set(oneof(proto, "ServiceMessage"))
    for name in sorted(set(table) - sent):
        out.append("%s: the protocol tables name %s, which %s does not send" % (DESIGN, name, PROTO))
    return out


def main(argv):
    if len(argv) != 2 or argv[1] not in ("files", "protocol"):
        sys.stderr.write(__doc__)
        return 2
    with open(DESIGN) as f:
        text = f.read()
    problems = check_files(text) if argv[1] == "files" else check_protocol(text)
    for p in problems:
        print(p)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
