#include "grag/lazy_library.h"

#include <dlfcn.h>

#include <algorithm>
#include <atomic>
#include <mutex>
#include <thread>
#include <utility>
#include <vector>

namespace grag {

struct LazyLibrary::State {
  std::string soname;
  std::string needed_for;
  std::string package;
  std::once_flag once;
  std::atomic<bool> loaded{false};
  void* handle = nullptr;
  Status status;
  std::mutex preload_mu;
  std::thread preload;

  void Load() {
    std::call_once(once, [this] {
      // RTLD_LOCAL: nothing else is meant to bind to its symbols; RTLD_LAZY like a linked one.
      handle = dlopen(soname.c_str(), RTLD_LAZY | RTLD_LOCAL);
      if (handle == nullptr) {
        const char* why = dlerror();
        status =
            Status::Unimplemented(needed_for + " needs the shared library " + soname + " (" +
                                  (why != nullptr ? why : "not found") + "); install " + package);
      }
      loaded = true;
    });
  }
};

namespace {

// The preloads held back by PreloadHolds. Never destroyed: libraries are function-local statics
// whose destructors may run after any other static's.
struct PreloadGate {
  std::mutex mu;
  int holds = 0;
  std::vector<LazyLibrary*> pending;
};
PreloadGate& Gate() {
  static auto* gate = new PreloadGate;
  return *gate;
}

}  // namespace

LazyLibrary::PreloadHold::PreloadHold() {
  std::lock_guard lock(Gate().mu);
  ++Gate().holds;
}

LazyLibrary::PreloadHold::~PreloadHold() {
  std::vector<LazyLibrary*> start;
  {
    std::lock_guard lock(Gate().mu);
    if (--Gate().holds == 0) start.swap(Gate().pending);
  }
  for (LazyLibrary* library : start) library->StartPreload();
}

LazyLibrary::LazyLibrary(std::string soname, std::string needed_for, std::string package)
    : state_(std::make_unique<State>()) {
  state_->soname = std::move(soname);
  state_->needed_for = std::move(needed_for);
  state_->package = std::move(package);
}

LazyLibrary::~LazyLibrary() {
  {
    std::lock_guard lock(Gate().mu);
    auto& pending = Gate().pending;
    pending.erase(std::remove(pending.begin(), pending.end(), this), pending.end());
  }
  std::lock_guard lock(state_->preload_mu);
  if (state_->preload.joinable()) state_->preload.join();
}

void LazyLibrary::Preload() {
  {
    std::lock_guard lock(Gate().mu);
    if (Gate().holds > 0) {
      auto& pending = Gate().pending;
      if (std::find(pending.begin(), pending.end(), this) == pending.end()) {
        pending.push_back(this);
      }
      return;
    }
  }
  StartPreload();
}

void LazyLibrary::StartPreload() {
  std::lock_guard lock(state_->preload_mu);
  if (state_->preload.joinable() || state_->loaded) return;
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
