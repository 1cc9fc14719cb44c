"""Conan 2 recipe for memplan, a header-only C++20 library (ConanCenter's
header-library layout). The sources come from this repository
(`export_sources`); a ConanCenter submission takes them from a release
tarball named in conandata.yml instead.

    conan create packaging/conan -o "&:with_milp=True"
"""
import os
import re

from conan import ConanFile
from conan.tools.build import check_min_cppstd
from conan.tools.files import copy, load
from conan.tools.layout import basic_layout

required_conan_version = ">=2.0"


class MemplanConan(ConanFile):
    name = "memplan"
    description = "GPU memory planning for DNN training: swap, recompute, split (TSPLIT, Capuchin, HOME, DTR, DELTA)"
    license = "LicenseRef-memplan"  # the repository has no LICENSE file yet
    topics = ("deep-learning", "gpu", "memory", "training", "header-only")
    homepage = "https://github.com/memplan/memplan"
    url = "https://github.com/conan-io/conan-center-index"
    package_type = "header-library"
    settings = "os", "arch", "compiler", "build_type"
    options = {"with_milp": [True, False], "with_cuda": [True, False]}
    default_options = {"with_milp": False, "with_cuda": False}
    no_copy_source = True

    @property
    def _root(self):
        return os.path.join(self.recipe_folder, "..", "..")

    def set_version(self):
        # The one place the version lives: include/memplan/version.hpp.
        text = load(self, os.path.join(self._root, "include", "memplan", "version.hpp"))
        parts = [re.search(rf"#define MEMPLAN_VERSION_{p} (\d+)", text).group(1) for p in ("MAJOR", "MINOR", "PATCH")]
        self.version = ".".join(parts)

    def export_sources(self):
        copy(self, "include/*", self._root, self.export_sources_folder)

    def layout(self):
        basic_layout(self, src_folder="src")

    def requirements(self):
        self.requires("boost/1.83.0", transitive_headers=True)
        self.requires("nlohmann_json/3.11.3", transitive_headers=True)
        if self.options.with_milp:
            self.requires("coin-cbc/2.10.5", transitive_headers=True, transitive_libs=True)

    def package_id(self):
        # Header-only: one package for every setting; the options change
        # only which dependencies come along.
        self.info.settings.clear()

    def validate(self):
        check_min_cppstd(self, 20)

    def package(self):
        include = os.path.join(self.export_sources_folder, "include")
        excluded = [] if self.options.with_cuda else ["memplan/cuda/*"]
        if not self.options.with_milp:
            excluded.append("memplan/planners/oracles/milp.hpp")
        copy(self, "*.hpp", include, os.path.join(self.package_folder, "include"), excludes=excluded)

    def package_info(self):
        # The CMake package memplan's own install makes: memplan::memplan (the
        # core, Boost's headers), memplan::io (nlohmann_json), memplan::milp
        # (CBC), memplan::cuda (cudart, from the CUDA toolkit outside Conan).
        self.cpp_info.set_property("cmake_file_name", "memplan")
        self.cpp_info.set_property("pkg_config_name", "memplan")
        core = self.cpp_info.components["core"]
        core.set_property("cmake_target_name", "memplan::memplan")
        core.set_property("pkg_config_name", "memplan")
        core.requires = ["boost::headers"]
        core.bindirs = []
        core.libdirs = []
        if self.settings.os in ("Linux", "FreeBSD"):
            core.system_libs = ["pthread"]
        io = self.cpp_info.components["io"]
        io.set_property("cmake_target_name", "memplan::io")
        io.set_property("pkg_config_name", "memplan-io")
        io.requires = ["core", "nlohmann_json::nlohmann_json"]
        io.bindirs = []
        io.libdirs = []
        if self.options.with_milp:
            milp = self.cpp_info.components["milp"]
            milp.set_property("cmake_target_name", "memplan::milp")
            milp.set_property("pkg_config_name", "memplan-milp")
            milp.requires = ["core", "coin-cbc::coin-cbc"]
            milp.defines = ["MEMPLAN_ENABLE_MILP"]
            milp.bindirs = []
            milp.libdirs = []
        if self.options.with_cuda:
            cuda = self.cpp_info.components["cuda"]
            cuda.set_property("cmake_target_name", "memplan::cuda")
            cuda.requires = ["io"]
            cuda.system_libs = ["cudart"]
            cuda.bindirs = []
            cuda.libdirs = []
