// The MCP server (grag mcp): the Model Context Protocol over stdio, so an assistant (Claude
// Desktop, an IDE agent, any MCP client) can query a grag project as tools. It speaks JSON-RPC
// 2.0 as newline-delimited JSON, one message per line, and offers the tools query, search,
// get_entity, get_community_report, list_communities and add_document. It is a thin shell over
// grag::Engine: tool arguments become engine requests, and results become JSON through
// grag/engine_json.h like everywhere else.
//
// Failures of a tool (a bad argument, no index yet, an entity not found, another process
// writing the index) are tool results with isError, which the model reads and can act on;
// only protocol mistakes (bad JSON, an unknown method or tool) are JSON-RPC errors.
#pragma once

#include <iosfwd>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "grag/config.h"
#include "grag/status.h"

namespace grag {

struct McpOptions {
  std::string server_name = "grag";
  std::string server_version = GRAG_VERSION;
  // Named in the index's lock file while add_document writes, so a `grag index` refused
  // meanwhile says who holds the lock.
  std::string lock_holder = "grag mcp";
};

// One MCP session: the protocol state and the engines it opened. Messages are handled one at
// a time, in order (stdio is one client; a long query simply delays the next message).
class McpServer {
 public:
  McpServer(Config config, McpOptions options);
  ~McpServer();
  McpServer(const McpServer&) = delete;
  McpServer& operator=(const McpServer&) = delete;

  // Handles one line of input (a JSON-RPC message or a batch) and returns the line to send
  // back, without a newline, or nothing (a notification, a blank line, a client's response).
  // Never throws; any input gets a well-formed reply or none.
  std::optional<std::string> HandleLine(std::string_view line);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// Serves MCP on `in`/`out` until `in` ends (the client closed the pipe): reads a line, writes
// the reply and flushes. Logs must go elsewhere (stderr): `out` is the protocol channel.
// Errors: kIoError when `out` cannot be written (the client went away).
Status ServeMcp(const Config& config, std::istream& in, std::ostream& out,
                const McpOptions& options = {});

}  // namespace grag
