// A PostgreSQL server for tests: the one GRAG_TEST_PG_URL names, else the throwaway cluster the
// suite starts (scripts/pg_test_cluster.sh, a ctest fixture that writes its URL to a file).
#pragma once

#include <string>

namespace grag::testing {

// The server's URL, or empty when there is none to test against.
std::string PostgresUrl();

// Why the PostgreSQL cases are skipped when PostgresUrl() is empty (for GTEST_SKIP).
std::string NoPostgresReason();

// `url` with its database name replaced by `db`.
std::string WithDatabase(const std::string& url, const std::string& db);

// A fresh database on the server, dropped (with its connections) when this goes.
class TestDatabase {
 public:
  TestDatabase() = default;
  ~TestDatabase();
  TestDatabase(const TestDatabase&) = delete;
  TestDatabase& operator=(const TestDatabase&) = delete;
  // Creates it on the server at `admin_url`; an empty string when done, else the server's error.
  std::string Create(const std::string& admin_url);
  // Creates it on the test server (PostgresUrl()); an empty string when done, else why the
  // PostgreSQL cases are skipped (no server, or the server's error), for GTEST_SKIP.
  std::string CreateForTest();
  // Drops it now, closing its connections (a database that goes away under its users); an empty
  // string when done, else the server's error.
  std::string Drop();
  // Its URL (admin_url's, with this database).
  const std::string& url() const { return url_; }

 private:
  std::string admin_url_;
  std::string name_;
  std::string url_;
};

}  // namespace grag::testing
