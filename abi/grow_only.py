#!/usr/bin/env python3
"""Checks the structs that carry their own size (tw_api, tw_config, tw_stats)
between two abidw dumps: every recorded member must still be there, at the
same offset, with the same type, and the struct may only grow at its end.

abidiff cannot say this by itself (a suppression for "members appended at
the end" also hides reordered members), so abi/check.sh suppresses these
three types in abidiff and asks this script instead.

    grow_only.py RECORDED.abi NEW.abi      exit 0 ok, 1 broken, 2 bad input
"""
import sys
import xml.etree.ElementTree as ET

GROWING = ("tw_api", "tw_config", "tw_stats")


class Corpus:
    def __init__(self, path):
        self.types = {}
        self.structs = {}
        for el in ET.parse(path).getroot().iter():
            tid = el.get("id")
            if tid is not None and el.tag != "subrange":
                self.types[tid] = el
            if (el.tag == "class-decl" and el.get("name") in GROWING
                    and el.get("is-declaration-only") != "yes"):
                self.structs[el.get("name")] = el

    def spell(self, tid, depth=0):
        """A type as a comparable string, independent of abidw's type ids."""
        el = self.types.get(tid)
        if el is None or depth > 32:
            return "?" + str(tid)
        tag, name = el.tag, el.get("name")
        if tag == "type-decl":
            return name
        if tag == "typedef-decl":
            return "%s=%s" % (name, self.spell(el.get("type-id"), depth + 1))
        if tag == "pointer-type-def":
            return self.spell(el.get("type-id"), depth + 1) + "*"
        if tag == "qualified-type-def":
            quals = [q for q in ("const", "volatile", "restrict")
                     if el.get(q) == "yes"]
            return " ".join(quals + [self.spell(el.get("type-id"), depth + 1)])
        if tag == "function-type":
            params, ret = [], "void"
            for child in el:
                if child.tag == "parameter":
                    params.append("..." if child.get("is-variadic") == "yes"
                                  else self.spell(child.get("type-id"),
                                                  depth + 1))
                elif child.tag == "return":
                    ret = self.spell(child.get("type-id"), depth + 1)
            return "%s(%s)" % (ret, ", ".join(params))
        if tag == "array-type-def":
            dims = "".join("[%s]" % s.get("length") for s in el
                           if s.tag == "subrange")
            return self.spell(el.get("type-id"), depth + 1) + dims
        if tag == "class-decl":
            return ("struct " if el.get("is-struct") == "yes"
                    else "class ") + str(name)
        if tag == "union-decl":
            return "union " + str(name)
        if tag == "enum-decl":
            return "enum " + str(name)
        return "%s %s" % (tag, name)

    def layout(self, name):
        el = self.structs[name]
        members = []
        for dm in el.findall("data-member"):
            var = dm.find("var-decl")
            members.append((int(dm.get("layout-offset-in-bits")),
                            var.get("name"),
                            self.spell(var.get("type-id"))))
        return int(el.get("size-in-bits")), members


def main(argv):
    if len(argv) != 3:
        print(__doc__.strip(), file=sys.stderr)
        return 2
    old, new = Corpus(argv[1]), Corpus(argv[2])
    problems = []
    for name in GROWING:
        if name not in old.structs:
            continue  # not in the record (yet): nothing to keep
        if name not in new.structs:
            problems.append("struct %s: no longer in the library's ABI" % name)
            continue
        old_size, old_members = old.layout(name)
        new_size, new_members = new.layout(name)
        if new_size < old_size:
            problems.append("struct %s: shrank from %d to %d bits"
                            % (name, old_size, new_size))
        by_name = {m[1]: m for m in new_members}
        for offset, member, spelled in old_members:
            now = by_name.get(member)
            if now is None:
                problems.append("struct %s: member '%s' removed"
                                % (name, member))
            elif now[0] != offset:
                problems.append("struct %s: member '%s' moved from bit %d to %d"
                                % (name, member, offset, now[0]))
            elif now[2] != spelled:
                problems.append("struct %s: member '%s' changed type\n"
                                "    from %s\n    to   %s"
                                % (name, member, spelled, now[2]))
        known = {m[1] for m in old_members}
        for offset, member, _ in new_members:
            if member not in known and offset < old_size:
                problems.append("struct %s: new member '%s' at bit %d, inside "
                                "the recorded %d bits (append at the end)"
                                % (name, member, offset, old_size))
            elif member not in known:
                print("note: struct %s grew: member '%s' appended at bit %d"
                      % (name, member, offset))
    for p in problems:
        print("INCOMPATIBLE: " + p)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
