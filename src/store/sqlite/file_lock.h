// An exclusive advisory lock on a file (flock): one holder at a time across processes, released
// by the OS when the holder exits or dies, SIGKILL included. Internal to the store module.
#pragma once

#include <functional>
#include <string>

#include "grag/status.h"

namespace grag::store {

class FileLock {
 public:
  FileLock() = default;
  FileLock(FileLock&& other) noexcept;
  FileLock& operator=(FileLock&& other) noexcept;
  FileLock(const FileLock&) = delete;
  FileLock& operator=(const FileLock&) = delete;
  ~FileLock();

  // Takes the lock on `path` (created if missing) and writes `holder` (e.g. "pid 123: grag
  // index") into it for whoever finds it taken. When another process holds it: kUnavailable
  // naming that holder, or, with `wait`, `on_wait(holder)` once and then a blocking wait.
  // kIoError when the file cannot be created (a read-only folder among others).
  static Result<FileLock> Acquire(const std::string& path, const std::string& holder, bool wait,
                                  const std::function<void(const std::string&)>& on_wait);

  bool held() const { return fd_ >= 0; }

 private:
  explicit FileLock(int fd) : fd_(fd) {}
  int fd_ = -1;
};

}  // namespace grag::store
