#include "support/transcripts.h"

#include <fmt/format.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <random>
#include <utility>

namespace grag::bench {
namespace {

using nlohmann::json;

constexpr uint32_t kSeed = 20261202;
constexpr int kGuests = 300;
constexpr int kTopics = 400;

// Capitalised words of at least three letters, none a stop word of the fake extractor.
const std::vector<std::string> kFirst = {
    "Abel",  "Berta", "Cyril", "Delia", "Emil",  "Fiona", "Gideon", "Hanna", "Ivo",   "Jana",
    "Kasim", "Lotta", "Milo",  "Nadia", "Oskar", "Petra", "Quinn",  "Rosa",  "Silas", "Tilde",
    "Ugo",   "Vera",  "Wendt", "Xenia", "Yusuf", "Zelda", "Arno",   "Bruna", "Cosmo", "Dana"};
const std::vector<std::string> kLast = {
    "Amsel",  "Birke", "Corvin", "Dorn",   "Eibe", "Falk",   "Gerste", "Hagen", "Ilse",   "Jordan",
    "Kiefer", "Linde", "Moos",   "Nessel", "Olm",  "Pappel", "Quitte", "Rabe",  "Salbei", "Tanne",
    "Ulme",   "Veit",  "Weide",  "Xaver",  "Ysop", "Zeder",  "Ahorn",  "Buche", "Erle",   "Fichte"};
const std::vector<std::string> kTopicHead = {"Quantum", "Solar",  "Neural",  "Ocean",   "Urban",
                                             "Crypto",  "Genome", "Fusion",  "Carbon",  "Lunar",
                                             "Polar",   "Retail", "Vaccine", "Rocket",  "Drone",
                                             "Battery", "Forest", "Desert",  "Harbour", "Metro"};
const std::vector<std::string> kTopicTail = {"Labs",    "Treaty",  "Summit",  "Project", "Index",
                                             "Council", "Network", "Fund",    "Program", "Alliance",
                                             "Studio",  "Market",  "Report",  "Forum",   "Mission",
                                             "Works",   "Bureau",  "Society", "Trust",   "Guild"};

// Zipf(1.0) over n ranks: popular guests and topics recur across many episodes.
class Zipf {
 public:
  explicit Zipf(size_t n) {
    double sum = 0;
    for (size_t k = 1; k <= n; ++k) cdf_.push_back(sum += 1.0 / static_cast<double>(k));
    for (double& x : cdf_) x /= sum;
  }
  size_t operator()(std::mt19937& rng) const {
    const double u = std::uniform_real_distribution<double>(0, 1)(rng);
    return static_cast<size_t>(std::lower_bound(cdf_.begin(), cdf_.end(), u) - cdf_.begin());
  }

 private:
  std::vector<double> cdf_;
};

std::string Between(const std::string& s, const std::string& open, const std::string& close) {
  const auto a = s.find(open);
  if (a == std::string::npos) return {};
  const auto b = s.find(close, a + open.size());
  return b == std::string::npos ? std::string() : s.substr(a + open.size(), b - a - open.size());
}

}  // namespace

Cast MakeCast() {
  Cast c;
  for (int i = 0; static_cast<int>(c.guests.size()) < kGuests; ++i) {
    c.guests.push_back(kFirst[static_cast<size_t>(i) % kFirst.size()] + " " +
                       kLast[(static_cast<size_t>(i) / kFirst.size() * 7 + static_cast<size_t>(i)) %
                             kLast.size()]);
  }
  std::vector<std::string> unique;
  for (const auto& g : c.guests) {
    if (std::find(unique.begin(), unique.end(), g) == unique.end()) unique.push_back(g);
  }
  c.guests = unique;
  for (size_t h = 0; h < kTopicHead.size(); ++h) {
    for (size_t t = 0; t < kTopicTail.size(); ++t) {
      c.topics.push_back(kTopicHead[h] + " " + kTopicTail[t]);
    }
  }
  c.topics.resize(kTopics);
  c.all = c.hosts;
  c.all.insert(c.all.end(), c.guests.begin(), c.guests.end());
  c.all.insert(c.all.end(), c.topics.begin(), c.topics.end());
  return c;
}

std::string Episode(const Cast& cast, int n) {
  static const Zipf guest_rank(cast.guests.size());
  static const Zipf topic_rank(cast.topics.size());
  std::mt19937 rng(kSeed + static_cast<uint32_t>(n));
  std::vector<std::string> guests{cast.guests[guest_rank(rng)]};
  if (rng() % 3 == 0) guests.push_back(cast.guests[guest_rank(rng)]);
  std::vector<std::string> topics;
  const size_t topic_count = 5 + rng() % 5;
  while (topics.size() < topic_count) topics.push_back(cast.topics[topic_rank(rng)]);
  std::string text = fmt::format("Episode {} of the show.\n\n", n);
  auto pick = [&rng](const std::vector<std::string>& v) -> const std::string& {
    return v[rng() % v.size()];
  };
  for (int s = 0; s < 100; ++s) {
    const std::string& host = cast.hosts[static_cast<size_t>(s) % 2];
    switch (rng() % 4) {
      case 0:
        text += fmt::format("then {} asked {} about {} and what comes next. ", host, pick(guests),
                            pick(topics));
        break;
      case 1:
        text += fmt::format("and {} said that {} works closely with {} these days. ", pick(guests),
                            pick(topics), pick(topics));
        break;
      case 2:
        text += fmt::format("so {} pointed out that {} had changed since last year. ", host,
                            pick(topics));
        break;
      default:
        text += fmt::format("then {} laughed and told a story about {} in the old days. ",
                            pick(guests), pick(topics));
        break;
    }
    if (s % 6 == 5) text += "\n\n";
  }
  return text;
}

void WriteEpisodes(const Cast& cast, const std::string& dir, int from, int to) {
  std::filesystem::create_directories(dir);
  for (int n = from; n < to; ++n) {
    std::ofstream(std::filesystem::path(dir) / fmt::format("episode{:04}.txt", n))
        << Episode(cast, n);
  }
}

std::string CastExtraction(const Cast& cast, const std::string& prompt) {
  const std::string text = Between(prompt, "<text>", "</text>");
  std::vector<std::pair<int, std::string>> found;
  for (const auto& name : cast.all) {
    int n = 0;
    for (size_t at = text.find(name); at != std::string::npos; at = text.find(name, at + 1)) ++n;
    if (n > 0) found.emplace_back(-n, name);
  }
  std::sort(found.begin(), found.end());
  if (found.size() > 10) found.resize(10);
  const std::string tag = std::to_string(std::hash<std::string>{}(text) % 100000);
  json entities = json::array();
  json rels = json::array();
  for (size_t i = 0; i < found.size(); ++i) {
    const std::string& name = found[i].second;
    const bool topic = std::find(cast.topics.begin(), cast.topics.end(), name) != cast.topics.end();
    entities.push_back({{"name", name},
                        {"type", topic ? "organization" : "person"},
                        {"description", fmt::format("{} comes up {} times in passage {} of the "
                                                    "show, in conversation about current projects.",
                                                    name, -found[i].first, tag)}});
    if (i > 0) {
      rels.push_back({{"source", found[i - 1].second},
                      {"target", name},
                      {"description", fmt::format("{} and {} are discussed together in "
                                                  "passage {}.",
                                                  found[i - 1].second, name, tag)},
                      {"strength", 1 + static_cast<int>(i % 5)}});
    }
  }
  return json{{"entities", entities}, {"relationships", rels}}.dump();
}

}  // namespace grag::bench
