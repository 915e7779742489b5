// The connection layer under grag serve: cpp-httplib parses requests and runs the routes, but
// connections are kept here, so that a client can hold a thread only while the server works for
// it.
//
// cpp-httplib 0.11 (Debian 12) gives each connection a thread of its pool from accept to close:
// an idle keep-alive client held one for its keep-alive time, a client trickling its headers for
// the whole read timeout, so a few dozen slow or idle clients left none for anyone else, and a
// body without Content-Length was read until the client closed. Here:
//   - one thread (epoll) watches every connection that is between requests or still sending its
//     headers; a connection reaches a pool thread only once a request's headers are all in;
//   - a request's headers must arrive within read_timeout of its first byte, its body within
//     read_timeout of a thread starting to read it (else 408); an idle connection is closed
//     after keep_alive_timeout, and after keep_alive_max requests;
//   - a request body is bounded whatever its framing: Content-Length by cpp-httplib
//     (max_body), chunked here (reading stops past max_body plus room for the framing, and the
//     handler sees body_over_limit); a POST with neither Content-Length nor chunking has an
//     empty body, as HTTP/1.1 says, instead of one read until the client hangs up;
//   - at most max_per_client connections from one address (more: 503, closed).
//
// Thread-safety: Start, Stop and Adopt may be called from any thread.
#pragma once

#include <httplib.h>

#include <chrono>
#include <cstddef>
#include <memory>

namespace grag::server {

struct ConnectionLimits {
  size_t threads = 64;  // requests served at once (pool threads)
  std::chrono::milliseconds read_timeout{10000};
  std::chrono::milliseconds write_timeout{300000};
  std::chrono::milliseconds keep_alive_timeout{5000};
  size_t keep_alive_max = 100;
  size_t max_per_client = 256;  // 0: no cap
  size_t max_body = 32 << 20;   // bytes
};

// What the connection layer knows about the request being served on this thread, for the
// handlers (cpp-httplib reports a failed body read as a bare 400).
struct RequestState {
  bool body_over_limit = false;  // a chunked body went past max_body: 413
  bool timed_out = false;        // the body did not arrive within read_timeout: 408
  bool close = false;            // set by a handler: close the connection after the reply
};
// The state of the request this thread serves; nullptr outside one.
RequestState* CurrentRequest();

class Connections;

// httplib::Server with its connections handled by Connections (above).
class HttpServer : public httplib::Server {
 public:
  HttpServer();
  ~HttpServer() override;
  // Before listening.
  void SetLimits(const ConnectionLimits& limits);
  // After listen returns (or instead of listening): closes idle connections, lets queued and
  // running requests finish and joins the threads. Idempotent.
  void StopConnections();

 protected:
  bool process_and_close_socket(socket_t sock) override;

 private:
  friend class Connections;
  // Serves one request of `strm` (cpp-httplib's parser and routes).
  bool ServeOne(httplib::Stream& strm, bool close_connection, bool& connection_closed) {
    return process_request(strm, close_connection, connection_closed, nullptr);
  }
  std::unique_ptr<Connections> connections_;
};

}  // namespace grag::server
