// A generated corpus of podcast-like transcripts whose documents share entities, for benchmarks
// of indexing cost (bench/incremental_cost, bench/scale_bench): two hosts in every episode,
// guests and topics drawn from a Zipf-distributed cast, so popular entities recur in many
// episodes, as in real transcripts. Episode n is the same text in every run.
#pragma once

#include <string>
#include <vector>

namespace grag::bench {

struct Cast {
  std::vector<std::string> hosts{"Maya Lindqvist", "Tomas Okafor"};
  std::vector<std::string> guests;
  std::vector<std::string> topics;
  std::vector<std::string> all;  // hosts, guests, topics
};

Cast MakeCast();

// Episode `n`: the hosts talk with one or two guests about five to nine topics (about 1,400
// tokens: one or two chunks at the default chunk size).
std::string Episode(const Cast& cast, int n);

// Writes episodes [from, to) as `dir`/episodeNNNN.txt.
void WriteEpisodes(const Cast& cast, const std::string& dir, int from, int to);

// What a model following grag's extraction prompt would answer for `prompt`: the cast names the
// chunk's <text> mentions, the ten most frequent, as JSON entities, each linked to the next.
// Descriptions carry a tag of the chunk, so no two chunks repeat one.
std::string CastExtraction(const Cast& cast, const std::string& prompt);

}  // namespace grag::bench
