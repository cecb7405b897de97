#!/usr/bin/env python3
"""Every program the product and its tests run, mapped to its Debian package.

Usage: programs.py ROOT [MAKEFILE]

Finds the programs:
  - the product: the argv arrays it hands to tool_run() (imager/, fsplugins/:
    `const char *NAME[] = { "prog", ...`), and the programs named in
    PRODUCT_NEEDS below (what libguestfs and libvirt need on the host);
  - the tests and benches: the words in command position of every shell
    script (tests/run, tests/lib, tests/ts, tests/bench, tests/guest,
    tests/demo.sh, .ci/run, boot/build.sh, the Makefile's recipes), the arguments of
    need_cmd, and the commands inside the C unit tests' string literals.
Each one is looked up on PATH and its package found as `dpkg -S` finds it
(from dpkg's file lists, read once).  A
package that is not Essential (a bare Debian 12 has the Essential ones)
must be in one of the Makefile's DEB_* lists, or the check fails: a
machine that happens to have the program installed cannot hide a list
that lacks it.  A need_cmd program that is on no PATH at all fails too (a
test would skip on every machine).

Prints one line per program (program, path, package, list) and a last
line "N programs, N packages, N problems"; exits 1 when there are problems.
"""
import os
import re
import shutil
import glob
import subprocess
import sys

# What the product needs that is not an argv it builds: libguestfs builds its
# appliance with supermin from this machine's kernel, and runs it with qemu.
PRODUCT_NEEDS = {
    "supermin": "libguestfs builds its appliance with it",
    "qemu-system-x86_64": "libguestfs runs its appliance with it",
}
# Run only where they exist: not a package the project installs.
OPTIONAL = {
    "zpool": "imager pools runs it for a pool on ZFS, whose host has it (zfsutils-linux, contrib)",
}
SYSTEM_PATH = "/usr/sbin:/usr/bin:/sbin:/bin"
# The kernel is no program: the Makefile must list the package that installs it.
KERNEL_PACKAGE = "linux-image-amd64"

SHELL_WORDS = set("""
if then else elif fi for while until do done case esac in function select time
return exit break continue local export readonly declare typeset unset shift
set trap eval exec source . : true false test [ [[ ]] echo printf read cd pwd
pushd popd wait kill jobs fg bg command builtin type hash let getopts umask
alias unalias shopt enable help history ulimit caller compgen complete mapfile
readarray disown suspend logout times coproc { } ! ( ) exec
""".split())

# Words that lead a command but wrap another one: the next word is a command.
WRAPPERS = {"timeout", "env", "nice", "ionice", "nohup", "xargs", "flock",
            "setpriv", "unshare", "sudo", "stdbuf", "taskset", "command",
            "exec", "time", "strace"}


def makefile_lists(path):
    text = open(path).read().replace("\\\n", " ")
    lists = {}
    for m in re.finditer(r"^(DEB_[A-Z]+)\s*([:+]?)=(.*)$", text, re.M):
        if m.group(2) == "+":
            lists.setdefault(m.group(1), []).extend(m.group(3).split())
        else:
            lists[m.group(1)] = m.group(3).split()
    return lists


def strip_comment(line):
    # A '#' starts a comment at the start of a word, outside quotes.
    out, q = [], None
    prev = " "
    for ch in line:
        if q:
            if ch == q:
                q = None
        elif ch in "'\"":
            q = ch
        elif ch == "#" and prev in " \t;&|(":
            break
        out.append(ch)
        prev = ch
    return "".join(out)


def command_words(line):
    """The words of a shell line that stand where a command does."""
    words = []
    # Split at command separators and substitutions.
    parts = re.split(r"\|\||&&|[;|&`(){}]|\$\(|\bthen\b|\bdo\b|\belse\b|\bif\b|\bwhile\b|\buntil\b|\b!\s", line)
    for part in parts:
        toks = part.split()
        i = 0
        while i < len(toks):
            t = toks[i].strip("\"'")
            if re.match(r"^[A-Za-z_][A-Za-z0-9_]*=", t):   # VAR=value prefix
                i += 1
                continue
            if t in ("!",):
                i += 1
                continue
            if t in WRAPPERS and i + 1 < len(toks):
                words.append(t)
                i += 1
                # skip the wrapper's options and numbers (timeout -k 10 300 cmd)
                while i < len(toks) and (toks[i].startswith("-") or re.match(r"^[0-9.]+[smh]?$", toks[i])
                                         or re.match(r"^[A-Za-z_][A-Za-z0-9_]*=", toks[i])):
                    i += 1
                continue
            words.append(t)
            break
    return [w for w in words if re.match(r"^[A-Za-z0-9][A-Za-z0-9._+-]*$", w)]


def shell_programs(path, functions):
    found, needed = set(), set()
    lines = open(path, errors="replace").read().split("\n")
    heredoc = None
    for raw in lines:
        if heredoc:
            if raw.strip() == heredoc:
                heredoc = None
            continue
        line = strip_comment(raw)
        m = re.search(r"<<-?\s*['\"]?([A-Za-z_][A-Za-z0-9_]*)['\"]?", line)
        if m:
            heredoc = m.group(1)
        for fm in re.finditer(r"(?:^|\s)(?:function\s+)?([A-Za-z_][A-Za-z0-9_-]*)\s*\(\)", line):
            functions.add(fm.group(1))
        m = re.match(r"^\s*need_cmd\s+(.*)$", line)
        if m:
            for w in m.group(1).split():
                if re.match(r"^[A-Za-z0-9][A-Za-z0-9._+-]*$", w):
                    needed.add(w)
        for w in command_words(line):
            found.add(w)
    return found, needed


def makefile_recipes(path):
    found = set()
    for line in open(path):
        if line.startswith("\t"):
            for w in command_words(strip_comment(line.strip().lstrip("@-"))):
                found.add(w)
    return found


def c_literal_programs(path):
    found = set()
    text = open(path, errors="replace").read()
    for lit in re.findall(r'"((?:[^"\\\n]|\\.)*)"', text):
        lit = lit.replace("\\n", " ")
        for m in re.finditer(r"command -v ([A-Za-z0-9._+-]+)", lit):
            found.add(m.group(1))
        m = re.search(r"for \w+ in ([^;]*);", lit)
        if m and "command -v" in lit:
            found.update(w for w in m.group(1).split() if re.match(r"^[A-Za-z0-9._+-]+$", w))
        # a literal that reads as a command line: "prog -opt ..." or "... | prog"
        if re.match(r"^[a-z][a-z0-9._+-]* (-|%s|>|<)", lit) or " | " in lit:
            found.update(command_words(lit))
    return found


def product_programs(root):
    """argv[0] of the argv arrays (a NULL-ended list of strings) in the
    sources that run tools (tool_run(), directly or through a wrapper)."""
    found = {}
    for d in ("imager", "fsplugins"):
        for dirpath, _, files in os.walk(os.path.join(root, d)):
            for f in files:
                if not f.endswith(".c"):
                    continue
                text = open(os.path.join(dirpath, f), errors="replace").read()
                if "tool_run" not in text:
                    continue
                for m in re.finditer(r'const char \*(?:const )?\w+\[\]\s*=\s*\{\s*"([^"]+)"[^;{}]*NULL\s*\}', text):
                    found[m.group(1)] = os.path.relpath(os.path.join(dirpath, f), root)
    return found


class Dpkg:
    """The installed packages: who provides what, and what each depends on."""

    def __init__(self):
        out = subprocess.run(["dpkg-query", "-W", "-f",
                              "${Package}\t${Status}\t${Essential}\t${Priority}\t${Provides}\t${Pre-Depends}, ${Depends}\n"],
                             capture_output=True, text=True).stdout
        self.info, self.provides = {}, {}
        for line in out.splitlines():
            f = line.split("\t")
            if len(f) < 6 or "install ok installed" not in f[1]:
                continue
            self.info[f[0]] = (f[2] == "yes", f[3], f[5])
            for prov in f[4].split(","):
                name = prov.strip().split(" ")[0]
                if name:
                    self.provides.setdefault(name, f[0])

    def base(self, pkg):
        """On every Debian 12 system: Essential, or Priority required (the minbase of debootstrap and mmdebstrap)."""
        i = self.info.get(pkg)
        return bool(i) and (i[0] or i[1] == "required")

    def real(self, name):
        name = name.split(":")[0]
        return name if name in self.info else self.provides.get(name)

    def closure(self, pkgs):
        """pkgs and everything apt installs with them (Depends, Pre-Depends;
        of alternatives "a | b" only the first, which apt takes)."""
        seen, todo = {}, [(p, p) for p in pkgs]
        while todo:
            p, via = todo.pop()
            r = self.real(p)
            if not r or r in seen:
                continue
            seen[r] = via
            for group in self.info[r][2].split(","):
                first = group.split("|")[0].strip().split(" ")[0]
                if first:
                    todo.append((first, via))
        return seen


def alternatives_owner(path, dpkg, acceptable):
    """/usr/bin/awk -> /etc/alternatives/awk: an acceptable package among the
    providers of the alternative (a bare system has mawk, not gawk)."""
    link = os.path.realpath(path)
    name = None
    p = path
    for _ in range(8):
        if not os.path.islink(p):
            break
        t = os.readlink(p)
        p = t if t.startswith("/") else os.path.join(os.path.dirname(p), t)
        if p.startswith("/etc/alternatives/"):
            name = os.path.basename(p)
            break
    if not name:
        return None
    r = subprocess.run(["update-alternatives", "--list", name], capture_output=True, text=True)
    owners = [dpkg_owner(c) for c in r.stdout.split()]
    for o in owners:
        if o and acceptable(o):
            return o
    return dpkg_owner(link)


_OWNERS = None


def dpkg_owners():
    """Every file dpkg knows, with the package that installed it, read once
    from dpkg's own lists (what `dpkg -S PATH` looks up, without a dpkg run
    for each program)."""
    global _OWNERS
    if _OWNERS is None:
        _OWNERS = {}
        for f in glob.glob("/var/lib/dpkg/info/*.list"):
            pkg = os.path.basename(f)[:-len(".list")].split(":")[0]
            with open(f, errors="replace") as fh:
                for line in fh:
                    _OWNERS.setdefault(line.rstrip("\n"), pkg)
    return _OWNERS


def dpkg_owner(path):
    cands = [path, os.path.realpath(path)]
    for p in list(cands):
        # merged /usr: dpkg may know /bin/x or /usr/bin/x
        if p.startswith("/usr/"):
            cands.append(p[4:])
        else:
            cands.append("/usr" + p)
    owners = dpkg_owners()
    for p in cands:
        if p in owners:
            return owners[p]
    return None


def main():
    root = sys.argv[1]
    makefile = sys.argv[2] if len(sys.argv) > 2 else os.path.join(root, "Makefile")
    lists = makefile_lists(makefile)
    dpkg = Dpkg()
    where = {}
    for name, pkgs in lists.items():
        for p in pkgs:
            where.setdefault(p, name)
    # what apt installs along with the listed packages
    pulled = {}
    for name, pkgs in lists.items():
        for pkg, via in dpkg.closure(pkgs).items():
            pulled.setdefault(pkg, f"{where.get(via, name)} via {via}")
    functions = set()
    programs = {}       # program -> who uses it
    needed = set()
    # boot/build.sh runs on this machine (make boot); boot/init and
    # boot/menu.sh run inside the medium, on what build.sh copied there.
    files = [os.path.join(root, "tests", "run"), os.path.join(root, "tests", "demo.sh"),
             os.path.join(root, ".ci", "run"), os.path.join(root, "boot", "build.sh")]
    for sub in ("lib", "bench", "guest"):
        d = os.path.join(root, "tests", sub)
        files += [os.path.join(d, f) for f in sorted(os.listdir(d)) if f.endswith(".sh")]
    ts = os.path.join(root, "tests", "ts")
    for suite in sorted(os.listdir(ts)):
        for f in sorted(os.listdir(os.path.join(ts, suite))):
            if "." not in f and not f.endswith("~"):
                files.append(os.path.join(ts, suite, f))
    for f in files:
        if not os.path.isfile(f):
            continue
        found, need = shell_programs(f, functions)
        rel = os.path.relpath(f, root)
        for w in found:
            programs.setdefault(w, rel)
        for w in need:
            programs.setdefault(w, rel)
        needed |= need
    for w in makefile_recipes(makefile):
        programs.setdefault(w, "Makefile")
    ud = os.path.join(root, "tests", "unit")
    for f in sorted(os.listdir(ud)):
        if f.endswith(".c"):
            for w in c_literal_programs(os.path.join(ud, f)):
                programs.setdefault(w, "tests/unit/" + f)
    for w, f in product_programs(root).items():
        programs[w] = "product: " + f
        needed.add(w)
    for w, why in PRODUCT_NEEDS.items():
        programs[w] = "product: " + why
        needed.add(w)
    for w in OPTIONAL:
        needed.discard(w)

    problems = []
    packages = set()
    rows = []
    for w in sorted(programs):
        if w in SHELL_WORDS or w in functions or w in ("imager",):
            continue
        if w in OPTIONAL:
            rows.append((w, "-", "-", "(optional)", OPTIONAL[w]))
            continue
        # Only the system's folders: /usr/local or a pyenv shim is no package.
        path = shutil.which(w, path=SYSTEM_PATH)
        if not path:
            if w in needed:
                problems.append(f"{w}: needed ({programs[w]}) but not installed: no listed package installs it")
            continue
        pkg = alternatives_owner(path, dpkg, lambda p: p in where or p in pulled or dpkg.base(p)) \
            or dpkg_owner(path)
        if not pkg:
            if w in needed:
                problems.append(f"{w}: needed ({programs[w]}), found at {path}, which no Debian package owns")
            continue
        packages.add(pkg)
        if pkg in where:
            inlist = where[pkg]
        elif dpkg.base(pkg):
            inlist = "(base)"
        elif pkg in pulled:
            inlist = "(" + pulled[pkg] + ")"
        else:
            inlist = "MISSING"
            problems.append(f"{w} ({programs[w]}): package {pkg} is in none of the Makefile's DEB_ lists")
        rows.append((w, path, pkg, inlist, programs[w]))
    if KERNEL_PACKAGE not in where:
        problems.append(f"{KERNEL_PACKAGE}: libguestfs's appliance needs a kernel, and no DEB_ list has it")
    for r in rows:
        print("%-22s %-34s %-22s %-32s %s" % r)
    for p in problems:
        print("PROBLEM: " + p)
    print(f"{len(rows)} programs, {len(packages)} packages, {len(problems)} problems")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
