// grag_pack_vocab JSON IMAGE: writes the vocabulary image (src/text/vocab_image.h) of an npm
// tiktoken encoders/<name>.json file. Run by the build; vocab_blobs.S embeds its output.
#include <cstdio>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>

#include "../vocab_image.h"

int main(int argc, char** argv) {
  if (argc != 3) {
    std::cerr << "usage: grag_pack_vocab ENCODING.json IMAGE\n";
    return 2;
  }
  std::ifstream in(argv[1], std::ios::binary);
  if (!in) {
    std::cerr << "grag_pack_vocab: cannot read " << argv[1] << "\n";
    return 1;
  }
  std::ostringstream json;
  json << in.rdbuf();
  const grag::Result<std::string> image = grag::PackVocabulary(json.str());
  if (!image.ok()) {
    std::cerr << "grag_pack_vocab: " << argv[1] << ": " << image.status().ToString() << "\n";
    return 1;
  }
  // Write beside the target, then rename: an interrupted build never leaves half an image.
  const std::string tmp = std::string(argv[2]) + ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    out.write(image->data(), static_cast<std::streamsize>(image->size()));
    if (!out.flush()) {
      std::cerr << "grag_pack_vocab: cannot write " << tmp << "\n";
      return 1;
    }
  }
  if (std::rename(tmp.c_str(), argv[2]) != 0) {
    std::cerr << "grag_pack_vocab: cannot rename " << tmp << " to " << argv[2] << "\n";
    return 1;
  }
  return 0;
}
