// See connections.h.
#include "connections.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/select.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <map>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>
#include <unordered_map>
#include <vector>

#include "grag/log.h"

namespace grag::server {

namespace {

using Clock = std::chrono::steady_clock;

thread_local RequestState* current_request = nullptr;

// A request's headers may not be larger than this (cpp-httplib allows 8 KiB a line).
constexpr size_t kMaxHeaderBytes = 64 << 10;

// Room for a chunked body's framing on top of max_body (chunk size lines, trailers).
size_t ChunkedBudget(size_t max_body) { return max_body + max_body / 4 + (64 << 10); }

int MillisUntil(Clock::time_point deadline) {
  const auto left =
      std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
  return static_cast<int>(std::clamp<int64_t>(left, 0, 1 << 30));
}

// Where a request's header block ends (just past its blank line), or npos.
size_t HeaderEnd(std::string_view buf) {
  const size_t crlf = buf.find("\r\n\r\n");
  const size_t lf = buf.find("\n\n");
  if (crlf == std::string_view::npos && lf == std::string_view::npos) return std::string_view::npos;
  if (crlf != std::string_view::npos && (lf == std::string_view::npos || crlf + 2 <= lf))
    return crlf + 4;
  return lf + 2;
}

// How a request's body is framed, from its header block.
struct Framing {
  bool chunked = false;
  bool other_coding = false;  // a transfer coding other than chunked: cpp-httplib cannot frame it
  bool has_length = false;
  uint64_t length = 0;
};
Framing FramingOf(std::string_view head) {
  Framing f;
  size_t pos = head.find('\n');  // past the request line
  while (pos != std::string_view::npos && pos + 1 < head.size()) {
    const size_t start = pos + 1;
    const size_t end = head.find('\n', start);
    std::string_view line =
        head.substr(start, end == std::string_view::npos ? head.npos : end - start);
    pos = end;
    const size_t colon = line.find(':');
    if (colon == std::string_view::npos) continue;
    std::string name(line.substr(0, colon));
    for (auto& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    std::string_view value = line.substr(colon + 1);
    while (!value.empty() && (value.front() == ' ' || value.front() == '\t'))
      value.remove_prefix(1);
    while (!value.empty() && (value.back() == '\r' || value.back() == ' ')) value.remove_suffix(1);
    if (name == "transfer-encoding") {
      std::string v(value);
      for (auto& ch : v) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
      (v == "chunked" ? f.chunked : f.other_coding) = true;
    } else if (name == "content-length") {
      f.has_length = true;
      f.length = std::strtoull(std::string(value).c_str(), nullptr, 10);
    }
  }
  return f;
}

std::string PeerAddress(int fd) {
  sockaddr_storage addr{};
  socklen_t len = sizeof addr;
  if (::getpeername(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) return "";
  char text[INET6_ADDRSTRLEN] = {};
  if (addr.ss_family == AF_INET) {
    ::inet_ntop(AF_INET, &reinterpret_cast<sockaddr_in*>(&addr)->sin_addr, text, sizeof text);
  } else if (addr.ss_family == AF_INET6) {
    ::inet_ntop(AF_INET6, &reinterpret_cast<sockaddr_in6*>(&addr)->sin6_addr, text, sizeof text);
  }
  return text;
}

void AddressOf(int fd, bool peer, std::string& ip, int& port) {
  sockaddr_storage addr{};
  socklen_t len = sizeof addr;
  const int rc = peer ? ::getpeername(fd, reinterpret_cast<sockaddr*>(&addr), &len)
                      : ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  if (rc != 0) return;
  char text[INET6_ADDRSTRLEN] = {};
  if (addr.ss_family == AF_INET) {
    const auto* a = reinterpret_cast<sockaddr_in*>(&addr);
    ::inet_ntop(AF_INET, &a->sin_addr, text, sizeof text);
    port = ntohs(a->sin_port);
  } else if (addr.ss_family == AF_INET6) {
    const auto* a = reinterpret_cast<sockaddr_in6*>(&addr);
    ::inet_ntop(AF_INET6, &a->sin6_addr, text, sizeof text);
    port = ntohs(a->sin6_port);
  }
  ip = text;
}

// Best effort: a short reply on a connection about to be closed (no thread waits for it).
void SendAndForget(int fd, int status, const char* reason, const std::string& message) {
  const std::string body = "{\"error\":{\"type\":\"" +
                           std::string(status == 408 ? "timeout" : "unavailable") +
                           "\",\"message\":\"" + message + "\"}}";
  const std::string reply =
      "HTTP/1.1 " + std::to_string(status) + " " + reason +
      "\r\nContent-Type: application/json\r\nContent-Length: " + std::to_string(body.size()) +
      "\r\nConnection: close\r\n\r\n" + body;
  (void)::send(fd, reply.data(), reply.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
}

}  // namespace

RequestState* CurrentRequest() { return current_request; }

// One client connection. Owned by the watcher while parked, by a pool thread while served.
struct Conn {
  int fd = -1;
  std::string peer;
  std::string buf;  // received, not yet handed to the parser: the start of the next request
  size_t served = 0;
  bool started = false;    // part of a request arrived: deadline is its read deadline
  bool lingering = false;  // replied and shut down for writing: drain, then close
  Clock::time_point deadline;
};

// A request's byte stream for cpp-httplib's parser: the header block gathered by the watcher,
// then the socket, with the request's deadline and its body's budget.
class ConnStream final : public httplib::Stream {
 public:
  ConnStream(Conn& c, const ConnectionLimits& limits, RequestState& state)
      : c_(c), limits_(limits), state_(state) {
    head_ = HeaderEnd(c_.buf);
    framing_ = FramingOf(std::string_view(c_.buf).substr(0, head_));
    if (framing_.chunked) {
      budget_ = ChunkedBudget(limits_.max_body);
    } else if (framing_.has_length) {
      // Over max_body, cpp-httplib answers 413 and skips the body: read none of it.
      budget_ = framing_.length > limits_.max_body ? 0 : framing_.length;
    } else {
      budget_ = 0;
      eof_at_budget_ = true;  // no framing: the body is empty (RFC 9112 §6.3)
    }
    // The body's deadline runs from now, not from the request's first byte: time spent queued
    // for a thread while the pool was busy is not the client's (its headers had their own).
    deadline_ = Clock::now() + limits_.read_timeout;
  }

  // Whether the bytes after this request on the connection can be trusted to start the next one.
  bool BodyConsumed() const {
    if (failed_ || framing_.other_coding) return false;
    const uint64_t body = consumed_ > head_ ? consumed_ - head_ : 0;
    if (framing_.chunked) return body > 0;  // the parser reads a chunked body to its end or fails
    if (framing_.has_length) return body == framing_.length;
    return true;
  }
  // The bytes received past what the parser took.
  std::string Leftover() const { return c_.buf.substr(std::min(pos_, c_.buf.size())); }

  bool is_readable() const override {
    if (pos_ < c_.buf.size()) return true;
    pollfd p{c_.fd, POLLIN, 0};
    return ::poll(&p, 1, MillisUntil(deadline_)) > 0;
  }
  bool is_writable() const override {
    pollfd p{c_.fd, POLLOUT, 0};
    if (::poll(&p, 1, static_cast<int>(limits_.write_timeout.count())) <= 0) return false;
    if (p.revents & (POLLERR | POLLHUP)) return false;
    // A peer that hung up reads as end of file (a streaming client that left).
    char byte;
    const ssize_t n = ::recv(c_.fd, &byte, 1, MSG_PEEK | MSG_DONTWAIT);
    return n != 0;
  }

  ssize_t read(char* ptr, size_t size) override {
    if (size == 0) return 0;
    // The header block, then the body up to its budget.
    if (consumed_ < head_) {
      size = std::min<uint64_t>(size, head_ - consumed_);
    } else {
      const uint64_t body = consumed_ - head_;
      if (body >= budget_) {
        if (eof_at_budget_) return 0;
        if (framing_.chunked) state_.body_over_limit = true;
        failed_ = true;
        return -1;
      }
      size = std::min<uint64_t>(size, budget_ - body);
    }
    if (pos_ < c_.buf.size()) {
      const size_t n = std::min(size, c_.buf.size() - pos_);
      std::memcpy(ptr, c_.buf.data() + pos_, n);
      pos_ += n;
      consumed_ += n;
      return static_cast<ssize_t>(n);
    }
    while (true) {
      pollfd p{c_.fd, POLLIN, 0};
      const int ready = ::poll(&p, 1, MillisUntil(deadline_));
      if (ready == 0) {
        state_.timed_out = true;
        failed_ = true;
        return -1;
      }
      if (ready < 0 && errno == EINTR) continue;
      const ssize_t n = ::recv(c_.fd, ptr, size, MSG_DONTWAIT);
      if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) continue;
      if (n <= 0) {
        failed_ = true;
        return n < 0 ? -1 : 0;
      }
      consumed_ += static_cast<uint64_t>(n);
      return n;
    }
  }

  ssize_t write(const char* ptr, size_t size) override {
    while (true) {
      const ssize_t n = ::send(c_.fd, ptr, size, MSG_NOSIGNAL | MSG_DONTWAIT);
      if (n >= 0) return n;
      if (errno == EINTR) continue;
      if (errno != EAGAIN && errno != EWOULDBLOCK) {
        failed_ = true;
        return -1;
      }
      pollfd p{c_.fd, POLLOUT, 0};
      if (::poll(&p, 1, static_cast<int>(limits_.write_timeout.count())) <= 0) {
        failed_ = true;
        return -1;
      }
    }
  }

  void get_remote_ip_and_port(std::string& ip, int& port) const override {
    AddressOf(c_.fd, true, ip, port);
  }
  void get_local_ip_and_port(std::string& ip, int& port) const override {
    AddressOf(c_.fd, false, ip, port);
  }
  // cpp-httplib (built without CPPHTTPLIB_USE_POLL) uses this only to refuse descriptors past
  // FD_SETSIZE, which its select() cannot watch; this stream polls, so any descriptor will do.
  socket_t socket() const override { return c_.fd < FD_SETSIZE ? c_.fd : 0; }

 private:
  Conn& c_;
  const ConnectionLimits& limits_;
  RequestState& state_;
  size_t head_ = 0;
  Framing framing_;
  uint64_t budget_ = 0;
  bool eof_at_budget_ = false;
  bool failed_ = false;
  size_t pos_ = 0;         // in c_.buf
  uint64_t consumed_ = 0;  // bytes handed to the parser
  Clock::time_point deadline_;
};

class Connections {
 public:
  Connections(HttpServer& http, const ConnectionLimits& limits) : http_(http), limits_(limits) {
    epoll_ = ::epoll_create1(EPOLL_CLOEXEC);
    wake_ = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.fd = wake_;
    ::epoll_ctl(epoll_, EPOLL_CTL_ADD, wake_, &ev);
    watcher_ = std::thread([this] { Watch(); });
    for (size_t i = 0; i < std::max<size_t>(1, limits_.threads); ++i) {
      pool_.emplace_back([this] { Work(); });
    }
  }
  ~Connections() {
    Stop();
    ::close(epoll_);
    ::close(wake_);
  }

  void Stop() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (stopping_) return;
      stopping_ = true;
    }
    Wake();
    ready_cv_.notify_all();
    if (watcher_.joinable()) watcher_.join();
    for (auto& t : pool_) t.join();
    pool_.clear();
    std::lock_guard<std::mutex> lock(mu_);
    for (auto& [fd, c] : parked_) ::close(fd);
    parked_.clear();
    for (auto& c : ready_) ::close(c->fd);
    ready_.clear();
  }

  // A connection just accepted.
  void Adopt(int fd) {
    auto c = std::make_unique<Conn>();
    c->fd = fd;
    c->peer = PeerAddress(fd);
    ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) | O_NONBLOCK);
    {
      std::lock_guard<std::mutex> lock(mu_);
      size_t& open = per_client_[c->peer];
      if (stopping_ || (limits_.max_per_client > 0 && open >= limits_.max_per_client)) {
        if (open == 0) per_client_.erase(c->peer);
        SendAndForget(fd, 503, "Service Unavailable",
                      stopping_ ? "the server is shutting down"
                                : "too many connections from " + c->peer + " (at most " +
                                      std::to_string(limits_.max_per_client) +
                                      ": server.max_connections_per_client)");
        ::close(fd);
        return;
      }
      ++open;
    }
    c->deadline = Clock::now() + limits_.keep_alive_timeout;
    Park(std::move(c));
  }

 private:
  void Wake() {
    const uint64_t one = 1;
    (void)!::write(wake_, &one, sizeof one);
  }

  // Closes a connection and forgets it.
  void Close(std::unique_ptr<Conn> c) {
    ::close(c->fd);
    std::lock_guard<std::mutex> lock(mu_);
    auto it = per_client_.find(c->peer);
    if (it != per_client_.end() && --it->second == 0) per_client_.erase(it);
  }

  // Hands a connection to the watcher until its next request's headers are in.
  void Park(std::unique_ptr<Conn> c) {
    const int fd = c->fd;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (!stopping_) {
        parked_[fd] = std::move(c);
      }
    }
    if (c) return Close(std::move(c));  // shutting down
    epoll_event ev{};
    ev.events = EPOLLIN | EPOLLRDHUP;
    ev.data.fd = fd;
    if (::epoll_ctl(epoll_, EPOLL_CTL_ADD, fd, &ev) != 0) {
      std::unique_ptr<Conn> back;
      {
        std::lock_guard<std::mutex> lock(mu_);
        auto it = parked_.find(fd);
        if (it != parked_.end()) {
          back = std::move(it->second);
          parked_.erase(it);
        }
      }
      if (back) Close(std::move(back));
    }
  }

  // Removes a parked connection from the watcher; nullptr when it is not parked.
  std::unique_ptr<Conn> Unpark(int fd) {
    std::unique_ptr<Conn> c;
    {
      std::lock_guard<std::mutex> lock(mu_);
      auto it = parked_.find(fd);
      if (it == parked_.end()) return nullptr;
      c = std::move(it->second);
      parked_.erase(it);
    }
    ::epoll_ctl(epoll_, EPOLL_CTL_DEL, fd, nullptr);
    return c;
  }

  void Ready(std::unique_ptr<Conn> c) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      ready_.push_back(std::move(c));
    }
    ready_cv_.notify_one();
  }

  // The watcher: reads what parked connections send until a request's headers are in, closes
  // those idle or slow past their deadline.
  void Watch() {
    std::vector<epoll_event> events(256);
    auto last_sweep = Clock::now();
    while (true) {
      const int n = ::epoll_wait(epoll_, events.data(), static_cast<int>(events.size()), 100);
      {
        std::lock_guard<std::mutex> lock(mu_);
        if (stopping_) return;
      }
      for (int i = 0; i < n; ++i) {
        const int fd = events[i].data.fd;
        if (fd == wake_) {
          uint64_t v;
          (void)!::read(wake_, &v, sizeof v);
          continue;
        }
        OnReadable(fd);
      }
      if (Clock::now() - last_sweep >= std::chrono::milliseconds(100)) {
        last_sweep = Clock::now();
        Sweep();
      }
    }
  }

  void OnReadable(int fd) {
    Conn* c = nullptr;
    {
      std::lock_guard<std::mutex> lock(mu_);
      auto it = parked_.find(fd);
      if (it == parked_.end()) return;
      c = it->second.get();  // only this thread touches a parked connection
    }
    char chunk[16 << 10];
    for (int reads = 0; reads < 16; ++reads) {  // then the others' turn (epoll comes back)
      const ssize_t got = ::recv(fd, chunk, sizeof chunk, 0);
      if (got < 0 && errno == EINTR) continue;
      if (got < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) break;
      if (got <= 0) {  // closed by the client, or an error
        if (auto owned = Unpark(fd)) Close(std::move(owned));
        return;
      }
      if (c->lingering) continue;  // replied already: drain what the client still sends
      if (!c->started) {
        c->started = true;
        c->deadline = Clock::now() + limits_.read_timeout;
      }
      c->buf.append(chunk, static_cast<size_t>(got));
      if (HeaderEnd(c->buf) != std::string::npos) {
        if (auto owned = Unpark(fd)) Ready(std::move(owned));
        return;
      }
      if (c->buf.size() > kMaxHeaderBytes) {
        auto owned = Unpark(fd);
        if (!owned) return;
        SendAndForget(fd, 431, "Request Header Fields Too Large",
                      "request headers larger than 64 KiB");
        Close(std::move(owned));
        return;
      }
    }
  }

  void Sweep() {
    const auto now = Clock::now();
    std::vector<int> expired;
    {
      std::lock_guard<std::mutex> lock(mu_);
      for (const auto& [fd, c] : parked_) {
        if (c->deadline <= now) expired.push_back(fd);
      }
    }
    for (int fd : expired) {
      auto c = Unpark(fd);
      if (!c) continue;
      if (c->started && !c->lingering) {
        SendAndForget(fd, 408, "Request Timeout",
                      "the request did not arrive within server.read_timeout (" +
                          std::to_string(limits_.read_timeout.count() / 1000) + " s)");
      }
      Close(std::move(c));
    }
  }

  void Work() {
    while (true) {
      std::unique_ptr<Conn> c;
      {
        std::unique_lock<std::mutex> lock(mu_);
        ready_cv_.wait(lock, [&] { return stopping_ || !ready_.empty(); });
        if (ready_.empty()) return;  // stopping, nothing queued
        c = std::move(ready_.front());
        ready_.pop_front();
      }
      Serve(std::move(c));
    }
  }

  bool Stopping() {
    std::lock_guard<std::mutex> lock(mu_);
    return stopping_;
  }

  // Serves the request whose headers are in c->buf, then parks, requeues or closes c.
  void Serve(std::unique_ptr<Conn> c) {
    RequestState state;
    current_request = &state;
    ConnStream strm(*c, limits_, state);
    const bool last = ++c->served >= limits_.keep_alive_max || Stopping();
    bool closed = false;
    const bool ok = http_.ServeOne(strm, last, closed);
    current_request = nullptr;
    const bool reusable = ok && !closed && !last && !state.close && strm.BodyConsumed();
    if (!reusable) {
      if (ok && !strm.BodyConsumed()) {
        // Unread body bytes in the socket: closing now would reset the connection and could
        // destroy the reply before the client reads it. Shut down writing and drain a while.
        ::shutdown(c->fd, SHUT_WR);
        c->lingering = true;
        c->buf.clear();
        c->deadline = Clock::now() + std::chrono::seconds(2);
        return Park(std::move(c));
      }
      return Close(std::move(c));
    }
    c->buf = strm.Leftover();
    c->started = !c->buf.empty();
    if (HeaderEnd(c->buf) != std::string::npos) {
      c->deadline = Clock::now() + limits_.read_timeout;
      return Ready(std::move(c));  // pipelined: the next request is in already
    }
    c->deadline = Clock::now() + (c->started ? limits_.read_timeout : limits_.keep_alive_timeout);
    Park(std::move(c));
  }

  HttpServer& http_;
  const ConnectionLimits limits_;
  int epoll_ = -1;
  int wake_ = -1;
  std::thread watcher_;
  std::vector<std::thread> pool_;

  std::mutex mu_;
  bool stopping_ = false;                                  // guarded by mu_
  std::unordered_map<int, std::unique_ptr<Conn>> parked_;  // guarded by mu_
  std::map<std::string, size_t> per_client_;               // open connections; guarded by mu_
  std::deque<std::unique_ptr<Conn>> ready_;                // headers in; guarded by mu_
  std::condition_variable ready_cv_;
};

namespace {

// Accepted connections are adopted on the accepting thread: adoption does not block.
class InlineQueue final : public httplib::TaskQueue {
 public:
  void enqueue(std::function<void()> fn) override { fn(); }
  void shutdown() override {}
};

}  // namespace

HttpServer::HttpServer() {
  new_task_queue = [] { return new InlineQueue(); };
}

HttpServer::~HttpServer() { StopConnections(); }

void HttpServer::SetLimits(const ConnectionLimits& limits) {
  connections_ = std::make_unique<Connections>(*this, limits);
}

void HttpServer::StopConnections() {
  if (connections_) connections_->Stop();
}

bool HttpServer::process_and_close_socket(socket_t sock) {
  if (!connections_) {
    ::close(sock);
    return false;
  }
  connections_->Adopt(sock);
  return true;
}

}  // namespace grag::server
