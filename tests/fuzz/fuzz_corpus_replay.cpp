// Runs a libFuzzer harness without libFuzzer (any compiler, part of ctest): every file of its
// seed corpus as it is, then `iterations` mutations of them (bytes flipped, the input cut or
// extended, a stretch replaced by noise), from a fixed seed so that a failure replays.
//
//   dct_fuzz_<harness>_replay CORPUS_DIR [iterations]
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <random>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t *data, std::size_t size);

int main(int argc, char **argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s CORPUS_DIR [iterations]\n", argv[0]);
    return 2;
  }
  std::vector<std::filesystem::path> paths;
  for (const auto &entry : std::filesystem::directory_iterator(argv[1]))
    if (entry.is_regular_file()) paths.push_back(entry.path());
  std::sort(paths.begin(), paths.end());  // directory order differs between file systems
  std::vector<std::vector<std::uint8_t>> seeds;
  for (const auto &path : paths) {
    std::ifstream file(path, std::ios::binary);
    seeds.emplace_back(std::istreambuf_iterator<char>(file), std::istreambuf_iterator<char>());
    LLVMFuzzerTestOneInput(seeds.back().data(), seeds.back().size());
  }
  if (seeds.empty()) {
    std::fprintf(stderr, "%s: no seed in %s\n", argv[0], argv[1]);
    return 2;
  }
  const long iterations = argc > 2 ? std::strtol(argv[2], nullptr, 10) : 20000;
  std::mt19937_64 engine(2024);
  for (long i = 0; i < iterations; ++i) {
    std::vector<std::uint8_t> input = seeds[std::size_t(i) % seeds.size()];
    switch (engine() % 4) {
      case 0:  // a few bytes flipped
        for (int f = 0, n = int(engine() % 4) + 1; f < n && !input.empty(); ++f)
          input[engine() % input.size()] ^= std::uint8_t(engine() | 1);
        break;
      case 1:  // cut or extended
        input.resize(engine() % (input.size() + 16));
        break;
      case 2:  // a stretch of noise
        for (std::size_t k = engine() % (input.size() + 1); k < input.size(); ++k)
          input[k] = std::uint8_t(engine());
        break;
      default:  // another seed's tail
        const auto &other = seeds[engine() % seeds.size()];
        input.insert(input.end(), other.begin() + std::ptrdiff_t(engine() % (other.size() + 1)),
                     other.end());
        break;
    }
    LLVMFuzzerTestOneInput(input.data(), input.size());
  }
  std::printf("%zu seeds and %ld mutations: no failure\n", seeds.size(), iterations);
  return 0;
}
