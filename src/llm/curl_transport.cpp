// The libcurl HttpTransport: one easy handle per request in flight, kept in a pool afterwards so
// the next request reuses its connection.
#include <curl/curl.h>
#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <exception>
#include <memory>
#include <mutex>
#include <vector>

#include "grag/lazy_library.h"
#include "grag/llm.h"

namespace grag {
namespace {

// libcurl's functions, resolved when the first request is sent (grag/lazy_library.h: linking
// libcurl put 30 shared objects into every command's start-up).
struct CurlApi {
  decltype(&::curl_global_init) global_init;
  decltype(&::curl_easy_init) easy_init;
  decltype(&::curl_easy_setopt) easy_setopt;
  decltype(&::curl_easy_perform) easy_perform;
  decltype(&::curl_easy_getinfo) easy_getinfo;
  decltype(&::curl_easy_reset) easy_reset;
  decltype(&::curl_easy_cleanup) easy_cleanup;
  decltype(&::curl_easy_strerror) easy_strerror;
  decltype(&::curl_slist_append) slist_append;
  decltype(&::curl_slist_free_all) slist_free_all;
};

LazyLibrary& CurlLibrary() {
  static LazyLibrary library(GRAG_LIBCURL_SONAME, "talking to a model over HTTP",
                             "libcurl (Debian: apt install libcurl4)");
  return library;
}

Result<CurlApi> ResolveCurl() {
  LazyLibrary& lib = CurlLibrary();
  CurlApi api{};
  GRAG_RETURN_IF_ERROR(lib.Resolve(api.global_init, "curl_global_init"));
  GRAG_RETURN_IF_ERROR(lib.Resolve(api.easy_init, "curl_easy_init"));
  GRAG_RETURN_IF_ERROR(lib.Resolve(api.easy_setopt, "curl_easy_setopt"));
  GRAG_RETURN_IF_ERROR(lib.Resolve(api.easy_perform, "curl_easy_perform"));
  GRAG_RETURN_IF_ERROR(lib.Resolve(api.easy_getinfo, "curl_easy_getinfo"));
  GRAG_RETURN_IF_ERROR(lib.Resolve(api.easy_reset, "curl_easy_reset"));
  GRAG_RETURN_IF_ERROR(lib.Resolve(api.easy_cleanup, "curl_easy_cleanup"));
  GRAG_RETURN_IF_ERROR(lib.Resolve(api.easy_strerror, "curl_easy_strerror"));
  GRAG_RETURN_IF_ERROR(lib.Resolve(api.slist_append, "curl_slist_append"));
  GRAG_RETURN_IF_ERROR(lib.Resolve(api.slist_free_all, "curl_slist_free_all"));
  // libcurl's one process-wide initialisation; never undone, since other handles may live on.
  const CURLcode init = api.global_init(CURL_GLOBAL_DEFAULT);
  if (init != CURLE_OK) {
    return Status::Internal(std::string("curl_global_init failed: ") + api.easy_strerror(init));
  }
  return api;
}

// libcurl, loaded and initialised on the first call (the same answer on every later one).
Result<const CurlApi*> Curl() {
  static const Result<CurlApi> api = ResolveCurl();
  if (!api.ok()) return api.status();
  return &*api;
}

// Only for objects made through a loaded libcurl.
const CurlApi& LoadedCurl() { return *Curl().value(); }

struct CurlEasyDeleter {
  void operator()(CURL* handle) const { LoadedCurl().easy_cleanup(handle); }
};
using CurlEasy = std::unique_ptr<CURL, CurlEasyDeleter>;

struct CurlListDeleter {
  void operator()(curl_slist* list) const { LoadedCurl().slist_free_all(list); }
};
using CurlList = std::unique_ptr<curl_slist, CurlListDeleter>;

std::string Lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

std::string_view TrimSpace(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  return s;
}

// What the callbacks of one transfer write into.
struct Transfer {
  const HttpRequest* request = nullptr;
  HttpResponse response;
  int status_seen = 0;         // from the latest status line, for deciding whether to stream
  bool aborted = false;        // on_body returned false
  std::string callback_error;  // on_body threw
};

size_t OnHeader(char* data, size_t size, size_t count, void* user) {
  auto* t = static_cast<Transfer*>(user);
  std::string_view line(data, size * count);
  line = TrimSpace(line);
  if (line.starts_with("HTTP/")) {
    // A new response begins (after a 100 Continue or a proxy's CONNECT): forget older headers.
    t->response.headers.clear();
    size_t space = line.find(' ');
    t->status_seen = space == std::string_view::npos
                         ? 0
                         : std::atoi(std::string(line.substr(space + 1, 3)).c_str());
  } else if (size_t colon = line.find(':'); colon != std::string_view::npos) {
    t->response.headers.push_back(
        {Lower(TrimSpace(line.substr(0, colon))), std::string(TrimSpace(line.substr(colon + 1)))});
  }
  return size * count;
}

size_t OnBody(char* data, size_t size, size_t count, void* user) {
  auto* t = static_cast<Transfer*>(user);
  std::string_view bytes(data, size * count);
  t->response.body.append(bytes);
  if (t->request->on_body && t->status_seen >= 200 && t->status_seen < 300) {
    // An exception must not unwind through libcurl's C frames.
    try {
      if (!t->request->on_body(bytes)) {
        t->aborted = true;
        return 0;
      }
    } catch (const std::exception& e) {
      t->callback_error = e.what();
      return 0;
    } catch (...) {
      t->callback_error = "unknown exception";
      return 0;
    }
  }
  return size * count;
}

// libcurl's progress callback, set when the request can be cancelled: non-zero aborts.
int OnProgress(void* user, curl_off_t, curl_off_t, curl_off_t, curl_off_t) {
  const auto* cancel = static_cast<const std::atomic<bool>*>(user);
  return cancel->load() ? 1 : 0;
}

bool Append(CurlList& list, const std::string& line) {
  curl_slist* head = LoadedCurl().slist_append(list.get(), line.c_str());
  if (head == nullptr) return false;  // the old list is untouched and still owned
  static_cast<void>(list.release());  // `head` is the same list, longer (or a new one)
  list.reset(head);
  return true;
}

class CurlTransport final : public HttpTransport {
 public:
  Result<HttpResponse> Post(const HttpRequest& request) override {
    GRAG_ASSIGN_OR_RETURN(const CurlApi* curl, Curl());
    Pooled pooled = Take(*curl);
    if (!pooled.handle) return Status::Internal("curl_easy_init failed");
    CURL* h = pooled.handle.get();

    // The handle's list from its last request serves again when the headers are the same (the
    // usual case: one endpoint's).
    if (!pooled.headers || !SameHeaders(pooled.sent, request.headers)) {
      pooled.headers.reset();
      pooled.sent.clear();
      CurlList headers;
      for (const HttpHeader& header : request.headers) {
        if (!Append(headers, header.name + ": " + header.value)) {
          return Status::Internal("curl_slist_append failed");
        }
      }
      // Without this, curl waits for "100 Continue" before sending bodies over 1 MB.
      if (!Append(headers, "Expect:")) return Status::Internal("curl_slist_append failed");
      pooled.headers = std::move(headers);
      pooled.sent = request.headers;
    }

    Transfer transfer;
    transfer.request = &request;
    char error[CURL_ERROR_SIZE] = {0};
    curl->easy_setopt(h, CURLOPT_URL, request.url.c_str());
    curl->easy_setopt(h, CURLOPT_PROTOCOLS_STR, "http,https");
    curl->easy_setopt(h, CURLOPT_POST, 1L);
    curl->easy_setopt(h, CURLOPT_POSTFIELDS, request.body.data());
    curl->easy_setopt(h, CURLOPT_POSTFIELDSIZE_LARGE, static_cast<curl_off_t>(request.body.size()));
    curl->easy_setopt(h, CURLOPT_HTTPHEADER, pooled.headers.get());
    curl->easy_setopt(h, CURLOPT_HEADERFUNCTION, &OnHeader);
    curl->easy_setopt(h, CURLOPT_HEADERDATA, &transfer);
    curl->easy_setopt(h, CURLOPT_WRITEFUNCTION, &OnBody);
    curl->easy_setopt(h, CURLOPT_WRITEDATA, &transfer);
    curl->easy_setopt(h, CURLOPT_TIMEOUT_MS, static_cast<long>(request.timeout.count()));
    curl->easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS,
                      static_cast<long>(request.connect_timeout.count()));
    curl->easy_setopt(h, CURLOPT_NOSIGNAL, 1L);  // signals and threads do not mix
    curl->easy_setopt(h, CURLOPT_ERRORBUFFER, error);
    curl->easy_setopt(h, CURLOPT_ACCEPT_ENCODING, "");  // any the build supports
    curl->easy_setopt(h, CURLOPT_TCP_KEEPALIVE, 1L);
    curl->easy_setopt(h, CURLOPT_USERAGENT, "grag/0.1");
    if (request.cancel != nullptr) {
      curl->easy_setopt(h, CURLOPT_XFERINFOFUNCTION, &OnProgress);
      curl->easy_setopt(h, CURLOPT_XFERINFODATA, const_cast<std::atomic<bool>*>(request.cancel));
      curl->easy_setopt(h, CURLOPT_NOPROGRESS, 0L);
    }

    CURLcode rc = curl->easy_perform(h);
    long status = 0;
    curl->easy_getinfo(h, CURLINFO_RESPONSE_CODE, &status);
    // The handle outlives `error` in the pool: drop its pointers (its header list, kept with it,
    // is set again by the next request).
    curl->easy_reset(h);
    Give(std::move(pooled));

    if (!transfer.callback_error.empty()) {
      return Status::Internal("the body callback failed: " + transfer.callback_error);
    }
    if (transfer.aborted || rc == CURLE_ABORTED_BY_CALLBACK) {
      return Status::Cancelled("the transfer from " + request.url + " was stopped");
    }
    if (rc != CURLE_OK) {
      std::string detail = error[0] != '\0' ? std::string(error) : curl->easy_strerror(rc);
      if (rc == CURLE_OPERATION_TIMEDOUT) {
        return Status::Timeout(fmt::format("POST {} timed out ({}; timeout {} ms)", request.url,
                                           detail, request.timeout.count()));
      }
      if (rc == CURLE_COULDNT_CONNECT || rc == CURLE_COULDNT_RESOLVE_HOST ||
          rc == CURLE_COULDNT_RESOLVE_PROXY) {
        return ConnectFailure(request.url, detail);
      }
      return Status::Unavailable(fmt::format("POST {} failed: {}", request.url, detail));
    }
    transfer.response.status = static_cast<int>(status);
    return std::move(transfer.response);
  }

 private:
  // An easy handle and the header list it last sent.
  struct Pooled {
    CurlEasy handle;
    CurlList headers;
    std::vector<HttpHeader> sent;  // what `headers` holds, "Expect:" aside
  };

  static bool SameHeaders(const std::vector<HttpHeader>& a, const std::vector<HttpHeader>& b) {
    return std::equal(a.begin(), a.end(), b.begin(), b.end(),
                      [](const HttpHeader& x, const HttpHeader& y) {
                        return x.name == y.name && x.value == y.value;
                      });
  }

  Pooled Take(const CurlApi& curl) {
    {
      std::lock_guard lock(mu_);
      if (!idle_.empty()) {
        Pooled p = std::move(idle_.back());
        idle_.pop_back();
        return p;
      }
    }
    Pooled p;
    p.handle = CurlEasy(curl.easy_init());
    return p;
  }

  void Give(Pooled pooled) {
    std::lock_guard lock(mu_);
    idle_.push_back(std::move(pooled));
  }

  std::mutex mu_;
  // Guarded by mu_. At most as many as were ever in flight at once (the client bounds that).
  std::vector<Pooled> idle_;
};

}  // namespace

namespace {
constexpr std::string_view kConnectFailurePrefix = "cannot connect to ";
}  // namespace

Status ConnectFailure(std::string_view url, std::string_view detail) {
  return Status::Unavailable(std::string(kConnectFailurePrefix) + std::string(url) + ": " +
                             std::string(detail));
}

bool IsConnectFailure(const Status& status) {
  return status.code() == ErrorCode::kUnavailable &&
         status.message().starts_with(kConnectFailurePrefix);
}

std::optional<std::string> HttpResponse::Header(std::string_view name) const {
  std::string wanted = Lower(name);
  for (const HttpHeader& h : headers) {
    if (h.name.size() == wanted.size() && Lower(h.name) == wanted) return h.value;
  }
  return std::nullopt;
}

Result<std::unique_ptr<HttpTransport>> MakeCurlTransport() {
  // A transport is made to be used: load libcurl meanwhile (the first request waits for it).
  CurlLibrary().Preload();
  return std::unique_ptr<HttpTransport>(std::make_unique<CurlTransport>());
}

}  // namespace grag
