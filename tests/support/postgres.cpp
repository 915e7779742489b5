#include "support/postgres.h"

#include <libpq-fe.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <fstream>

namespace grag::testing {
namespace {

// Runs one statement (CREATE/DROP DATABASE); the server's error, empty when fine.
std::string AdminExec(const std::string& url, const std::string& sql) {
  PGconn* conn = PQconnectdb(url.c_str());
  std::string error;
  if (PQstatus(conn) != CONNECTION_OK) {
    error = PQerrorMessage(conn);
  } else {
    PGresult* res = PQexec(conn, sql.c_str());
    if (PQresultStatus(res) != PGRES_COMMAND_OK) error = PQresultErrorMessage(res);
    PQclear(res);
  }
  PQfinish(conn);
  return error;
}

}  // namespace

std::string PostgresUrl() {
  if (const char* env = std::getenv("GRAG_TEST_PG_URL"); env != nullptr && *env != '\0') {
    return env;
  }
#ifdef GRAG_TEST_PG_URL_FILE
  std::ifstream in(GRAG_TEST_PG_URL_FILE);
  std::string url;
  std::getline(in, url);
  return url;
#else
  return "";
#endif
}

std::string NoPostgresReason() {
  return "no PostgreSQL server to test against: GRAG_TEST_PG_URL is unset and the suite's "
         "throwaway cluster is not running (ctest starts it with scripts/pg_test_cluster.sh, "
         "which needs Debian's postgresql package: scripts/setup.sh installs it)";
}

std::string WithDatabase(const std::string& url, const std::string& db) {
  const size_t scheme = url.find("://");
  if (scheme == std::string::npos) return url;
  const size_t path = url.find('/', scheme + 3);
  const size_t query = url.find('?', scheme + 3);
  if (path == std::string::npos || (query != std::string::npos && path > query)) {
    const size_t at = query == std::string::npos ? url.size() : query;
    return url.substr(0, at) + "/" + db + url.substr(at);
  }
  const size_t end = query == std::string::npos ? url.size() : query;
  return url.substr(0, path + 1) + db + url.substr(end);
}

TestDatabase::~TestDatabase() {
  if (!name_.empty())
    (void)AdminExec(admin_url_, "DROP DATABASE IF EXISTS " + name_ + " WITH (FORCE)");
}

std::string TestDatabase::Drop() {
  if (name_.empty()) return "no database";
  return AdminExec(admin_url_, "DROP DATABASE IF EXISTS " + name_ + " WITH (FORCE)");
}

std::string TestDatabase::CreateForTest() {
  const std::string admin = PostgresUrl();
  if (admin.empty()) return NoPostgresReason();
  return Create(admin);
}

std::string TestDatabase::Create(const std::string& admin_url) {
  static std::atomic<int> counter{0};
  const std::string name = "grag_t_" + std::to_string(getpid()) + "_" + std::to_string(counter++);
  const std::string error = AdminExec(admin_url, "CREATE DATABASE " + name);
  if (!error.empty()) return "cannot create a test database on the PostgreSQL server: " + error;
  admin_url_ = admin_url;
  name_ = name;
  url_ = WithDatabase(admin_url, name);
  return "";
}

}  // namespace grag::testing
