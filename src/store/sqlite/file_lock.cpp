#include "file_lock.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <utility>

namespace grag::store {
namespace {

std::string ReadHolder(int fd) {
  char buf[256];
  const ssize_t n = pread(fd, buf, sizeof(buf) - 1, 0);
  if (n <= 0) return "another process";
  std::string s(buf, static_cast<size_t>(n));
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
  return s.empty() ? "another process" : s;
}

}  // namespace

FileLock::FileLock(FileLock&& other) noexcept : fd_(std::exchange(other.fd_, -1)) {}

FileLock& FileLock::operator=(FileLock&& other) noexcept {
  if (this != &other) {
    if (fd_ >= 0) close(fd_);
    fd_ = std::exchange(other.fd_, -1);
  }
  return *this;
}

FileLock::~FileLock() {
  // Closing the descriptor releases the lock. The file stays: removing it would let a second
  // process lock a new file while a third still waits on the old one.
  if (fd_ >= 0) close(fd_);
}

Result<FileLock> FileLock::Acquire(const std::string& path, const std::string& holder, bool wait,
                                   const std::function<void(const std::string&)>& on_wait) {
  const int fd = open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0) {
    return Status::IoError("cannot create the lock file " + path + ": " + std::strerror(errno));
  }
  FileLock lock(fd);
  while (flock(fd, LOCK_EX | LOCK_NB) != 0) {
    if (errno == EINTR) continue;
    if (errno != EWOULDBLOCK) {
      return Status::IoError("cannot lock " + path + ": " + std::strerror(errno));
    }
    const std::string other = ReadHolder(fd);
    if (!wait) {
      return Status::Unavailable(other + " is writing this index (lock " + path +
                                 "); wait for it to finish, or pass --wait to queue behind it");
    }
    if (on_wait) on_wait(other);
    while (flock(fd, LOCK_EX) != 0) {
      if (errno != EINTR) {
        return Status::IoError("cannot lock " + path + ": " + std::strerror(errno));
      }
    }
    break;
  }
  const std::string text = holder + "\n";
  if (ftruncate(fd, 0) != 0 || pwrite(fd, text.data(), text.size(), 0) < 0) {
    // The lock is held all the same; only the note for others is missing.
  }
  return lock;
}

}  // namespace grag::store
