// grag serve: the HTTP API (and OpenAI-compatible chat endpoint) over this project's index.
//
// This file is built twice. In `grag-serve` (GRAG_CLI_SERVER) the command runs the server. In
// `grag` it replaces the process with grag-serve, the binary beside it, passing the command line
// on unchanged: only grag-serve links cpp-httplib and with it OpenSSL, whose loading and
// initialisation were a third of every other command's start-up.
#include <pthread.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <thread>

#include "cli.h"
#include "grag/engine.h"
#include "grag/log.h"
#ifdef GRAG_CLI_SERVER
#include "grag/server.h"
#endif

namespace grag::cli {
namespace {

struct ServeOpts {
  std::optional<std::string> host;
  std::optional<int64_t> port;
  bool openapi = false;
};

#ifndef GRAG_CLI_SERVER
// Runs grag-serve (beside this binary) with the same arguments; returns only on failure.
int ExecServeBinary(char** argv) {
  std::error_code ec;
  const std::filesystem::path self = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (ec) return Fail(Status::Internal("cannot locate the grag binary: " + ec.message()));
  const std::filesystem::path serve = self.parent_path() / "grag-serve";
  ::execv(serve.c_str(), argv);
  const int err = errno;
  return Fail(Status::Unavailable(
      "cannot run " + serve.string() + " (" + std::strerror(err) +
      "): `grag serve` runs the grag-serve binary, which is built and installed beside grag"));
}
#endif

}  // namespace

Command AddServeCommand(CLI::App& app, GlobalOptions& g) {
  auto* cmd = app.add_subcommand(
      "serve",
      "Serve the index over HTTP: JSON API (query, search, documents, index jobs with progress "
      "events, entities, relationships, communities, chunks, stats; GET /openapi.json "
      "describes it) and an OpenAI-compatible chat endpoint (POST /v1/chat/completions, "
      "models " +
          QueryMethodNames(", ", "grag-") +
          "). Listens on "
          "127.0.0.1:8080 by default (settings server.*). With server.api_keys (or GRAG_API_KEYS) "
          "set, every route but /health needs `Authorization: Bearer KEY`. SIGINT or SIGTERM "
          "stops it cleanly: a running index job stops resumably, requests in flight finish.");
  auto o = std::make_shared<ServeOpts>();
  cmd->add_option("--host", o->host, "Address to listen on (default server.host, 127.0.0.1)");
  cmd->add_option("--port", o->port, "TCP port (default server.port, 8080; 0: any free port)")
      ->check(CLI::Range(int64_t{0}, int64_t{65535}));
  cmd->add_flag("--openapi", o->openapi,
                "Print the API's OpenAPI document (what GET /openapi.json returns) and stop");
#ifndef GRAG_CLI_SERVER
  // The options stay alive with the command: CLI11 writes --host and --port into *o.
  return {cmd, [o, &g]() { return ExecServeBinary(g.argv); }};
#else
  return {cmd, [o, &g]() {
            auto config = LoadProjectConfig(g);
            if (!config.ok()) return Fail(config.status());
            if (o->host) config->server.host = *o->host;
            if (o->port) config->server.port = *o->port;
            if (o->openapi) {
              auto server = Server::Create(*config);
              if (!server.ok()) return Fail(server.status());
              std::cout << (*server)->OpenApiJson() << "\n";
              return kExitOk;
            }
            // Signals are taken by one thread (sigwait), never by a handler: Shutdown is not
            // async-signal-safe. Blocked before any other thread exists, so all inherit it.
            sigset_t signals;
            sigemptyset(&signals);
            sigaddset(&signals, SIGINT);
            sigaddset(&signals, SIGTERM);
            pthread_sigmask(SIG_BLOCK, &signals, nullptr);
            const std::string index = config->IndexLabel();
            auto server = Server::Create(*config);
            if (!server.ok()) return Fail(server.status());
            std::atomic<bool> done{false};
            std::thread waiter([&] {
              int sig = 0;
              sigwait(&signals, &sig);
              if (done) return;  // woken by ourselves after Run returned
              Log(LogLevel::kInfo, "serve", sig == SIGINT ? "interrupted" : "terminated");
              (*server)->Shutdown();
            });
            const Status st = (*server)->Run([&](const std::string& host, int port) {
              Log(LogLevel::kInfo, "serve",
                  "index " + index + "; model: " +
                      (LogicalModel(config->llm.model, config->llm.endpoints).empty()
                           ? std::string("none (extractive answers)")
                           : LogicalModel(config->llm.model, config->llm.endpoints)));
              std::cout << "grag serve: listening on http://" << host << ":" << port
                        << (config->server.api_keys.empty() ? "" : " (API keys required)")
                        << std::endl;
            });
            done = true;
            pthread_kill(waiter.native_handle(), SIGTERM);
            waiter.join();
            if (!st.ok()) return Fail(st);
            return kExitOk;
          }};
#endif
}

}  // namespace grag::cli
