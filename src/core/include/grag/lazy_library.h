// A shared library opened the first time it is needed (dlopen) instead of at start-up.
//
// The optional parts' libraries, with everything they pull in, were most of a one-off
// command's start-up: libcurl brings 30 more shared objects (about 5 ms to map and relocate),
// igraph 17 (3 ms), libpq a dozen. A question that never clusters and never connects to
// PostgreSQL now never loads igraph or libpq, and the model client starts loading libcurl in
// the background as soon as it is made, so the load overlaps the question's own work.
//
// The functions a module calls are resolved by name into a table of pointers whose types come
// from the library's own header (decltype(&::name)), so a call through the table is checked by
// the compiler exactly as a direct call would be.
#pragma once

#include <memory>
#include <string>

#include "grag/status.h"

namespace grag {

class LazyLibrary {
 public:
  // `soname` as the dynamic loader finds it (libcurl.so.4); `needed_for` and `package` make
  // the error when it is missing say what does not work and what to install.
  LazyLibrary(std::string soname, std::string needed_for, std::string package);
  ~LazyLibrary();  // waits for a load still running in the background
  LazyLibrary(const LazyLibrary&) = delete;
  LazyLibrary& operator=(const LazyLibrary&) = delete;

  // Starts opening the library on a background thread unless that has begun already.
  void Preload();
  // Opens it (or waits for the background load) once; the same answer every time after. A
  // missing library is kUnimplemented (not worth retrying), naming the package to install.
  Status Open();
  // The address of `name` in the opened library (Open first).
  Result<void*> Symbol(const char* name);

  // Resolves `name` into `*slot`, typed as the function's own declaration.
  template <typename F>
  Status Resolve(F*& slot, const char* name) {
    GRAG_ASSIGN_OR_RETURN(void* address, Symbol(name));
    slot = reinterpret_cast<F*>(address);
    return Status::Ok();
  }

 private:
  struct State;
  std::unique_ptr<State> state_;
};

}  // namespace grag
