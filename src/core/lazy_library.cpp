#include "grag/lazy_library.h"

#include <dlfcn.h>

#include <mutex>
#include <thread>
#include <utility>

namespace grag {

struct LazyLibrary::State {
  std::string soname;
  std::string needed_for;
  std::string package;
  std::once_flag once;
  void* handle = nullptr;
  Status status;
  std::mutex preload_mu;
  std::thread preload;

  void Load() {
    std::call_once(once, [this] {
      // RTLD_LOCAL: nothing else is meant to bind to its symbols; RTLD_LAZY like a linked one.
      handle = dlopen(soname.c_str(), RTLD_LAZY | RTLD_LOCAL);
      if (handle != nullptr) return;
      const char* why = dlerror();
      status =
          Status::Unimplemented(needed_for + " needs the shared library " + soname + " (" +
                                (why != nullptr ? why : "not found") + "); install " + package);
    });
  }
};

LazyLibrary::LazyLibrary(std::string soname, std::string needed_for, std::string package)
    : state_(std::make_unique<State>()) {
  state_->soname = std::move(soname);
  state_->needed_for = std::move(needed_for);
  state_->package = std::move(package);
}

LazyLibrary::~LazyLibrary() {
  std::lock_guard lock(state_->preload_mu);
  if (state_->preload.joinable()) state_->preload.join();
}

void LazyLibrary::Preload() {
  std::lock_guard lock(state_->preload_mu);
  if (state_->preload.joinable()) return;
  try {
    state_->preload = std::thread([state = state_.get()] { state->Load(); });
  } catch (const std::system_error&) {
    // No thread to spare: Open loads it when it is needed.
  }
}

Status LazyLibrary::Open() {
  state_->Load();
  return state_->status;
}

Result<void*> LazyLibrary::Symbol(const char* name) {
  GRAG_RETURN_IF_ERROR(Open());
  dlerror();
  void* address = dlsym(state_->handle, name);
  if (address == nullptr) {
    return Status::Unimplemented(state_->soname + " has no " + name + "; " + state_->needed_for +
                                 " needs a newer " + state_->package);
  }
  return address;
}

}  // namespace grag
