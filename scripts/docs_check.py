#!/usr/bin/env python3
"""Checks the Markdown docs against the tree and the binary. Run by the test suite (docs_check).

- Every relative link ([text](path) or [text](path#anchor)) names a file or folder that exists,
  and an anchor names a heading of that page (GitHub's slugs).
- Every `grag <command> ...` line of a shell code block (or inline code span) names a command
  the binary has, and each --flag on it is one that command (or the global options) takes.
- docs/cli.md is what `grag manpage --markdown` writes, docs/http-api.md what
  scripts/openapi_md.py makes of `grag serve --openapi` (`make docs` regenerates both).

Usage: scripts/docs_check.py [path/to/grag]   (without a binary only the links are checked)
"""
import json
import os
import re
import shlex
import subprocess
import sys
import tempfile

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
PAGES = ["README.md", "CHANGELOG.md", "bench/RESULTS.md"] + sorted(
    os.path.join("docs", f) for f in os.listdir(os.path.join(ROOT, "docs")) if f.endswith(".md"))

LINK = re.compile(r"(?<!!)\[[^\]]*\]\(([^)\s]+)\)")
FENCE = re.compile(r"^(\s*)```(\w*)")


def slug(heading):
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens."""
    text = re.sub(r"`", "", heading.strip().lower())
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def anchors(path, cache={}):
    if path not in cache:
        found, seen, fenced = set(), {}, False
        for line in open(path, encoding="utf-8"):
            if FENCE.match(line):
                fenced = not fenced
                continue
            m = re.match(r"^#{1,6}\s+(.*)", line)
            if m and not fenced:
                s = slug(m.group(1))
                n = seen.get(s, 0)
                seen[s] = n + 1
                found.add(s if n == 0 else f"{s}-{n}")
        cache[path] = found
    return cache[path]


def strip_code(line):
    return re.sub(r"`[^`]*`", "", line)


def prose_lines(page):
    """(line number, line) of the page outside fenced code blocks."""
    fenced = False
    for no, line in enumerate(open(os.path.join(ROOT, page), encoding="utf-8"), 1):
        if FENCE.match(line):
            fenced = not fenced
            continue
        if not fenced:
            yield no, line


def check_links(page, errors):
    for no, line in prose_lines(page):
        for target in LINK.findall(strip_code(line)):
            if re.match(r"^[a-z]+:", target):  # http:, https:, mailto:
                continue
            path, _, anchor = target.partition("#")
            full = os.path.normpath(os.path.join(ROOT, os.path.dirname(page), path)) if path \
                else os.path.join(ROOT, page)
            if not os.path.exists(full):
                errors.append(f"{page}:{no}: link to {target}: {path} does not exist")
            elif anchor and full.endswith(".md") and anchor not in anchors(full):
                errors.append(f"{page}:{no}: link to {target}: no heading #{anchor} in {path or page}")


def help_text(grag, args, cache={}):
    key = tuple(args)
    if key not in cache:
        r = subprocess.run([grag] + args + ["--help"], capture_output=True, text=True)
        cache[key] = r.stdout + r.stderr if r.returncode == 0 else None
    return cache[key]


def command_lines(page):
    """(line number, text) of each `grag ...` command in the page's shell code blocks."""
    fenced, lang, pending = False, "", ""
    for no, line in enumerate(open(os.path.join(ROOT, page), encoding="utf-8"), 1):
        m = FENCE.match(line)
        if m:
            fenced, lang = (not fenced), m.group(2)
            continue
        if not fenced or lang not in ("sh", "bash", "shell", "console", ""):
            continue
        text = pending + line.strip()
        if text.endswith("\\"):
            pending = text[:-1] + " "
            continue
        pending = ""
        text = re.sub(r"^\$\s+", "", text)
        if re.match(r"^(\S*/)?grag\s", text):
            yield no, text


def inline_commands(page):
    """(line number, text) of each `grag ...` inline code span outside code blocks, with the
    synopsis brackets and bars of docs/commands.md's table taken out."""
    for no, line in prose_lines(page):
        for span in re.findall(r"`(grag [^`]+)`", line):
            yield no, re.sub(r"[\[\]]|\\\||\|", " ", span)


def check_commands(grag, page, errors):
    top = help_text(grag, [])
    commands = set(re.findall(r"^\s{2}([a-z][\w-]*)\s", top, re.M))
    global_flags = set(re.findall(r"(--[a-z][\w-]*)", top))
    for no, text in list(command_lines(page)) + list(inline_commands(page)):
        text = text.split("#", 1)[0]
        for sep in ("|", "&&", ";", ">", "<", "&"):
            text = text.split(sep, 1)[0]
        try:
            words = shlex.split(text)
        except ValueError:
            continue
        words = words[1:]
        # global options before the command (their values too)
        while words and words[0].startswith("-"):
            flag = words.pop(0)
            if "=" not in flag and words and not words[0].startswith("-") \
                    and words[0] not in commands:
                words.pop(0)
        if not words or words[0] in ("--help", "--version"):
            continue
        cmd = words[0]
        if cmd not in commands and re.match(r"^[a-z][\w-]*$", cmd) and help_text(grag, [cmd]):
            commands.add(cmd)  # a hidden command (grag manpage)
        if cmd not in commands:
            if re.match(r"^[a-z][\w-]*$", cmd):
                errors.append(f"{page}:{no}: `grag {cmd}`: no such command")
            continue
        path = [cmd]
        sub = help_text(grag, path)
        # a subcommand of the command (grag cache prune, grag completion bash is a value)
        if len(words) > 1 and sub is not None:
            subs = set(re.findall(r"^\s{2}([a-z][\w-]*)\s", sub.split("Subcommands:", 1)[1], re.M)) \
                if "Subcommands:" in sub else set()
            if words[1] in subs:
                path.append(words[1])
                sub = help_text(grag, path)
        if sub is None:
            errors.append(f"{page}:{no}: `grag {' '.join(path)} --help` fails")
            continue
        known = set(re.findall(r"(--[a-z][\w-]*)", sub)) | global_flags
        for w in words[len(path):]:
            flag = w.split("=", 1)[0]
            if flag.startswith("--") and flag not in known:
                errors.append(f"{page}:{no}: `grag {' '.join(path)}` has no option {flag}")


def main():
    grag = sys.argv[1] if len(sys.argv) > 1 else None
    errors = []
    for page in PAGES:
        if os.path.exists(os.path.join(ROOT, page)):
            check_links(page, errors)
            if grag:
                check_commands(grag, page, errors)
    if grag:
        cli = subprocess.run([grag, "manpage", "--markdown"], capture_output=True, text=True)
        path = os.path.join(ROOT, "docs", "cli.md")
        have = open(path, encoding="utf-8").read() if os.path.exists(path) else ""
        if cli.returncode != 0 or cli.stdout != have:
            errors.append("docs/cli.md is not what `grag manpage --markdown` writes: run `make docs`")
        with tempfile.TemporaryDirectory() as empty:  # a project-less folder: defaults only
            api = subprocess.run([os.path.abspath(grag), "serve", "--openapi"], cwd=empty,
                                 capture_output=True, text=True)
        sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
        import openapi_md
        path = os.path.join(ROOT, "docs", "http-api.md")
        have = open(path, encoding="utf-8").read() if os.path.exists(path) else ""
        if api.returncode != 0:
            errors.append(f"`grag serve --openapi` failed: {api.stderr.strip()}")
        elif openapi_md.render(json.loads(api.stdout)) != have:
            errors.append("docs/http-api.md is not what `grag serve --openapi` gives: run `make docs`")
    for e in errors:
        print(e, file=sys.stderr)
    if errors:
        print(f"docs_check: {len(errors)} problems", file=sys.stderr)
        return 1
    print(f"docs_check: {len(PAGES)} pages: links resolve" +
          (", grag commands and options exist" if grag else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
