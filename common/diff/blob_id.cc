#include "common/diff/blob_id.h"

#include <array>
#include <cstdint>

namespace triage::diff {
namespace {

// SHA-1 (FIPS 180-4), enough for content ids; not for anything that needs collision resistance.
class Sha1 {
 public:
  void Update(std::string_view data) {
    for (unsigned char c : data) {
      block_[fill_++] = c;
      if (fill_ == block_.size()) {
        Compress();
        fill_ = 0;
      }
    }
    length_ += data.size();
  }

  std::string HexDigest() {
    const std::uint64_t bits = length_ * 8;
    block_[fill_++] = 0x80;
    if (fill_ > 56) {
      while (fill_ < block_.size()) block_[fill_++] = 0;
      Compress();
      fill_ = 0;
    }
    while (fill_ < 56) block_[fill_++] = 0;
    for (int i = 7; i >= 0; --i) block_[fill_++] = static_cast<unsigned char>(bits >> (i * 8));
    Compress();
    static constexpr char kHex[] = "0123456789abcdef";
    std::string out;
    for (std::uint32_t w : h_) {
      for (int i = 28; i >= 0; i -= 4) out.push_back(kHex[(w >> i) & 0xf]);
    }
    return out;
  }

 private:
  static std::uint32_t Rotl(std::uint32_t x, int n) { return (x << n) | (x >> (32 - n)); }

  void Compress() {
    std::array<std::uint32_t, 80> w{};
    for (int i = 0; i < 16; ++i) {
      w[i] = static_cast<std::uint32_t>(block_[4 * i]) << 24 |
             static_cast<std::uint32_t>(block_[4 * i + 1]) << 16 |
             static_cast<std::uint32_t>(block_[4 * i + 2]) << 8 |
             static_cast<std::uint32_t>(block_[4 * i + 3]);
    }
    for (int i = 16; i < 80; ++i) w[i] = Rotl(w[i - 3] ^ w[i - 8] ^ w[i - 14] ^ w[i - 16], 1);
    std::uint32_t a = h_[0], b = h_[1], c = h_[2], d = h_[3], e = h_[4];
    for (int i = 0; i < 80; ++i) {
      std::uint32_t f, k;
      if (i < 20) {
        f = (b & c) | (~b & d);
        k = 0x5a827999;
      } else if (i < 40) {
        f = b ^ c ^ d;
        k = 0x6ed9eba1;
      } else if (i < 60) {
        f = (b & c) | (b & d) | (c & d);
        k = 0x8f1bbcdc;
      } else {
        f = b ^ c ^ d;
        k = 0xca62c1d6;
      }
      const std::uint32_t t = Rotl(a, 5) + f + e + k + w[i];
      e = d;
      d = c;
      c = Rotl(b, 30);
      b = a;
      a = t;
    }
    h_[0] += a;
    h_[1] += b;
    h_[2] += c;
    h_[3] += d;
    h_[4] += e;
  }

  std::array<std::uint32_t, 5> h_ = {0x67452301, 0xefcdab89, 0x98badcfe, 0x10325476, 0xc3d2e1f0};
  std::array<unsigned char, 64> block_{};
  std::size_t fill_ = 0;
  std::uint64_t length_ = 0;
};

}  // namespace

std::string GitBlobId(std::string_view content) {
  Sha1 sha;
  sha.Update("blob ");
  sha.Update(std::to_string(content.size()));
  sha.Update(std::string_view("\0", 1));
  sha.Update(content);
  return sha.HexDigest();
}

}  // namespace triage::diff
