// The web UI's files, embedded in the binary at build time (cmake/web_assets.cmake generates
// the table from web/ and the npm packages scripts/setup.sh pins).
#pragma once

#include <string_view>
#include <vector>

namespace grag::server {

struct WebAsset {
  std::string_view name;  // served at /ui/<name>; index.html is also /
  std::string_view mime;
  std::string_view bytes;
};

const std::vector<WebAsset>& WebAssets();

}  // namespace grag::server
