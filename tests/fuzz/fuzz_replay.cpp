// Runs the fuzz harness without libFuzzer (any compiler, part of ctest): valid messages of
// random shapes and data, every coder, then random byte flips, truncations and extensions of
// them, and pure noise. `dct_fuzz_replay [iterations] [SEED_DIR]`: with SEED_DIR, the first 8
// intact messages are also written there (how corpus/error_bounded_decode/ was made).
#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "mp/error_bounded_codec.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t *data, std::size_t size);

int main(int argc, char **argv) {
  namespace eb = dct::detail::eb;
  const long iterations = argc > 1 ? std::strtol(argv[1], nullptr, 10) : 20000;
  const std::string seed_dir = argc > 2 ? argv[2] : "";
  int seeds_written = 0;
  std::mt19937_64 engine(2024);
  std::normal_distribution<double> normal(0.0, 1.0);
  eb::Workspace ws;
  for (long i = 0; i < iterations; ++i) {
    const std::uint8_t shape[4] = {std::uint8_t(engine()), std::uint8_t(engine()),
                                   std::uint8_t(engine()), 0};
    const std::size_t nrows = shape[0] % 16 + 1, d = shape[1] % 32 + 1;
    std::vector<std::size_t> divisors;
    for (std::size_t c = 1; c <= d; ++c)
      if (d % c == 0) divisors.push_back(c);
    const eb::Tables tables{d, divisors[shape[2] % divisors.size()]};
    std::vector<float> rows(nrows * d);
    for (std::size_t k = 0; k < rows.size(); ++k)  // repeated rows so that coders compress
      rows[k] = k < d * 2 ? float(normal(engine)) : rows[k % (d * 2)];
    std::vector<double> bounds(tables.count(), i % 7 == 0 ? 0.0 : 0.001 * double(i % 50 + 1));
    eb::quantize(rows.data(), nrows, tables, bounds.data(), ws);
    std::vector<std::uint8_t> input(4 + eb::max_message_bytes(nrows, d, tables.count(), 4));
    std::copy(shape, shape + 4, input.begin());
    eb::Coder coder = eb::Coder(i % eb::kCoders);
    input.resize(4 + eb::pack(coder, ws, reinterpret_cast<std::byte *>(input.data() + 4)));
    switch (i % 4) {
      case 0:  // flips
        for (int f = 0, n = int(engine() % 4) + 1; f < n; ++f)
          input[4 + engine() % (input.size() - 4)] ^= std::uint8_t(engine() | 1);
        break;
      case 1:  // truncated or extended
        input.resize(4 + engine() % (input.size() + 8));
        break;
      case 2:  // noise of the same length
        for (std::size_t k = 4; k < input.size(); ++k) input[k] = std::uint8_t(engine());
        break;
      default:  // intact
        if (!seed_dir.empty() && seeds_written < 8) {
          std::ofstream seed(seed_dir + "/intact-" + std::to_string(seeds_written++),
                             std::ios::binary);
          seed.write(reinterpret_cast<const char *>(input.data()), std::streamsize(input.size()));
        }
        break;
    }
    LLVMFuzzerTestOneInput(input.data(), input.size());
  }
  return 0;
}
