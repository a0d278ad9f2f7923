// The bfloat16 dtype: rounding as PyTorch rounds (tests/data/bfloat16_rounding.json, written by
// tests/torch_reference/make_bfloat16.py), conversions with their gradients, item and printing,
// safetensors BF16, state dicts across dtypes, and the refusals.

#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "tapegrad/io/npy.h"
#include "tapegrad/io/safetensors.h"
#include "tapegrad/nn/nn.h"
#include "testing.h"

using namespace tapegrad;
using namespace tapegrad::testing;

namespace {

nlohmann::json rounding_fixture() {
  std::ifstream in(std::string(TAPEGRAD_TEST_DATA_DIR) + "/bfloat16_rounding.json");
  REQUIRE(in.good());
  return nlohmann::json::parse(in);
}

float float_of_bits(std::uint32_t bits) {
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}

std::uint32_t bits_of_float(float x) {
  std::uint32_t bits;
  std::memcpy(&bits, &x, sizeof bits);
  return bits;
}

bool is_nan_bits(std::uint16_t bits) { return (bits & 0x7FFFu) > 0x7F80u; }

std::vector<std::uint16_t> bits_of(const Tensor& t) {
  const Tensor c = t.contiguous();
  std::vector<std::uint16_t> out;
  const BFloat16* p = c.data_ptr<BFloat16>();
  for (std::int64_t i = 0; i < c.numel(); ++i) out.push_back(p[i].bits);
  return out;
}

}  // namespace

TEST_CASE("bfloat16: float32 rounds to the bits PyTorch gives") {
  // PyTorch writes a NaN as 0x7FC0 on its scalar path and 0xFFFF on its vectorised one: a NaN
  // must stay a NaN; every other pattern must give torch's bits exactly.
  const nlohmann::json fixture = rounding_fixture();
  const auto& cases = fixture.at("float32");
  REQUIRE(cases.size() > 4000);
  std::vector<float> inputs;
  std::size_t nans = 0;
  for (const auto& c : cases) {
    const std::uint32_t pattern = c.at(0).get<std::uint32_t>();
    const std::uint16_t want = c.at(1).get<std::uint16_t>();
    const float x = float_of_bits(pattern);
    inputs.push_back(x);
    const std::uint16_t got = BFloat16(x).bits;
    if (std::isnan(x)) {
      ++nans;
      CHECK(is_nan_bits(want));
      CHECK(got == 0x7FC0);
    } else {
      INFO("pattern 0x" << std::hex << pattern << ": got 0x" << got << ", torch 0x" << want);
      CHECK(got == want);
    }
  }
  CHECK(nans > 5);
  // The tensor conversion gives the same bits as the scalar one.
  const Tensor converted = from_vector(inputs, {static_cast<std::int64_t>(inputs.size())}).to(kBFloat16);
  CHECK(converted.dtype() == kBFloat16);
  const std::vector<std::uint16_t> bits = bits_of(converted);
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    const std::uint16_t want = cases[i].at(1).get<std::uint16_t>();
    if (std::isnan(inputs[i])) CHECK(is_nan_bits(bits[i]));
    else CHECK(bits[i] == want);
  }
}

TEST_CASE("bfloat16: float64 rounds through float32 as PyTorch does") {
  const nlohmann::json fixture = rounding_fixture();
  std::vector<double> inputs;
  for (const auto& c : fixture.at("float64")) {
    const double x = std::stod(c.at(0).get<std::string>());
    inputs.push_back(x);
    const std::uint16_t want = c.at(1).get<std::uint16_t>();
    INFO("x = " << c.at(0).get<std::string>());
    if (std::isnan(x)) CHECK(is_nan_bits(BFloat16(x).bits));
    else CHECK(BFloat16(x).bits == want);
  }
  const std::vector<std::uint16_t> bits =
      bits_of(from_vector(inputs, {static_cast<std::int64_t>(inputs.size())}).to(kBFloat16));
  for (std::size_t i = 0; i < inputs.size(); ++i)
    if (!std::isnan(inputs[i])) CHECK(bits[i] == fixture.at("float64")[i].at(1).get<std::uint16_t>());
}

TEST_CASE("bfloat16: widening is exact and every conversion round trips") {
  // All 65,536 patterns: to float32 and back gives the same bits (NaNs stay NaNs).
  std::vector<float> widened;
  for (std::uint32_t b = 0; b < 65536; ++b) {
    const BFloat16 h = BFloat16::from_bits(static_cast<std::uint16_t>(b));
    const float f = h;
    std::uint32_t fbits;
    std::memcpy(&fbits, &f, sizeof fbits);
    REQUIRE(fbits == b << 16);
    if (std::isnan(f)) CHECK(is_nan_bits(BFloat16(f).bits));
    else CHECK(BFloat16(f).bits == b);
    widened.push_back(f);
  }
  const Tensor t = from_vector(widened, {65536});
  const Tensor round_trip = t.to(kBFloat16).to(kFloat32);
  CHECK(round_trip.dtype() == kFloat32);
  const std::vector<float> back = round_trip.to_vector<float>();
  for (std::size_t i = 0; i < back.size(); ++i)
    if (!std::isnan(widened[i])) CHECK(back[i] == widened[i]);
  // Through float64, int64 and bool too.
  const Tensor small = tensor({-2.5, 0.0, 3.0, 1024.0, 0.5});
  const Tensor h = small.to(kBFloat16);
  CHECK(h.to(kFloat64).to_vector<double>() == std::vector<double>{-2.5, 0.0, 3.0, 1024.0, 0.5});
  CHECK(h.to(kInt64).to_vector<std::int64_t>() == std::vector<std::int64_t>{-2, 0, 3, 1024, 0});
  CHECK(h.to(kBool).to(kInt64).to_vector<std::int64_t>() == std::vector<std::int64_t>{1, 0, 1, 1, 1});
  CHECK(tensor({7, -3}, kInt64).to(kBFloat16).to_vector<float>() == std::vector<float>{7.0f, -3.0f});
  CHECK(element_size(kBFloat16) == 2);
  CHECK(std::string(dtype_name(kBFloat16)) == "bfloat16");
  CHECK(h.is_floating_point());
}

TEST_CASE("bfloat16: the dense conversions give the scalar conversion's bits on every thread's chunk") {
  // Random float32 patterns (every class: NaN, infinities, subnormals, ties), enough for the pool's
  // chunks; the contiguous tensor takes the dense kernels, a view of part of each row the same loops
  // run by run, the transposed view the element-by-element path.
  std::vector<float> inputs(1 << 18);
  std::uint32_t state = 12345;
  for (float& x : inputs) {
    state = state * 1664525u + 1013904223u;
    x = float_of_bits(state);
  }
  const Tensor t = from_vector(inputs, {512, 512});
  const std::vector<std::uint16_t> dense = bits_of(t.to(kBFloat16));
  const std::vector<std::uint16_t> strided = bits_of(t.mT().to(kBFloat16).mT().contiguous());
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    INFO("pattern 0x" << std::hex << bits_of_float(inputs[i]));
    REQUIRE(dense[i] == BFloat16(inputs[i]).bits);
    REQUIRE(strided[i] == dense[i]);
  }
  const std::vector<std::uint16_t> runs = bits_of(t.narrow(1, 3, 500).to(kBFloat16));
  CHECK(runs == bits_of(t.to(kBFloat16).narrow(1, 3, 500).contiguous()));
  const Tensor halves = t.to(kBFloat16);
  const std::vector<float> wide_runs = halves.narrow(1, 3, 500).to(kFloat32).to_vector<float>();
  const std::vector<float> wide_dense = halves.to(kFloat32).narrow(1, 3, 500).contiguous().to_vector<float>();
  CHECK(std::memcmp(wide_runs.data(), wide_dense.data(), wide_runs.size() * sizeof(float)) == 0);
  const std::vector<float> wide = halves.to(kFloat32).to_vector<float>();
  const std::vector<float> wide_strided = halves.mT().to(kFloat32).mT().contiguous().to_vector<float>();
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    REQUIRE(bits_of_float(wide[i]) == static_cast<std::uint32_t>(dense[i]) << 16);
    REQUIRE(bits_of_float(wide_strided[i]) == bits_of_float(wide[i]));
  }
}

TEST_CASE("bfloat16: factories, item, fill and printing") {
  const Tensor z = zeros({2, 3}, kBFloat16);
  CHECK(z.dtype() == kBFloat16);
  CHECK(z.to_vector<float>() == std::vector<float>(6, 0.0f));
  const Tensor f = full({2}, 1.0 / 3.0, kBFloat16);
  // 1/3 in bfloat16 is 0x3EAB = 0.333984375.
  CHECK(bits_of(f) == std::vector<std::uint16_t>{0x3EAB, 0x3EAB});
  CHECK(f.narrow(0, 0, 1).item() == 0.333984375);
  f.fill_(2.0);
  CHECK(f.to_vector<double>() == std::vector<double>{2.0, 2.0});
  CHECK(scalar_tensor(-1.5, kBFloat16).item() == -1.5);
  const Tensor p = tensor({1.0, -2.5}).to(kBFloat16);
  CHECK(p.str() == "tensor([1.0000, -2.5000], dtype=bfloat16)");
  CHECK(scalar_tensor(0.25, kBFloat16).str() == "tensor(0.2500, dtype=bfloat16)");
}

TEST_CASE("bfloat16: a conversion carries the gradient back in the source dtype") {
  const Tensor x = tensor({1.0, -2.0, 3.0}).requires_grad_();
  const Tensor w = tensor({0.5, 0.25, 2.0});
  const Tensor h = x.to(kBFloat16);
  REQUIRE(h.grad_fn());
  CHECK(std::string(h.grad_fn()->name) == "to");
  sum(h.to(kFloat32) * w).backward();
  REQUIRE(x.grad().defined());
  CHECK(x.grad().dtype() == kFloat32);
  CHECK(x.grad().to_vector<float>() == std::vector<float>{0.5f, 0.25f, 2.0f});
}

TEST_CASE("bfloat16: a sum over leading axes reads bfloat16 in place with the widened sum's bits") {
  // (count, outputs) blocks, small and large enough for the pool, summed over their leading axes in
  // place; the same sums of the widened tensor give the reference bits and gradients.
  Generator gen(5);
  for (const Shape& shape : {Shape{3, 5}, Shape{2048, 64}, Shape{4, 128, 96}}) {
    CAPTURE(shape.str());
    const Tensor base = randn(shape, gen).to(kBFloat16);
    const Dims axes = shape.size() == 3 ? Dims{0, 1} : Dims{0};
    const Tensor x = base.detach().requires_grad_(), wide = base.detach().requires_grad_();
    const Tensor got = sum(x, axes), want = sum(wide.to(kFloat32), axes).to(kBFloat16);
    CHECK(got.dtype() == kBFloat16);
    CHECK(bits_of(got) == bits_of(want));
    {
      AutocastGuard autocast(kBFloat16);
      const Tensor got32 = sum(x, axes, true), want32 = sum(wide.to(kFloat32), axes, true);
      CHECK(got32.dtype() == kFloat32);
      CHECK(got32.shape() == want32.shape());
      CHECK(got32.to_vector<float>() == want32.to_vector<float>());
    }
    const Tensor w = randn(got.shape(), gen);
    sum(got.to(kFloat32) * w).backward();
    sum(want.to(kFloat32) * w).backward();
    CHECK(x.grad().dtype() == kBFloat16);
    CHECK(bits_of(x.grad()) == bits_of(wide.grad()));
  }
}

TEST_CASE("bfloat16: dropout that keeps everything returns its input without a copy") {
  Generator gen(3);
  const Tensor x = randn({4, 8}, gen).to(kBFloat16);
  CHECK(dropout(x, 0.0, true, gen).data_ptr<BFloat16>() == x.data_ptr<BFloat16>());
  CHECK(dropout(x, 0.5, false, gen).data_ptr<BFloat16>() == x.data_ptr<BFloat16>());
  const Tensor dropped = dropout(x, 0.5, true, gen);
  CHECK(dropped.dtype() == kBFloat16);
  CHECK_THROWS_WITH_AS(dropout(x, 1.5, true, gen), "dropout: probability p must be in [0, 1], got 1.5", ValueError);
}

TEST_CASE("bfloat16: copies, views, selection and comparisons keep the dtype") {
  const Tensor a = tensor({{1.0, 2.0, 3.0}, {4.0, 5.0, 6.0}}).to(kBFloat16);
  const Tensor t = a.transpose(0, 1).contiguous();
  CHECK(t.dtype() == kBFloat16);
  CHECK(t.to_vector<float>() == std::vector<float>{1, 4, 2, 5, 3, 6});
  CHECK(a.clone().to_vector<float>() == a.to_vector<float>());
  const Tensor mask = gt(a, 2.5);
  CHECK(mask.to(kInt64).to_vector<std::int64_t>() == std::vector<std::int64_t>{0, 0, 1, 1, 1, 1});
  CHECK(masked_fill(a, mask, -1.0).to_vector<float>() == std::vector<float>{1, 2, -1, -1, -1, -1});
  CHECK(where(mask, a, zeros({2, 3}, kBFloat16)).to_vector<float>() == std::vector<float>{0, 0, 3, 4, 5, 6});
  const Tensor c = concat({a, a}, 0);
  CHECK(c.dtype() == kBFloat16);
  CHECK(c.shape() == Shape{4, 3});
  const Tensor rows = index_select(a, 0, tensor({1, 1, 0}, kInt64));
  CHECK(rows.to_vector<float>() == std::vector<float>{4, 5, 6, 4, 5, 6, 1, 2, 3});
  Tensor target = zeros({2, 3}, kBFloat16);
  target.copy_(tensor({{0.1, 0.2, 0.3}, {0.4, 0.5, 0.6}}));  // float32 source, rounded on the way in
  CHECK(bits_of(target)[0] == BFloat16(0.1f).bits);
}

TEST_CASE("bfloat16: safetensors stores BF16 and reads it back bit for bit") {
  TempDir dir;
  const std::string path = dir.file("half.safetensors");
  std::vector<float> values;
  for (std::uint32_t b = 0; b < 65536; b += 97) values.push_back(BFloat16::from_bits(static_cast<std::uint16_t>(b)));
  const Tensor h = from_vector(values, {static_cast<std::int64_t>(values.size())}).to(kBFloat16);
  io::save_safetensors(path, {{"h", h}, {"w", tensor({1.0, 2.0})}});
  const std::string bytes = read_text(path);
  CHECK(bytes.find("\"dtype\":\"BF16\"") != std::string::npos);
  const io::SafetensorsFile file = io::load_safetensors(path);
  for (const auto& [name, t] : file.tensors) {
    if (name != "h") continue;
    CHECK(t.dtype() == kBFloat16);
    CHECK(bits_of(t) == bits_of(h));
  }
}

TEST_CASE("bfloat16: a state dict loads across float32 and bfloat16") {
  manual_seed(3);
  nn::Linear source(4, 3);
  NamedTensors half;
  for (const auto& [name, t] : source->state_dict()) half.emplace_back(name, t.to(kBFloat16));
  nn::Linear target(4, 3);
  target->load_state_dict(half);
  CHECK(target->weight().dtype() == kFloat32);
  CHECK(target->weight().to_vector<float>() == source->weight().to(kBFloat16).to_vector<float>());
  // And a bfloat16 module takes float32 values, rounded.
  nn::Linear low(4, 3);
  low->to(kBFloat16);
  CHECK(low->weight().dtype() == kBFloat16);
  low->load_state_dict(source->state_dict());
  CHECK(bits_of(low->weight()) == bits_of(source->weight().to(kBFloat16)));
}

TEST_CASE("bfloat16: refusals name the op and say what to do") {
  const Tensor h = ones({2}, kBFloat16);
  TempDir dir;
  const std::string npy = message_of([&] { io::save_npy(dir.file("h.npy"), h); });
  CHECK(npy.rfind("save_npy: ", 0) == 0);
  CHECK(npy.find("bfloat16") != std::string::npos);
  CHECK(npy.find("to(kFloat32)") != std::string::npos);
  CHECK_THROWS_AS(io::save_npy(dir.file("h.npy"), h), TypeError);
  CHECK_FALSE(std::filesystem::exists(dir.file("h.npy")));
  // An op without a bfloat16 kernel names itself and the conversion.
  const std::string reduction = message_of([&] { (void)var(h, {0}); });
  CHECK(reduction.find("var") != std::string::npos);
  CHECK(reduction.find("to(kFloat32)") != std::string::npos);
}
