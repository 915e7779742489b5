"""Builds the `grag` package's compiled module with CMake and installs it with the pure-Python
files (python/grag/). The CMake build lives in build-python/ (GRAG_PYTHON_BUILD overrides it),
the folder `make python` uses, so a build done either way is reused by the other."""

import os
import re
import shutil
import subprocess
import sys

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

ROOT = os.path.dirname(os.path.abspath(__file__))


def version():
    with open(os.path.join(ROOT, "CMakeLists.txt"), encoding="utf-8") as f:
        return re.search(r"project\(grag VERSION ([0-9.]+)", f.read()).group(1)


class CMakeBuild(build_ext):
    def build_extension(self, ext):
        out = os.path.abspath(os.environ.get("GRAG_PYTHON_BUILD", os.path.join(ROOT, "build-python")))
        # build-python/ holds CMake's files in cmake/ and the package in grag/ (make python); a
        # CMake build folder configured with GRAG_BUILD_PYTHON (the test build) works too.
        cmake_dir = out if os.path.exists(os.path.join(out, "CMakeCache.txt")) else os.path.join(out, "cmake")
        if not os.path.exists(os.path.join(cmake_dir, "CMakeCache.txt")):
            if not os.path.isdir(os.path.join(ROOT, ".deps", "npm", "node_modules", "tiktoken")):
                sys.exit("grag: run `bash scripts/setup.sh` (or `make setup`) first: it installs "
                         "the compilers, libraries and tokenizer vocabularies the build needs")
            subprocess.check_call([
                "cmake", "-S", ROOT, "-B", cmake_dir, "-G", "Ninja",
                "-DCMAKE_BUILD_TYPE=Release", "-DGRAG_BUILD_PYTHON=ON", "-DGRAG_BUILD_TESTS=OFF",
                "-DGRAG_BUILD_BENCH=OFF", f"-DGRAG_PYTHON_DIR={out}",
                f"-DPython_EXECUTABLE={sys.executable}"])
        with open(os.path.join(cmake_dir, "CMakeCache.txt"), encoding="utf-8") as f:
            cache = f.read()
        found = re.search(r"^GRAG_PYTHON_DIR:PATH=(.*)$", cache, re.M)
        if not re.search(r"^GRAG_BUILD_PYTHON:BOOL=ON$", cache, re.M) or not found:
            sys.exit(f"grag: {cmake_dir} is not configured with -DGRAG_BUILD_PYTHON=ON")
        package_dir = found.group(1)
        jobs = str(os.cpu_count() or 2)
        subprocess.check_call(["cmake", "--build", cmake_dir, "-j", jobs, "--target", "python"])
        built = os.path.join(package_dir, "grag")
        module = next(f for f in os.listdir(built) if f.startswith("_grag.") and f.endswith(".so"))
        target = self.get_ext_fullpath(ext.name)
        os.makedirs(os.path.dirname(target), exist_ok=True)
        shutil.copyfile(os.path.join(built, module), target)


setup(
    version=version(),
    packages=["grag"],
    package_dir={"": "python"},
    package_data={"grag": ["py.typed", "*.pyi"]},
    ext_modules=[Extension("grag._grag", sources=[])],
    cmdclass={"build_ext": CMakeBuild},
    zip_safe=False,
)
