// grag serve: the HTTP API over one project's engine, a thin shell like the CLI. JSON in and
// out; the same result shapes as `--json` (grag/engine_json.h); an OpenAI-compatible chat
// endpoint; indexing as background jobs with progress over Server-Sent Events. Every route is
// declared once, in a table that both registers it and generates GET /openapi.json.
//
// Thread model: one thread watches idle connections and those still sending headers
// (src/server/connections.h); requests are served by a pool of server.threads threads; engine calls
// (queries, searches, chat) run at most server.workers at once. Queries use a read-only engine
// (its own SQLite connection, so they go on while an index job writes through another); when a
// job finishes, the next request gets a fresh read engine that sees the new index, and requests
// in flight finish on the old one.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include "grag/config.h"
#include "grag/status.h"

namespace grag {

// The one place a library error kind becomes an HTTP status code and an error type name.
int HttpStatusFor(ErrorCode code);
std::string_view ErrorTypeName(ErrorCode code);  // "invalid_argument", "not_found", ...

class Server {
 public:
  // Checks the settings (config.server) and prepares the routes; nothing is bound yet and the
  // index need not exist (it can be built through the API).
  static Result<std::unique_ptr<Server>> Create(Config config);
  ~Server();
  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;

  // Binds server.host:server.port (port 0: any free port), calls on_listening with the port,
  // and serves until Shutdown. Errors: kUnavailable when the address cannot be bound.
  Status Run(const std::function<void(const std::string& host, int port)>& on_listening = {});

  // Stops accepting connections, cancels a running index job (it stays resumable, as after
  // Ctrl-C) and lets requests in flight finish; Run then returns. Thread-safe (not from a
  // signal handler: call it from a thread that waited for the signal).
  void Shutdown();

  // The API described as OpenAPI 3 (JSON), from the route table the server registers.
  std::string OpenApiJson() const;

  struct Impl;

 private:
  explicit Server(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace grag
