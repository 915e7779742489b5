// grag mcp: serve the project to an MCP client (Claude Desktop, an IDE agent) over stdio.
#include <iostream>

#include "cli.h"
#include "grag/mcp.h"

namespace grag::cli {

Command AddMcpCommand(CLI::App& app, GlobalOptions& g) {
  auto* cmd = app.add_subcommand(
      "mcp",
      "Serve this project as a Model Context Protocol server on standard input and output, so "
      "an assistant can use it as tools: query (answer with citations), search (ranked "
      "passages), get_entity, get_community_report, list_communities and add_document (save "
      "a text into the input folder and index it). An MCP client starts this command itself "
      "and talks JSON-RPC over its pipes; it runs until the client closes standard input. Logs "
      "go to stderr (the client's log), never to stdout.");
  cmd->footer(
      "Claude Desktop (claude_desktop_config.json) and most MCP clients take:\n"
      "  {\"mcpServers\": {\"grag\": {\"command\": \"grag\",\n"
      "                           \"args\": [\"--root\", \"/path/to/project\", \"mcp\"]}}}\n"
      "(\"command\": an absolute path when grag is not on the client's PATH). Put global\n"
      "options (--root, --no-llm, --set) before `mcp`; API keys can be given in the\n"
      "client's \"env\" block (GRAG_LLM_API_KEY, ...). Queries need an index (`grag index`, or\n"
      "the add_document tool).");
  return {cmd, [&g]() {
            auto config = LoadProjectConfig(g);
            if (!config.ok()) return Fail(config.status());
            McpOptions options;  // named "grag mcp" in the lock file while it writes
            // stdout carries only protocol messages; nothing else in grag writes there.
            Status served = ServeMcp(*config, std::cin, std::cout, options);
            if (!served.ok()) return Fail(served);
            return kExitOk;
          }};
}

}  // namespace grag::cli
