#!/usr/bin/env python3
"""Import cycles in the host crate (host/src).

Rust allows modules to use each other in a circle, so the compiler never
says when the layering of the host breaks (a service reaching up into the
plugin runtime, the runtime reaching into the broker that owns it). This
reads every `use crate::..`/`super::..` and inline `crate::..` path of
host/src, builds the module graph at two granularities and prints its
strongly connected components of more than one node:

- top-level modules (`log`, `plugins`, `security`, `broker.rs` ...), where
  the layering lives;
- files, for the detail of a cycle.

Code under `#[cfg(test)]` is left out unless `--with-tests` is given: a test
may build whatever it needs. The exit status is 1 when a top-level cycle
exists, so `make lint` fails on a new one. python3 stdlib only.
"""

import argparse
import os
import re
import sys

ROOT_NAMES = ("main.rs", "lib.rs")
ROOT_NODE = "<crate root>"


def strip_comments_and_strings(text):
    """Blanks comments, string and char literals (keeping offsets)."""
    out = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
            out.append(" " * (j - i))
            i = j
        elif text.startswith("/*", i):
            depth, j = 1, i + 2
            while j < n and depth:
                if text.startswith("/*", j):
                    depth, j = depth + 1, j + 2
                elif text.startswith("*/", j):
                    depth, j = depth - 1, j + 2
                else:
                    j += 1
            out.append(re.sub(r"[^\n]", " ", text[i:j]))
            i = j
        elif re.match(r'b?r#*"', text[i:i + 40]) and (i == 0 or not (text[i - 1].isalnum() or text[i - 1] == "_")):
            m = re.match(r'b?r(#*)"', text[i:])
            end = '"' + m.group(1)
            j = text.find(end, i + m.end())
            j = n if j < 0 else j + len(end)
            out.append(re.sub(r"[^\n]", " ", text[i:j]))
            i = j
        elif c == '"':
            j = i + 1
            while j < n and text[j] != '"':
                j += 2 if text[j] == "\\" else 1
            j += 1
            out.append(re.sub(r"[^\n]", " ", text[i:j]))
            i = j
        elif c == "'" and re.match(r"'(\\.|[^\\'])'", text[i:i + 4]):
            m = re.match(r"'(\\.|[^\\'])'", text[i:])
            out.append(" " * m.end())
            i += m.end()
        elif c == "'" and re.match(r"'\\(u\{[0-9a-fA-F]+\}|x[0-9a-fA-F]{2})'", text[i:i + 12]):
            m = re.match(r"'\\(u\{[0-9a-fA-F]+\}|x[0-9a-fA-F]{2})'", text[i:])
            out.append(" " * m.end())
            i += m.end()
        else:
            out.append(c)
            i += 1
    return "".join(out)


def matching_brace(text, open_at):
    depth = 0
    for j in range(open_at, len(text)):
        if text[j] == "{":
            depth += 1
        elif text[j] == "}":
            depth -= 1
            if depth == 0:
                return j
    return len(text) - 1


def item_end(text, start):
    """End of the item starting at `start`: its `;` or its closing brace."""
    semi = text.find(";", start)
    brace = text.find("{", start)
    if brace < 0 or (0 <= semi < brace):
        return (semi if semi >= 0 else len(text)) + 1
    return matching_brace(text, brace) + 1


def drop_test_code(text):
    """Blanks `#[cfg(test)]` items; returns the text and test-only child modules."""
    test_children = set()
    for m in reversed(list(re.finditer(r"#\[cfg\(test\)\]", text))):
        start = m.end()
        decl = re.match(r"\s*(?:#\[[^\]]*\]\s*)*(?:pub(?:\([^)]*\))?\s+)?mod\s+(\w+)\s*;", text[start:])
        if decl:
            test_children.add(decl.group(1))
        end = item_end(text, start)
        text = text[:m.start()] + re.sub(r"[^\n]", " ", text[m.start():end]) + text[end:]
    return text, test_children


def expand_use_tree(tree):
    """`a::{b, c::{d, e}}` -> [a::b, a::c::d, a::c::e]."""
    tree = re.sub(r"\s+", "", tree)
    brace = tree.find("{")
    if brace < 0:
        return [re.sub(r"\bas\w+$", "", tree)]
    prefix, inner = tree[:brace], tree[brace + 1:tree.rfind("}")]
    parts, depth, cur = [], 0, ""
    for ch in inner:
        if ch == "," and depth == 0:
            parts.append(cur)
            cur = ""
            continue
        depth += ch == "{"
        depth -= ch == "}"
        cur += ch
    parts.append(cur)
    paths = []
    for part in filter(None, parts):
        for sub in expand_use_tree(part):
            paths.append(prefix + sub if sub != "self" else prefix.rstrip(":"))
    return paths


def file_module(rel):
    parts = rel[:-3].split("/")
    if parts[-1] in ("mod", "main", "lib"):
        parts = parts[:-1]
    return tuple(parts)


class Crate:
    def __init__(self, src, with_tests):
        self.src = src
        self.with_tests = with_tests
        self.files = {}  # module path -> relative file
        self.edges = {}  # file -> set(files)
        self.excluded = set()
        for dirpath, _, names in os.walk(src):
            for name in sorted(names):
                if name.endswith(".rs"):
                    rel = os.path.relpath(os.path.join(dirpath, name), src).replace(os.sep, "/")
                    if rel in ROOT_NAMES and file_module(rel) in self.files:
                        continue  # main.rs beside lib.rs: lib.rs is the root
                    self.files.setdefault(file_module(rel), rel)
        self.texts = {}
        for module, rel in self.files.items():
            with open(os.path.join(src, rel), encoding="utf-8") as f:
                text = strip_comments_and_strings(f.read())
            if not with_tests:
                text, children = drop_test_code(text)
                for child in children:
                    self.excluded.add(module + (child,))
            self.texts[rel] = text
        # A test-only module's own children are test-only too.
        for module in list(self.files):
            if any(module[:len(e)] == e for e in self.excluded):
                del self.texts[self.files[module]]
                del self.files[module]

    def resolve(self, module, path):
        """The file a path like `crate::log::manager::X` refers to."""
        segments = path.split("::")
        if segments[0] == "crate":
            base, rest = (), segments[1:]
        elif segments[0] in ("super", "self"):
            base = module
            while segments and segments[0] in ("super", "self"):
                if segments[0] == "super":
                    base = base[:-1]
                segments = segments[1:]
            rest = segments
        else:
            return None
        full = base + tuple(rest)
        for length in range(len(full), -1, -1):
            found = self.files.get(full[:length])
            if found:
                return found
        return None

    def inline_modules(self, text):
        """(start, end, name) of each inline `mod name { .. }`."""
        spans = []
        for m in re.finditer(r"\bmod\s+(\w+)\s*\{", text):
            spans.append((m.end() - 1, matching_brace(text, m.end() - 1), m.group(1)))
        return spans

    def build(self):
        for module, rel in self.files.items():
            text = self.texts[rel]
            spans = self.inline_modules(text)

            def module_at(pos):
                inner = [s for s in spans if s[0] <= pos <= s[1]]
                return module + tuple(name for _, _, name in sorted(inner))

            targets = set()
            for m in re.finditer(r"\buse\s+([^;]+);", text):
                here = module_at(m.start())
                for path in expand_use_tree(m.group(1)):
                    found = self.resolve(here, path)
                    if found:
                        targets.add(found)
            for m in re.finditer(r"\b(?:crate|super|self)(?:::\w+)+", text):
                found = self.resolve(module_at(m.start()), m.group(0))
                if found:
                    targets.add(found)
            targets.discard(rel)
            self.edges[rel] = targets

    def top_level(self, rel):
        module = file_module(rel)
        if not module:
            return ROOT_NODE
        name = module[0]
        return name + ("/" if self.files.get((name,), "").endswith("mod.rs") else ".rs")


def strongly_connected(nodes, edges):
    """Tarjan's algorithm, iterative."""
    index, low, on_stack, stack, result = {}, {}, set(), [], []
    counter = [0]
    for root in sorted(nodes):
        if root in index:
            continue
        work = [(root, iter(sorted(edges.get(root, ()))))]
        index[root] = low[root] = counter[0]
        counter[0] += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            advanced = False
            for child in children:
                if child not in index:
                    index[child] = low[child] = counter[0]
                    counter[0] += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(edges.get(child, ())))))
                    advanced = True
                    break
                if child in on_stack:
                    low[node] = min(low[node], index[child])
            if advanced:
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    result.append(sorted(component))
    return sorted(result, key=lambda c: (-len(c), c))


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("src", nargs="?", default=os.path.join(os.path.dirname(__file__), "..", "host", "src"))
    parser.add_argument("--with-tests", action="store_true", help="count #[cfg(test)] code too")
    parser.add_argument("--files", action="store_true", help="also list file-level cycles")
    parser.add_argument("--allow-edge", action="append", default=[], metavar="FROM.rs:TO.rs",
                        help="leave out one known file dependency (say why where it is passed)")
    args = parser.parse_args()
    crate = Crate(os.path.normpath(args.src), args.with_tests)
    crate.build()
    for allowed in args.allow_edge:
        source, _, target = allowed.partition(":")
        if target not in crate.edges.get(source, set()):
            print(f"--allow-edge {allowed}: no such dependency any more, drop it")
            return 1
        crate.edges[source].discard(target)
        print(f"left out: {source} -> {target}")

    top_edges = {}
    for rel, targets in crate.edges.items():
        a = crate.top_level(rel)
        top_edges.setdefault(a, set())
        for target in targets:
            b = crate.top_level(target)
            if a != b:
                top_edges[a].add(b)
    top = strongly_connected(top_edges.keys(), top_edges)
    files = strongly_connected(crate.edges.keys(), crate.edges)
    scope = "with tests" if args.with_tests else "without #[cfg(test)] code"
    print(f"host/src ({scope}): {len(top_edges)} top-level modules, {len(crate.edges)} files")
    print(f"top-level cycles: {len(top)}")
    for component in top:
        print(f"  {len(component)} modules: " + " ".join(component))
        members = set(component)
        for a in component:
            inside = sorted(b for b in top_edges[a] if b in members)
            print(f"    {a} -> {', '.join(inside)}")
    print(f"file cycles: {len(files)}")
    if args.files:
        for component in files:
            print(f"  {len(component)} files: " + " ".join(component))
    else:
        for component in files:
            print(f"  {len(component)} files (first: {component[0]})")
    return 1 if top else 0


if __name__ == "__main__":
    sys.exit(main())
