"""Fixtures of the Python package's tests: the book indexed without a model, and a scripted
OpenAI-compatible model on a loopback HTTP server (the engine's real HTTP client talks to it).

Run by ctest as python_test (tests/CMakeLists.txt), with PYTHONPATH naming the built package and
GRAG_BIN the grag binary of the same build; by hand:
    PYTHONPATH=build-python GRAG_BIN=build-release/grag python3 -m pytest tests/python
"""

import http.server
import json
import os
import shutil
import threading
import time

import pytest

import grag

HERE = os.path.dirname(os.path.abspath(__file__))
BOOK = os.path.join(HERE, "..", "data", "christmas_carol", "christmas_carol.txt")


def story_text():
    """The book without Project Gutenberg's header and licence (as scripts/demo.sh)."""
    with open(BOOK, encoding="utf-8") as f:
        lines = f.read().splitlines(keepends=True)
    start = next(i for i, l in enumerate(lines) if l.startswith("*** START OF"))
    end = next(i for i, l in enumerate(lines) if l.startswith("*** END OF"))
    return "".join(lines[start + 1:end])


def new_project(root):
    grag.Project.init(root)
    with open(os.path.join(root, "input", "christmas_carol.txt"), "w", encoding="utf-8") as f:
        f.write(story_text())
    return root


@pytest.fixture(scope="session")
def book_project(tmp_path_factory):
    """The demo's project: the book, indexed with no model (read-only for the tests)."""
    root = new_project(str(tmp_path_factory.mktemp("book")))
    seen = []
    summary = grag.Engine(root, no_llm=True).index(progress=seen.append)
    return {"root": root, "summary": summary, "progress": seen}


@pytest.fixture
def book_copy(book_project, tmp_path):
    """A copy of the indexed project a test may change."""
    root = str(tmp_path / "copy")
    shutil.copytree(book_project["root"], root)
    return root


@pytest.fixture
def grag_bin():
    path = os.environ.get("GRAG_BIN")
    if not path or not os.path.exists(path):
        pytest.skip("GRAG_BIN does not name the grag binary of this build")
    return path


class ScriptedModel:
    """An OpenAI-compatible chat endpoint on 127.0.0.1 answering `reply` to every request
    (streamed when asked), after `delay` seconds; it records the requests."""

    def __init__(self, reply="Jacob Marley was Scrooge's partner [S1].", delay=0.0):
        self.reply = reply
        self.delay = delay
        self.requests = []
        model = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):
                pass

            def do_GET(self):
                out = json.dumps({"object": "list", "data": [{"id": "scripted"}]}).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(out)))
                self.end_headers()
                self.wfile.write(out)

            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                model.requests.append(body)
                if model.delay:
                    time.sleep(model.delay)
                if not self.path.endswith("/chat/completions"):
                    self.send_error(404)
                    return
                usage = {"prompt_tokens": 100, "completion_tokens": 10, "total_tokens": 110}
                if body.get("stream"):
                    self.send_response(200)
                    self.send_header("Content-Type", "text/event-stream")
                    self.send_header("Connection", "close")
                    self.end_headers()
                    words = model.reply.split(" ")
                    pieces = [w + (" " if i + 1 < len(words) else "") for i, w in enumerate(words)]
                    for piece in pieces:
                        chunk = {"id": "x", "object": "chat.completion.chunk", "model": "scripted",
                                 "choices": [{"index": 0, "delta": {"content": piece},
                                              "finish_reason": None}]}
                        self.wfile.write(b"data: " + json.dumps(chunk).encode() + b"\n\n")
                    end = {"id": "x", "object": "chat.completion.chunk", "model": "scripted",
                           "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}],
                           "usage": usage}
                    self.wfile.write(b"data: " + json.dumps(end).encode() + b"\n\n")
                    self.wfile.write(b"data: [DONE]\n\n")
                    self.close_connection = True
                    return
                out = json.dumps({
                    "id": "x", "object": "chat.completion", "created": 1700000000,
                    "model": "scripted",
                    "choices": [{"index": 0, "finish_reason": "stop",
                                 "message": {"role": "assistant", "content": model.reply}}],
                    "usage": usage}).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(out)))
                self.end_headers()
                self.wfile.write(out)

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()
        self.base_url = f"http://127.0.0.1:{self.server.server_address[1]}/v1"

    def close(self):
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def scripted_model():
    models = []

    def make(**kw):
        m = ScriptedModel(**kw)
        models.append(m)
        return m

    yield make
    for m in models:
        m.close()
