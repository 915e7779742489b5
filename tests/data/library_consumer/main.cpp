// Indexes a project folder without a model, then prints the best passage for a question:
//   consumer PROJECT "QUESTION"
#include <grag/engine.h>
#include <grag/project.h>

#include <iostream>

int main(int argc, char** argv) {
  if (argc != 3) {
    std::cerr << "usage: consumer PROJECT QUESTION\n";
    return 2;
  }
  grag::Result<grag::Config> config = grag::LoadConfig(argv[1]);
  if (!config.ok()) {
    std::cerr << config.status().message() << "\n";
    return 1;
  }
  grag::DisableModels(*config);  // the built-in NLP extractor, lexical embeddings
  grag::EngineOptions options;
  options.writable = true;
  options.log_file = false;
  grag::Result<std::unique_ptr<grag::Engine>> engine = grag::Engine::Open(*config, options);
  if (!engine.ok()) {
    std::cerr << engine.status().message() << "\n";
    return 1;
  }
  grag::Result<grag::IndexSummary> indexed = (*engine)->Index(grag::IndexRequest{});
  if (!indexed.ok()) {
    std::cerr << indexed.status().message() << "\n";
    return 1;
  }
  grag::SearchRequest request;
  request.question = argv[2];
  request.top_k = 1;
  grag::Result<grag::RetrievalResult> found = (*engine)->Search(request);
  if (!found.ok() || found->chunks.empty()) {
    std::cerr << (found.ok() ? "nothing found" : found.status().message()) << "\n";
    return 1;
  }
  std::cout << "entities " << indexed->entities << "\n";
  std::cout << "best " << found->chunks[0].chunk_id << "\n" << found->chunks[0].text << "\n";
  return 0;
}
