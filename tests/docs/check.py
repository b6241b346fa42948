#!/usr/bin/env python3
"""The documentation check (suite 'docs'): what the pages say must hold.

  check.py ROOT INCLUDE_DIR LIBTWHEEL_A

1. Every relative link and #anchor in README.md, docs/*.md,
   bench/README.md and bench/designs/README.md resolves (a file that exists; a heading of that page,
   slugged as GitHub does).
2. Every ```c / ```cpp block that is a whole program (it has a main) and is
   not marked "/* fragment */" or "// fragment" on its first line compiles
   with -Wall -Wextra -Wpedantic -Werror against the headers and
   libtwheel.a; when a ```text block right after it is introduced by a line
   "Output:", the program runs and must print exactly that.
3. Every decimal figure in README.md outside code (70.54, 0.324x, ...) is a
   figure bench/results.txt printed. Versions (meson >= 0.63, Debian 12,
   C++17) are not decimals of that kind and are skipped.

  check.py --installed BUILD_DIR

installs BUILD_DIR (meson install --destdir into a temporary folder) and
runs check 1 on the installed share/doc/twheel tree: the pages a package
ships must not link to files it leaves out.

Prints one line per failure and exits 1 if there was any.
"""
import os
import re
import shutil
import subprocess
import sys
import tempfile

PAGES = ["README.md", "bench/README.md", "bench/designs/README.md"]
FENCE = re.compile(r"^(```+)(\w*)\s*$")
LINK = re.compile(r"(?<!!)\[[^\]]*\]\(([^)\s]+)\)|!\[[^\]]*\]\(([^)\s]+)\)")
VERSION_BEFORE = re.compile(r"(?:≥|>=|Debian|Ubuntu|C\+\+|version|v)\s*$")


def pages(root):
    found = [p for p in PAGES if os.path.exists(os.path.join(root, p))]
    docs = os.path.join(root, "docs")
    if os.path.isdir(docs):
        found += sorted("docs/" + f for f in os.listdir(docs) if f.endswith(".md"))
    return found


def split(text):
    """(prose lines, code blocks) of a markdown page; a block is
    (language, first line number, lines)."""
    prose, blocks, block = [], [], None
    for number, line in enumerate(text.split("\n"), 1):
        fence = FENCE.match(line)
        if block is None and fence:
            block = (fence.group(2), number, [])
        elif block is not None and line.startswith("```"):
            blocks.append(block)
            block = None
        elif block is not None:
            block[2].append(line)
        else:
            prose.append((number, line))
    return prose, blocks


def slug(heading):
    text = re.sub(r"[`*_]|\[([^\]]*)\]\([^)]*\)", r"\1", heading.strip().lower())
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def anchors(root, page, cache={}):
    if page not in cache:
        prose, _ = split(open(os.path.join(root, page), encoding="utf-8").read())
        seen, result = {}, set()
        for _, line in prose:
            match = re.match(r"^#{1,6}\s+(.*)$", line)
            if match:
                base = slug(match.group(1))
                n = seen.get(base, 0)
                seen[base] = n + 1
                result.add(base if n == 0 else f"{base}-{n}")
        cache[page] = result
    return cache[page]


def check_links(root, page, prose, failures):
    for number, line in prose:
        for match in LINK.finditer(re.sub(r"`[^`]*`", "", line)):
            target = match.group(1) or match.group(2)
            if re.match(r"^[a-z]+:", target):
                continue  # http:, https:, mailto:: not checked (no network)
            path, _, anchor = target.partition("#")
            resolved = os.path.normpath(os.path.join(os.path.dirname(page), path)) if path else page
            if not os.path.exists(os.path.join(root, resolved)):
                failures.append(f"{page}:{number}: link to missing {target}")
            elif anchor and resolved.endswith(".md") and anchor not in anchors(root, resolved):
                failures.append(f"{page}:{number}: no heading #{anchor} in {resolved}")


def check_programs(root, page, blocks, include, library, failures):
    for index, (language, number, lines) in enumerate(blocks):
        if language not in ("c", "cpp"):
            continue
        body = "\n".join(lines) + "\n"
        first = lines[0].strip() if lines else ""
        if first in ("/* fragment */", "// fragment") or not re.search(r"\bint main\s*\(", body):
            continue
        expected = None
        text = open(os.path.join(root, page), encoding="utf-8").read().split("\n")
        end = number + len(lines)  # the closing fence, 0-based index
        after = [l for l in text[end + 1:end + 4]]
        if index + 1 < len(blocks) and blocks[index + 1][0] == "text" and any(
                l.strip() == "Output:" for l in after):
            expected = "\n".join(blocks[index + 1][2]) + "\n"
        with tempfile.TemporaryDirectory() as work:
            source = os.path.join(work, "program." + language)
            open(source, "w").write(body)
            program = os.path.join(work, "program")
            if language == "c":
                command = [os.environ.get("CC", "cc"), "-std=c11"]
            else:
                command = [os.environ.get("CXX", "c++"), "-std=c++17"]
            command += ["-Wall", "-Wextra", "-Wpedantic", "-Werror", "-I", include,
                        source, library, "-pthread", "-o", program]
            # a coverage build's library needs the coverage runtime
            command += os.environ.get("TWHEEL_DOCS_LDFLAGS", "").split()
            built = subprocess.run(command, capture_output=True, text=True)
            if built.returncode != 0:
                failures.append(f"{page}:{number}: the {language} program does not build:\n"
                                + built.stderr.strip())
                continue
            if expected is None:
                continue
            ran = subprocess.run([program], capture_output=True, text=True, timeout=60)
            if ran.returncode != 0 or ran.stdout != expected:
                failures.append(f"{page}:{number}: the program printed (exit {ran.returncode}):\n"
                                f"{ran.stdout}but the page says:\n{expected}")


def check_figures(root, prose, failures):
    results_path = os.path.join(root, "bench", "results.txt")
    results = open(results_path, encoding="utf-8").read() if os.path.exists(results_path) else ""
    printed = set(re.findall(r"\d+\.\d+x?", results))
    for number, line in prose:
        line = re.sub(r"`[^`]*`|\]\([^)]*\)", "", line)
        for match in re.finditer(r"(?<![\w.])(\d+\.\d+)(\s*[×x])?", line):
            if VERSION_BEFORE.search(line[:match.start()]):
                continue
            figure = match.group(1) + ("x" if match.group(2) else "")
            if figure not in printed:
                failures.append(f"README.md:{number}: {match.group(0).strip()} is not a "
                                "figure bench/results.txt printed")


def check_installed(build):
    """Check 1 on the doc tree `meson install` puts in a fresh prefix."""
    meson = os.environ.get("MESON") or shutil.which("meson")
    if not meson:
        print("SKIP: meson not found")
        sys.exit(77)
    with tempfile.TemporaryDirectory() as dest:
        installed = subprocess.run([meson, "install", "-C", build, "--no-rebuild", "--quiet",
                                    "--destdir", dest], capture_output=True, text=True)
        if installed.returncode != 0:
            print("FAIL meson install --destdir failed:\n" + installed.stdout + installed.stderr)
            sys.exit(1)
        roots = [os.path.join(d, name) for d, names, _ in os.walk(dest) for name in names
                 if name == "twheel" and os.path.basename(d) == "doc"]
        if len(roots) != 1:
            print(f"FAIL no single share/doc/twheel in the install: {roots}")
            sys.exit(1)
        root, failures = roots[0], []
        for page in pages(root):
            prose, _ = split(open(os.path.join(root, page), encoding="utf-8").read())
            check_links(root, page, prose, failures)
        for failure in failures:
            print("FAIL installed", failure)
        print(f"docs (installed {os.path.relpath(root, dest)}): {len(pages(root))} pages "
              f"checked, {len(failures)} problems")
        sys.exit(1 if failures else 0)


def main():
    if len(sys.argv) == 3 and sys.argv[1] == "--installed":
        check_installed(sys.argv[2])
    if len(sys.argv) != 4:
        sys.exit("usage: check.py ROOT INCLUDE_DIR LIBTWHEEL_A | check.py --installed BUILD_DIR")
    root, include, library = sys.argv[1:]
    failures = []
    for page in pages(root):
        prose, blocks = split(open(os.path.join(root, page), encoding="utf-8").read())
        check_links(root, page, prose, failures)
        check_programs(root, page, blocks, include, library, failures)
        if page == "README.md":
            check_figures(root, prose, failures)
    for failure in failures:
        print("FAIL", failure)
    print(f"docs: {len(pages(root))} pages checked, {len(failures)} problems")
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
