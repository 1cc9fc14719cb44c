#!/usr/bin/env python3
"""Lints the Conan recipe and the vcpkg port (packaging/), which no client on
this machine can run: Python syntax, the fields ConanCenter and the vcpkg
registry require, features and options that name real CMake options, and
one version everywhere (include/memplan/version.hpp's).

    python3 tests/python/test_recipes.py
"""
import ast
import json
import pathlib
import re
import sys

ROOT = pathlib.Path(__file__).resolve().parents[2]
CONAN = ROOT / "packaging" / "conan"
PORT = ROOT / "packaging" / "vcpkg" / "ports" / "memplan"
failures = []


def check(ok, what):
    if not ok:
        failures.append(what)


def version():
    text = (ROOT / "include" / "memplan" / "version.hpp").read_text()
    return ".".join(re.search(rf"#define MEMPLAN_VERSION_{p} (\d+)", text).group(1) for p in ("MAJOR", "MINOR", "PATCH"))


def class_fields(path):
    """The recipe class's literal attributes and its method names."""
    tree = ast.parse(path.read_text(), filename=str(path))  # a syntax error fails here
    recipe = next(n for n in tree.body if isinstance(n, ast.ClassDef))
    fields, methods = {}, set()
    for node in recipe.body:
        if isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Name):
            try:
                fields[node.targets[0].id] = ast.literal_eval(node.value)
            except ValueError:
                fields[node.targets[0].id] = None
        elif isinstance(node, ast.FunctionDef):
            methods.add(node.name)
    return fields, methods


def lint_conan():
    fields, methods = class_fields(CONAN / "conanfile.py")
    for field in ("name", "description", "license", "topics", "homepage", "url", "package_type", "settings"):
        check(field in fields, f"conanfile.py: no `{field}`")
    check(fields.get("name") == "memplan", "conanfile.py: name is not 'memplan'")
    check(fields.get("package_type") == "header-library", "conanfile.py: package_type is not 'header-library'")
    check(set(fields.get("options", {})) == {"with_milp", "with_cuda"}, "conanfile.py: options are not with_milp, with_cuda")
    check(fields.get("default_options") == {"with_milp": False, "with_cuda": False},
          "conanfile.py: optional features must default to off")
    for method in ("requirements", "validate", "package", "package_id", "package_info", "layout"):
        check(method in methods, f"conanfile.py: no {method}()")
    text = (CONAN / "conanfile.py").read_text()
    check("check_min_cppstd(self, 20)" in text, "conanfile.py: validate() does not check_min_cppstd(self, 20)")
    for target in ("memplan::memplan", "memplan::io", "memplan::milp", "memplan::cuda"):
        check(f'"{target}"' in text, f"conanfile.py: package_info() names no {target}")
    test_fields, test_methods = class_fields(CONAN / "test_package" / "conanfile.py")
    check({"requirements", "build", "test"} <= test_methods, "test_package/conanfile.py: requirements, build, test")
    for name in ("CMakeLists.txt", "test_package.cpp"):
        check((CONAN / "test_package" / name).is_file(), f"test_package/{name} is missing")


def lint_vcpkg():
    manifest = json.loads((PORT / "vcpkg.json").read_text())
    for field in ("name", "version", "description", "homepage", "license", "dependencies", "features"):
        check(field in manifest, f"vcpkg.json: no `{field}`")
    check(manifest.get("name") == "memplan", "vcpkg.json: name is not 'memplan'")
    check(manifest.get("version") == version(), f"vcpkg.json: version {manifest.get('version')} is not {version()}")
    check(set(manifest.get("features", {})) == {"milp", "cuda"}, "vcpkg.json: features are not milp, cuda")
    for name, feature in manifest.get("features", {}).items():
        check("description" in feature, f"vcpkg.json: feature {name} has no description")
    names = [d if isinstance(d, str) else d["name"] for d in manifest.get("dependencies", [])]
    check({"vcpkg-cmake", "vcpkg-cmake-config"} <= set(names), "vcpkg.json: vcpkg-cmake(-config) are not dependencies")
    portfile = (PORT / "portfile.cmake").read_text()
    cmake = (ROOT / "CMakeLists.txt").read_text()
    for feature, option in re.findall(r"^\s+(milp|cuda) (MEMPLAN_\w+)$", portfile, re.M):
        check(f"option({option} " in cmake, f"portfile.cmake: feature {feature} sets {option}, which CMake lacks")
    check(len(re.findall(r"^\s+(milp|cuda) MEMPLAN_", portfile, re.M)) == 2, "portfile.cmake: maps not both features")
    for call in ("vcpkg_cmake_configure", "vcpkg_cmake_install", "vcpkg_cmake_config_fixup", "vcpkg_install_copyright"):
        check(call + "(" in portfile, f"portfile.cmake: no {call}")
    check((PORT / "usage").is_file(), "the port has no usage file")


def main():
    lint_conan()
    lint_vcpkg()
    for f in failures:
        print("FAIL:", f)
    if not failures:
        print(f"recipes: the Conan recipe and the vcpkg port of memplan {version()} pass the lint")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
