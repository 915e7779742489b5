#!/usr/bin/env python3
"""Keeps the library and its front ends readable: no source file over 1,200 lines and no
function over 150 lines, except the declarative tables listed below. Run by the test suite
(size_check).

A function is a brace block at namespace or class level whose head ends like a signature
(`...) const {`); lambdas and blocks inside a function count toward the function around them.
Comments, string literals and raw strings are left out before braces are counted.

Usage: scripts/size_check.py [--list]   (--list: every function over the limit, tables too)
"""
import os
import re
import sys

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
TREES = ["src", "include", "python/src"]
MAX_FILE_LINES = 1200
MAX_FUNCTION_LINES = 150
# Declarative tables: one row per setting, route or index table, read by the code around them.
TABLES = {
    ("src/core/settings_table.cpp", "Settings"),
    ("src/server/server_routes.cpp", "DeclareRoutes"),
    ("src/store/tables.cpp", "MakeTables"),
}

RAW_STRING = re.compile(r'R"(\w*)\((?:.|\n)*?\)\1"')
BLOCK_COMMENT = re.compile(r"/\*(?:.|\n)*?\*/")
STRING = re.compile(r'"(?:\\.|[^"\\])*"')
CHAR = re.compile(r"'(?:\\.|[^'\\])*'")
CONTAINER = re.compile(r"\b(namespace|class|struct|union|enum)\b[^()]*$")
SIGNATURE = re.compile(r"\)\s*(?:const|noexcept|override|final|\s|->\s*[\w:<>,\s&*]+)*$")
NAME = re.compile(r"([~\w]+)\s*\((?:[^()]|\([^()]*\))*\)[^()]*$")


def blank(match):
    """Keeps a removed span's line breaks, so line numbers stay right."""
    return "\n" * match.group(0).count("\n")


def functions(text):
    """(name, first line, lines) of each function defined in `text`."""
    text = RAW_STRING.sub(lambda m: '""' + blank(m), text)
    text = BLOCK_COMMENT.sub(blank, text)
    stack, head, found = [], "", []
    for number, line in enumerate(text.split("\n"), 1):
        code = CHAR.sub("''", STRING.sub('""', line)).split("//")[0]
        for at, ch in enumerate(code):
            if ch == "{":
                before = (head + " " + code[:at]).strip()
                container = bool(CONTAINER.search(before)) or before.endswith('extern ""')
                is_function = (not container and all(kind == "container" for kind, _, _ in stack)
                               and SIGNATURE.search(before) is not None)
                name = ""
                if is_function:
                    m = NAME.search(before)
                    name = m.group(1) if m else "?"
                stack.append(("container" if container else
                              "function" if is_function else "block", number, name))
            elif ch == "}" and stack:
                kind, first, name = stack.pop()
                if kind == "function":
                    found.append((name, first, number - first + 1))
        stripped = code.strip()
        if stripped:
            head = "" if stripped.endswith((";", "}", "{")) else (head + " " + stripped)[-400:]
    return found


def main():
    list_all = "--list" in sys.argv[1:]
    problems = []
    for tree in TREES:
        for folder, _, files in os.walk(os.path.join(ROOT, tree)):
            for name in sorted(files):
                if not name.endswith((".cpp", ".h")):
                    continue
                path = os.path.join(folder, name)
                rel = os.path.relpath(path, ROOT)
                text = open(path, encoding="utf-8").read()
                lines = text.count("\n")
                if lines > MAX_FILE_LINES:
                    problems.append(f"{rel}: {lines} lines (at most {MAX_FILE_LINES}): split it "
                                    "along a seam")
                for function, first, length in functions(text):
                    if length <= MAX_FUNCTION_LINES:
                        continue
                    table = (rel, function) in TABLES
                    if list_all or not table:
                        note = " (a declarative table)" if table else ""
                        problems.append(f"{rel}:{first}: {function}() is {length} lines "
                                        f"(at most {MAX_FUNCTION_LINES}){note}")
    for p in problems:
        print(p)
    if list_all:
        return 0
    if problems:
        print(f"size_check: {len(problems)} over the limits (scripts/size_check.py)")
        return 1
    print("size_check: no file over 1,200 lines, no function over 150 outside the tables")
    return 0


if __name__ == "__main__":
    sys.exit(main())
