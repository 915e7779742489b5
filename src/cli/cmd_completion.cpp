// grag completion SHELL and grag manpage: shell completions and the man page, both written from
// the command table itself (the CLI11 app every command registered into), so they never drift
// from `--help`. `make install` and the Debian package install what these print.
#include <algorithm>
#include <ctime>
#include <sstream>

#include "cli.h"

namespace grag::cli {
namespace {

// The subcommands shown in --help (an empty group hides one, as `manpage` is).
std::vector<CLI::App*> Visible(CLI::App& app) {
  std::vector<CLI::App*> out;
  for (CLI::App* sub : app.get_subcommands([](CLI::App* s) { return !s->get_group().empty(); })) {
    out.push_back(sub);
  }
  return out;
}

// Every spelling of `app`'s options ("--json", "-v", "--verbose"), the help flag's too.
std::vector<std::string> OptionNames(CLI::App& app) {
  std::vector<std::string> out;
  for (const CLI::Option* o : app.get_options()) {
    for (const std::string& s : o->get_snames()) out.push_back("-" + s);
    for (const std::string& l : o->get_lnames()) out.push_back("--" + l);
  }
  return out;
}

std::string Join(const std::vector<std::string>& words) {
  std::string out;
  for (const auto& w : words) out += (out.empty() ? "" : " ") + w;
  return out;
}

// Options that take a file or folder: their value completes as a path.
bool TakesPath(const std::string& name) {
  for (const char* p : {"--root", "--config", "--out", "--output", "--from", "--to", "--file"}) {
    if (name == p) return true;
  }
  return false;
}

std::string Bash(CLI::App& root) {
  std::ostringstream s;
  s << "# bash completion for grag, written by `grag completion bash` from its command table.\n"
       "_grag() {\n"
       "  local cur=\"${COMP_WORDS[COMP_CWORD]}\" prev=\"${COMP_WORDS[COMP_CWORD-1]}\"\n"
       "  local path=\"\" i w\n"
       "  for ((i = 1; i < COMP_CWORD; i++)); do\n"
       "    w=\"${COMP_WORDS[i]}\"\n"
       "    case \"$path:$w\" in\n";
  std::vector<std::string> paths;  // "" for the top, "entities", "entities:list", ...
  std::vector<std::pair<std::string, CLI::App*>> apps = {{"", &root}};
  for (size_t k = 0; k < apps.size(); ++k) {
    for (CLI::App* sub : Visible(*apps[k].second)) {
      const std::string from = apps[k].first;
      const std::string to = from.empty() ? sub->get_name() : from + ":" + sub->get_name();
      s << "      \"" << from << ":" << sub->get_name() << "\") path=\"" << to << "\" ;;\n";
      apps.emplace_back(to, sub);
    }
  }
  s << "    esac\n"
       "  done\n"
       "  case \"$prev\" in\n";
  std::vector<std::string> path_options;
  for (const auto& [name, app] : apps) {
    for (const std::string& o : OptionNames(*app)) {
      if (TakesPath(o) &&
          std::find(path_options.begin(), path_options.end(), o) == path_options.end()) {
        path_options.push_back(o);
      }
    }
  }
  if (!path_options.empty()) {
    std::string alternatives;
    for (const auto& o : path_options) alternatives += (alternatives.empty() ? "" : "|") + o;
    s << "    " << alternatives << ") COMPREPLY=($(compgen -f -- \"$cur\")); return ;;\n";
  }
  s << "  esac\n"
       "  local words\n"
       "  case \"$path\" in\n";
  for (const auto& [name, app] : apps) {
    std::vector<std::string> words;
    for (CLI::App* sub : Visible(*app)) words.push_back(sub->get_name());
    for (const std::string& o : OptionNames(*app)) words.push_back(o);
    s << "    \"" << name << "\") words=\"" << Join(words) << "\" ;;\n";
  }
  s << "  esac\n"
       "  COMPREPLY=($(compgen -W \"$words\" -- \"$cur\"))\n"
       "}\n"
       "complete -o default -F _grag grag\n";
  return s.str();
}

std::string Zsh(CLI::App& root) {
  return "#compdef grag\n"
         "# zsh completion for grag, written by `grag completion zsh`: the bash completion, "
         "through\n"
         "# zsh's bashcompinit.\n"
         "autoload -U +X bashcompinit && bashcompinit\n" +
         Bash(root);
}

std::string FishQuote(const std::string& text) {
  std::string out = "'";
  for (char c : text) {
    if (c == '\'' || c == '\\') out += '\\';
    out += c == '\n' ? ' ' : c;
  }
  return out + "'";
}

std::string Fish(CLI::App& root) {
  std::ostringstream s;
  s << "# fish completion for grag, written by `grag completion fish` from its command table.\n";
  std::vector<std::string> top;
  for (CLI::App* sub : Visible(root)) top.push_back(sub->get_name());
  for (const CLI::Option* o : root.get_options()) {
    for (const std::string& l : o->get_lnames()) {
      s << "complete -c grag -l " << l << " -d " << FishQuote(o->get_description()) << "\n";
    }
  }
  for (CLI::App* sub : Visible(root)) {
    s << "complete -c grag -f -n '__fish_use_subcommand' -a " << sub->get_name() << " -d "
      << FishQuote(sub->get_description()) << "\n";
    const std::string in = "__fish_seen_subcommand_from " + sub->get_name();
    for (CLI::App* inner : Visible(*sub)) {
      s << "complete -c grag -f -n '" << in << "' -a " << inner->get_name() << " -d "
        << FishQuote(inner->get_description()) << "\n";
    }
    for (const CLI::Option* o : sub->get_options()) {
      for (const std::string& l : o->get_lnames()) {
        s << "complete -c grag -n '" << in << "' -l " << l << " -d "
          << FishQuote(o->get_description()) << "\n";
      }
    }
  }
  return s.str();
}

// Text for roff: backslashes doubled, and a line starting with '.' or '\'' kept as text.
std::string Roff(const std::string& text) {
  std::string out;
  bool line_start = true;
  for (char c : text) {
    if (line_start && (c == '.' || c == '\'')) out += "\\&";
    if (c == '\\')
      out += "\\e";
    else
      out += c;
    line_start = c == '\n';
  }
  return out;
}

// `app`'s --help text, usage line naming it as `name` (App::help would describe the command
// parsed now, `manpage`, instead).
std::string HelpOf(const CLI::App& app, const std::string& name) {
  return app.get_formatter()->make_help(&app, name, CLI::AppFormatMode::Normal);
}

std::string ManPage(CLI::App& root) {
  std::ostringstream s;
  s << ".TH GRAG 1 \"\" \"grag " GRAG_VERSION "\" \"User Commands\"\n"
    << ".SH NAME\ngrag \\- a GraphRAG engine: index documents into an entity graph with "
       "community reports, then answer global and local questions from it\n"
    << ".SH SYNOPSIS\n.B grag\n[\\fIOPTIONS\\fR] \\fICOMMAND\\fR [\\fIARGS\\fR]\n"
    << ".SH DESCRIPTION\n.nf\n"
    << Roff(HelpOf(root, "grag")) << ".fi\n"
    << ".SH COMMANDS\n";
  for (CLI::App* sub : Visible(root)) {
    const std::string name = "grag " + sub->get_name();
    s << ".SS " << sub->get_name() << "\n.nf\n" << Roff(HelpOf(*sub, name)) << ".fi\n";
    for (CLI::App* inner : Visible(*sub)) {
      s << ".SS " << sub->get_name() << " " << inner->get_name() << "\n.nf\n"
        << Roff(HelpOf(*inner, name + " " + inner->get_name())) << ".fi\n";
    }
  }
  s << ".SH FILES\n.TP\n.I grag.toml\nThe project's settings (grag config shows them).\n"
       ".TP\n.I output/index.db\nThe index (an SQLite file), unless store.url names PostgreSQL.\n"
       ".SH SEE ALSO\nThe documentation in docs/ of the source tree, or grag serve's /docs.\n";
  return s.str();
}

// docs/cli.md: every command's --help, as the man page has them, in Markdown.
std::string MarkdownReference(CLI::App& root) {
  std::ostringstream s;
  s << "# CLI reference\n\n"
    << "<!-- generated by `grag manpage --markdown` (`make docs`) from the command table: do not "
       "edit -->\n\n"
    << "Every command's `--help`. [commands.md](commands.md) explains them with examples.\n\n"
    << "## grag\n\n```text\n"
    << HelpOf(root, "grag") << "```\n";
  for (CLI::App* sub : Visible(root)) {
    const std::string name = "grag " + sub->get_name();
    s << "\n## " << name << "\n\n```text\n" << HelpOf(*sub, name) << "```\n";
    for (CLI::App* inner : Visible(*sub)) {
      const std::string inner_name = name + " " + inner->get_name();
      s << "\n### " << inner_name << "\n\n```text\n" << HelpOf(*inner, inner_name) << "```\n";
    }
  }
  return s.str();
}

}  // namespace

Command AddCompletionCommand(CLI::App& app, GlobalOptions&) {
  auto* cmd = app.add_subcommand(
      "completion",
      "Print a completion script for bash, zsh or fish, e.g. "
      "`grag completion bash > /etc/bash_completion.d/grag` (the packages install them)");
  auto shell = std::make_shared<std::string>();
  cmd->add_option("SHELL", *shell, "bash | zsh | fish")
      ->required()
      ->check(CLI::IsMember({"bash", "zsh", "fish"}));
  auto* man = app.add_subcommand("manpage", "Print the man page grag(1), in roff");
  man->group("");  // for the build, not for users: hidden from --help
  CLI::App* root = &app;
  return {cmd, [shell, root]() {
            if (*shell == "bash") std::cout << Bash(*root);
            if (*shell == "zsh") std::cout << Zsh(*root);
            if (*shell == "fish") std::cout << Fish(*root);
            return kExitOk;
          }};
}

Command AddManPageCommand(CLI::App& app, GlobalOptions&) {
  CLI::App* man = app.get_subcommand("manpage");
  auto markdown = std::make_shared<bool>(false);
  man->add_flag("--markdown", *markdown, "Print the CLI reference docs/cli.md instead");
  CLI::App* root = &app;
  return {man, [root, markdown]() {
            if (*markdown) {
              std::cout << MarkdownReference(*root);
              return kExitOk;
            }
            std::cout << ManPage(*root);
            return kExitOk;
          }};
}

}  // namespace grag::cli
