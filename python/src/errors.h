// The one place grag's error kinds become Python exceptions: grag.Error and a subclass per kind
// (grag.InvalidArgument, grag.NotFound, ...), each also a subclass of the built-in exception a
// Python user would catch for it (ValueError, LookupError, TimeoutError, ...).
#pragma once

#include <pybind11/pybind11.h>

#include <utility>

#include "grag/status.h"

namespace grag::python {

// Creates the exception classes on `module` (at import).
void RegisterErrors(pybind11::module_& module);

// Raises the exception of `status`'s kind with its message (the GIL held; `status` not OK). The
// exception's `kind` attribute is the kind's name ("not_found").
[[noreturn]] void Raise(const Status& status);

inline void Check(const Status& status) {
  if (!status.ok()) Raise(status);
}

template <typename T>
T Unwrap(Result<T> result) {
  if (!result.ok()) Raise(result.status());
  return std::move(result).value();
}

}  // namespace grag::python
