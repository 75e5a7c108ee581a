#!/usr/bin/env python3
"""Every module a target imports is declared in its Package.swift entry.

SwiftPM on Linux builds a target that imports a module its dependencies bring in only
transitively (NIOCore through Hummingbird, say); Xcode's explicit-module builds refuse it. This
compares each target's `import` lines with `swift package dump-package` and lists what is missing.
Exits 1 when anything is.
"""
import json
import os
import re
import subprocess
import sys

# The toolchain's and the platforms' own modules: never declared.
SYSTEM = {
    "Foundation", "FoundationEssentials", "FoundationNetworking", "Dispatch", "Testing", "XCTest",
    "Glibc", "Darwin", "Musl", "Android", "WinSDK", "Synchronization", "Observation", "_Concurrency",
    "Combine", "Network", "Security", "CryptoKit", "os", "SwiftUI", "UIKit", "AppKit", "BackgroundTasks",
}
IMPORT = re.compile(r"^\s*(?:@[\w()]+\s+)*(?:(?:public|package|internal|fileprivate|private)\s+)?import\s+(?:(?:struct|class|enum|protocol|func|var|let|typealias)\s+)?([A-Za-z_][\w]*)")


def declared(target):
    names = set()
    for dependency in target["dependencies"]:
        for kind in ("byName", "target", "product"):
            if kind in dependency:
                names.add(dependency[kind][0])
    return names


def imported(path):
    modules = {}
    for root, _, files in os.walk(path):
        for name in files:
            if not name.endswith(".swift"):
                continue
            file = os.path.join(root, name)
            with open(file, encoding="utf-8") as source:
                for number, line in enumerate(source, 1):
                    match = IMPORT.match(line)
                    if match:
                        modules.setdefault(match.group(1), f"{file}:{number}")
    return modules


def main():
    package = json.loads(subprocess.run(["swift", "package", "dump-package"], check=True,
                                        capture_output=True, text=True).stdout)
    missing = []
    for target in package["targets"]:
        if target["type"] in ("system", "binary", "plugin", "macro"):
            continue
        path = target.get("path") or os.path.join("Tests" if target["type"] == "test" else "Sources", target["name"])
        allowed = declared(target) | SYSTEM | {target["name"]}
        for module, where in sorted(imported(path).items()):
            if module not in allowed:
                missing.append(f"{target['name']} imports {module} ({where}) but does not declare it")
    for line in missing:
        print(line)
    print(f"imports: {len(missing)} undeclared in {len(package['targets'])} targets")
    return 1 if missing else 0


if __name__ == "__main__":
    sys.exit(main())
