#!/usr/bin/env python3
"""Every public top-level type of a documented library is listed in its DocC catalog's topics.

For each target with a `.docc` catalog, collects the types declared at the top level of its
sources as `public` (struct, class, enum, actor, protocol, typealias) and looks for each one as
``Name`` in the catalog's articles. Prints the missing ones and exits non-zero if any.
"""
import pathlib
import re
import sys

root = pathlib.Path(__file__).resolve().parent.parent
declaration = re.compile(r"^public\s+(?:final\s+)?(?:struct|class|enum|actor|protocol|typealias)\s+([A-Za-z_][A-Za-z0-9_]*)", re.M)
missing = []
checked = 0
for catalog in sorted((root / "Sources").glob("*/*.docc")):
    target = catalog.parent
    articles = "\n".join(path.read_text() for path in catalog.rglob("*.md"))
    for source in sorted(target.rglob("*.swift")):
        # Apple-only files are part of the catalog too: they declare public types as well.
        for name in declaration.findall(source.read_text()):
            checked += 1
            if f"``{name}``" not in articles and f"``{name}/" not in articles:
                missing.append(f"{target.name}: {name} ({source.relative_to(root)})")
print(f"docc topics: {checked - len(missing)} of {checked} public types listed")
for line in missing:
    print(f"  not in any topic: {line}")
sys.exit(1 if missing else 0)
