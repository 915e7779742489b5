"""`pip install --no-build-isolation .` from the clone: it builds through CMake (here reusing
this build's folder, GRAG_CMAKE_BUILD, so nothing is compiled twice) and the installed package
imports and answers."""

import os
import subprocess
import sys

import pytest

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))


def test_pip_install_no_build_isolation(tmp_path, book_project):
    build = os.environ.get("GRAG_CMAKE_BUILD")
    if not build:
        pytest.skip("GRAG_CMAKE_BUILD does not name this build's CMake folder")
    target = tmp_path / "site"
    env = dict(os.environ, GRAG_PYTHON_BUILD=build, PIP_DISABLE_PIP_VERSION_CHECK="1")
    # pip, CMake and ninja are not ours: no sanitizer runtime preloaded into them.
    pip_env = {k: v for k, v in env.items() if k not in ("LD_PRELOAD", "PYTHONPATH")}
    done = subprocess.run([sys.executable, "-m", "pip", "install", "--no-build-isolation",
                           "--no-deps", "--no-index", "--target", str(target), ROOT],
                          env=pip_env, capture_output=True, text=True)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    env["PYTHONPATH"] = str(target)
    script = ("import grag, sys; e = grag.Engine(sys.argv[1], no_llm=True); "
              "print(grag.__file__); print(len(e.search('Who is Jacob Marley?', k=3).chunks))")
    out = subprocess.run([sys.executable, "-c", script, book_project["root"]], check=True,
                         env=env, capture_output=True, text=True, cwd=str(tmp_path)).stdout.split()
    assert out[0].startswith(str(target))
    assert out[1] == "3"
    assert (target / "grag" / "_grag.pyi").exists() and (target / "grag" / "py.typed").exists()
