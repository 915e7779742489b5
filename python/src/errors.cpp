#include "errors.h"

#include <array>
#include <string>

namespace py = pybind11;

namespace grag::python {
namespace {

struct Kind {
  ErrorCode code;
  const char* name;   // the class, grag.<name>
  PyObject* builtin;  // a second base: the built-in exception it also is (nullptr: none)
  const char* doc;
};

// Built-in bases are filled in at registration (the PyExc_* objects are not constants).
std::array<Kind, 14> Kinds() {
  return {{
      {ErrorCode::kInvalidArgument, "InvalidArgument", PyExc_ValueError,
       "The input is wrong: a bad setting, question, method, path or value."},
      {ErrorCode::kNotFound, "NotFound", PyExc_LookupError,
       "A file, document, index or record does not exist (no index yet: run index())."},
      {ErrorCode::kAlreadyExists, "AlreadyExists", nullptr,
       "Something to be created exists already (an export's files, without force=True)."},
      {ErrorCode::kIoError, "IoError", PyExc_OSError,
       "The operating system refused a read or write."},
      {ErrorCode::kCorruption, "Corruption", nullptr,
       "Stored data is not what it should be (see check())."},
      {ErrorCode::kUnavailable, "Unavailable", PyExc_ConnectionError,
       "A model endpoint or database failed (network error, 5xx after retries)."},
      {ErrorCode::kTimeout, "Timeout", PyExc_TimeoutError, "A deadline passed."},
      {ErrorCode::kRateLimited, "RateLimited", nullptr, "The model endpoint kept answering 429."},
      {ErrorCode::kPermissionDenied, "PermissionDenied", PyExc_PermissionError,
       "A service refused the credentials (HTTP 401/403), or the index is read-only."},
      {ErrorCode::kParse, "ParseError", PyExc_ValueError, "A reply or a file could not be parsed."},
      {ErrorCode::kCancelled, "Cancelled", nullptr,
       "The work was cancelled (Engine.cancel()); what was done is stored and resumable."},
      {ErrorCode::kResourceExhausted, "ResourceExhausted", nullptr,
       "A configured budget is spent (llm.max_calls, llm.max_cost)."},
      {ErrorCode::kUnimplemented, "Unimplemented", PyExc_NotImplementedError,
       "Not supported by this index or backend."},
      {ErrorCode::kInternal, "InternalError", PyExc_RuntimeError,
       "A bug in grag: please report it."},
  }};
}

PyObject* g_base = nullptr;
std::array<PyObject*, 32> g_by_code{};  // indexed by ErrorCode

}  // namespace

void RegisterErrors(py::module_& module) {
  g_base = PyErr_NewExceptionWithDoc(
      "grag.Error",
      "Base of every grag error. `kind` names the kind (\"not_found\", ...), `str(e)` is the "
      "engine's message.",
      nullptr, nullptr);
  if (g_base == nullptr) throw py::error_already_set();
  module.add_object("Error", py::reinterpret_borrow<py::object>(g_base));
  for (const Kind& k : Kinds()) {
    const std::string qualified = std::string("grag.") + k.name;
    py::tuple bases = k.builtin != nullptr
                          ? py::make_tuple(py::handle(g_base), py::handle(k.builtin))
                          : py::make_tuple(py::handle(g_base));
    PyObject* type = PyErr_NewExceptionWithDoc(qualified.c_str(), k.doc, bases.ptr(), nullptr);
    if (type == nullptr) throw py::error_already_set();
    g_by_code.at(static_cast<size_t>(k.code)) = type;
    module.add_object(k.name, py::reinterpret_borrow<py::object>(type));
  }
}

void Raise(const Status& status) {
  PyObject* type = g_by_code.at(static_cast<size_t>(status.code()));
  if (type == nullptr) type = g_base;
  py::object error = py::reinterpret_borrow<py::object>(type)(status.message());
  error.attr("kind") = std::string(ErrorCodeName(status.code()));
  PyErr_SetObject(type, error.ptr());
  throw py::error_already_set();
}

}  // namespace grag::python
