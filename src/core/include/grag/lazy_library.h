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

  // Starts opening the library on a background thread unless that has begun already (or, while
  // a PreloadHold lives, once the last one is gone).
  void Preload();

  // Holds back the start of background loads while it lives. dlopen holds the dynamic loader's
  // lock for the whole load (libcurl and its 30 libraries: ~5 ms), and every thread that starts
  // a thread (its TLS is set up under that lock) or first touches a thread_local with a
  // destructor waits for it meanwhile: a one-off question's retriever started its loader
  // thread only after libcurl was in. A command takes a hold until it has started its own
  // threads, then the loads overlap its work instead of stalling it. Timing only: Open loads
  // at once whatever holds there are.
  class PreloadHold {
   public:
    PreloadHold();
    ~PreloadHold();
    PreloadHold(const PreloadHold&) = delete;
    PreloadHold& operator=(const PreloadHold&) = delete;
  };
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
  void StartPreload();

  struct State;
  std::unique_ptr<State> state_;
};

}  // namespace grag
