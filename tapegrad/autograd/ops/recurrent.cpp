// Recurrent layers as one fused op per layer and direction (recurrent_layer), and PyTorch's
// one-step cells on top of it. The gate math is in kernels/recurrent.h; the products with W_hh
// are gemms on the raw buffers, one per step, and W_hh's gradient is a single gemm over all steps.

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "tapegrad/autograd/autocast.h"
#include "tapegrad/autograd/kernels/blas.h"
#include "tapegrad/autograd/kernels/elementwise.h"
#include "tapegrad/autograd/kernels/recurrent.h"
#include "tapegrad/autograd/ops.h"
#include "tapegrad/autograd/parallel.h"

namespace tapegrad {

namespace {

// Values kept per step and row for backward: the Elman output, the LSTM's activated gates, the
// GRU's r, z, n and gh_n.
std::int64_t kept_per_unit(RecurrentMode mode) {
  return mode == RecurrentMode::Lstm || mode == RecurrentMode::Gru ? 4 : 1;
}

struct LayerDims {
  std::int64_t steps = 0, batch = 0, hidden = 0, gates = 0;  // T, B, H, G*H
};

// Rows of the batch per chunk of the gate kernels: about 4096 units of work each.
std::int64_t row_grain(std::int64_t hidden) {
  return std::max<std::int64_t>(1, 4096 / std::max<std::int64_t>(hidden, 1));
}

// Whether item b runs at time t (its length covers t).
inline bool runs(const std::vector<std::int64_t>& lengths, std::int64_t b, std::int64_t t) { return t < lengths[b]; }

// Buffers the forward fills for backward, (T, B, ...) by time.
struct LayerSaved {
  Tensor h_prev;  // (T, B, H): the state each step starts from
  Tensor c_prev;  // LSTM: (T, B, H)
  Tensor c_new;   // LSTM: (T, B, H)
  Tensor kept;    // (T, B, kept_per_unit * H)
};

template <class T>
void layer_forward(RecurrentMode mode, const LayerDims& d, const std::vector<std::int64_t>& lengths, bool reverse,
                   const T* xg, const T* h0, const T* c0, const T* w, const T* bias, T* out, T* h_n, T* c_n,
                   LayerSaved* saved) {
  const std::int64_t B = d.batch, H = d.hidden, G = d.gates, K = kept_per_unit(mode) * H;
  const bool lstm = mode == RecurrentMode::Lstm, relu = mode == RecurrentMode::RnnRelu;
  std::vector<T> gh(static_cast<std::size_t>(B * G)), scratch_k(static_cast<std::size_t>(B * K));
  std::vector<T> h(h0, h0 + B * H), h_next(static_cast<std::size_t>(B * H));
  std::vector<T> c, c_next;
  if (lstm) {
    c.assign(c0, c0 + B * H);
    c_next.resize(static_cast<std::size_t>(B * H));
  }
  for (std::int64_t s = 0; s < d.steps; ++s) {
    const std::int64_t t = reverse ? d.steps - 1 - s : s;
    T* kept = saved ? saved->kept.data_ptr<T>() + t * B * K : scratch_k.data();
    if (saved) {
      std::copy(h.begin(), h.end(), saved->h_prev.data_ptr<T>() + t * B * H);
      if (lstm) std::copy(c.begin(), c.end(), saved->c_prev.data_ptr<T>() + t * B * H);
    }
    // gh = b_hh + h W_hh^T
    if (bias)
      for (std::int64_t b = 0; b < B; ++b) std::copy(bias, bias + G, gh.data() + b * G);
    kernels::gemm(false, true, B, G, H, T(1), h.data(), H, w, H, bias ? T(1) : T(0), gh.data(), G);
    const T* gi = xg + t * B * G;
    T* out_t = out + t * B * H;
    parallel_for(0, B, row_grain(H), [&](std::int64_t lo, std::int64_t hi) {
      for (std::int64_t b = lo; b < hi; ++b) {
        T* hn = h_next.data() + b * H;
        if (!runs(lengths, b, t)) {  // the state passes through; the output is 0
          std::copy(h.data() + b * H, h.data() + (b + 1) * H, hn);
          if (lstm) std::copy(c.data() + b * H, c.data() + (b + 1) * H, c_next.data() + b * H);
          std::fill(out_t + b * H, out_t + (b + 1) * H, T(0));
          std::fill(kept + b * K, kept + (b + 1) * K, T(0));
          continue;
        }
        const T* gib = gi + b * G;
        const T* ghb = gh.data() + b * G;
        switch (mode) {
          case RecurrentMode::RnnTanh:
          case RecurrentMode::RnnRelu:
            kernels::elman_forward_row(gib, ghb, relu, H, hn);
            std::copy(hn, hn + H, kept + b * K);
            break;
          case RecurrentMode::Lstm:
            kernels::lstm_forward_row(gib, ghb, c.data() + b * H, H, kept + b * K, c_next.data() + b * H, hn);
            break;
          case RecurrentMode::Gru:
            kernels::gru_forward_row(gib, ghb, h.data() + b * H, H, kept + b * K, hn);
            break;
        }
        std::copy(hn, hn + H, out_t + b * H);
      }
    });
    if (saved && lstm) std::copy(c_next.begin(), c_next.end(), saved->c_new.data_ptr<T>() + t * B * H);
    h.swap(h_next);
    if (lstm) c.swap(c_next);
  }
  std::copy(h.begin(), h.end(), h_n);
  if (lstm) std::copy(c.begin(), c.end(), c_n);
}

// Gradients of the layer's inputs from those of its outputs (dout, dh_n, dc_n: null when none
// reached them). dxg: (T, B, G); dh0, dc0: (B, H); dw: (G, H) or null; db: (G) or null.
template <class T>
void layer_backward(RecurrentMode mode, const LayerDims& d, const std::vector<std::int64_t>& lengths, bool reverse,
                    const LayerSaved& saved, const T* w, const T* dout, const T* dh_n, const T* dc_n, T* dxg, T* dh0,
                    T* dc0, T* dw, T* db) {
  const std::int64_t B = d.batch, H = d.hidden, G = d.gates, K = kept_per_unit(mode) * H;
  const bool lstm = mode == RecurrentMode::Lstm, gru = mode == RecurrentMode::Gru,
             relu = mode == RecurrentMode::RnnRelu;
  // The gradient of the state-side pre-activations gh; the input side's is the same but for the
  // GRU's candidate block, so only the GRU keeps a separate one.
  std::vector<T> dgh_gru(gru ? static_cast<std::size_t>(d.steps * B * G) : 0);
  T* dgh_all = gru ? dgh_gru.data() : dxg;
  std::vector<T> dh(static_cast<std::size_t>(B * H), T(0)), dh_next(static_cast<std::size_t>(B * H));
  std::vector<T> dc(lstm ? static_cast<std::size_t>(B * H) : 0, T(0));
  if (dh_n) std::copy(dh_n, dh_n + B * H, dh.begin());
  if (lstm && dc_n) std::copy(dc_n, dc_n + B * H, dc.begin());
  const T* h_prev = saved.h_prev.data_ptr<T>();
  for (std::int64_t s = d.steps - 1; s >= 0; --s) {
    const std::int64_t t = reverse ? d.steps - 1 - s : s;
    const T* kept = saved.kept.data_ptr<T>() + t * B * K;
    T* dgi_t = dxg + t * B * G;
    T* dgh_t = dgh_all + t * B * G;
    parallel_for(0, B, row_grain(H), [&](std::int64_t lo, std::int64_t hi) {
      for (std::int64_t b = lo; b < hi; ++b) {
        T* dhb = dh.data() + b * H;
        T* direct = dh_next.data() + b * H;  // dh_prev's part that does not go through W_hh
        if (!runs(lengths, b, t)) {
          std::fill(dgi_t + b * G, dgi_t + (b + 1) * G, T(0));
          if (gru) std::fill(dgh_t + b * G, dgh_t + (b + 1) * G, T(0));
          std::copy(dhb, dhb + H, direct);
          continue;
        }
        if (dout)
          for (std::int64_t j = 0; j < H; ++j) dhb[j] += dout[(t * B + b) * H + j];
        switch (mode) {
          case RecurrentMode::RnnTanh:
          case RecurrentMode::RnnRelu:
            kernels::elman_backward_row(kept + b * K, dhb, relu, H, dgi_t + b * G);
            std::fill(direct, direct + H, T(0));
            break;
          case RecurrentMode::Lstm: {
            const std::int64_t row = (t * B + b) * H;
            kernels::lstm_backward_row(kept + b * K, saved.c_prev.data_ptr<T>() + row, saved.c_new.data_ptr<T>() + row,
                                       dhb, dc.data() + b * H, H, dgi_t + b * G, dc.data() + b * H);
            std::fill(direct, direct + H, T(0));
            break;
          }
          case RecurrentMode::Gru:
            kernels::gru_backward_row(kept + b * K, h_prev + (t * B + b) * H, dhb, H, dgi_t + b * G, dgh_t + b * G,
                                      direct);
            break;
        }
      }
    });
    // dh_prev = direct + dgh W_hh (rows that did not run have dgh = 0)
    kernels::gemm(false, false, B, H, G, T(1), dgh_t, G, w, H, T(1), dh_next.data(), H);
    dh.swap(dh_next);
  }
  std::copy(dh.begin(), dh.end(), dh0);
  if (lstm) std::copy(dc.begin(), dc.end(), dc0);
  const std::int64_t rows = d.steps * B;
  if (dw) {
    if (rows == 0) std::fill(dw, dw + G * H, T(0));
    else kernels::gemm(true, false, G, H, rows, T(1), dgh_all, G, h_prev, H, T(0), dw, H);
  }
  if (db) {
    std::fill(db, db + G, T(0));
    for (std::int64_t r = 0; r < rows; ++r)
      for (std::int64_t j = 0; j < G; ++j) db[j] += dgh_all[r * G + j];
  }
}

// The layer's backward written with ops, for a taped backward (create_graph): the forward is
// recomputed step by step from the inputs, and the kernels' backward formulas are applied with
// ops, so every gradient is a function of the inputs (and of the incoming gradients).
TensorList layer_backward_taped(RecurrentMode mode, const TensorList& grads, const Tensor& xg, const Tensor& h0,
                                const Tensor& c0, const Tensor& w, const Tensor& bias,
                                const std::vector<std::int64_t>& lengths, bool reverse) {
  const std::int64_t steps = xg.shape()[0], B = xg.shape()[1], H = h0.shape()[1];
  const bool lstm = mode == RecurrentMode::Lstm, relu = mode == RecurrentMode::RnnRelu;
  struct Step {
    Tensor runs;  // Bool (B, 1)
    Tensor h, c;  // the states the step starts from
    Tensor a;     // Elman: h'; LSTM: i, f, g, o; GRU: r, z, n, gh_n
    Tensor b, g, o, c_new, n, hn;
  };
  std::vector<Step> at(static_cast<std::size_t>(steps));
  Tensor h = h0, c = c0;
  for (std::int64_t s = 0; s < steps; ++s) {
    const std::int64_t t = reverse ? steps - 1 - s : s;
    Step& st = at[static_cast<std::size_t>(t)];
    Tensor mask = empty({B, 1}, kBool);
    for (std::int64_t b = 0; b < B; ++b) mask.data_ptr<bool>()[b] = runs(lengths, b, t);
    st.runs = mask;
    st.h = h;
    st.c = c;
    Tensor gh = matmul(h, w.mT());
    if (bias.defined()) gh = gh + bias;
    const Tensor gi = select(xg, 0, t);
    Tensor h_new, c_new;
    if (mode == RecurrentMode::RnnTanh || relu) {
      h_new = relu ? tapegrad::relu(gi + gh) : tapegrad::tanh(gi + gh);
      st.a = h_new;
    } else if (lstm) {
      const Tensor a = gi + gh;
      st.a = sigmoid(narrow(a, 1, 0, H));  // i
      st.b = sigmoid(narrow(a, 1, H, H));  // f
      st.g = tapegrad::tanh(narrow(a, 1, 2 * H, H));
      st.o = sigmoid(narrow(a, 1, 3 * H, H));
      c_new = st.b * c + st.a * st.g;
      st.c_new = c_new;
      h_new = st.o * tapegrad::tanh(c_new);
    } else {
      st.a = sigmoid(narrow(gi, 1, 0, H) + narrow(gh, 1, 0, H));  // r
      st.b = sigmoid(narrow(gi, 1, H, H) + narrow(gh, 1, H, H));  // z
      st.hn = narrow(gh, 1, 2 * H, H);
      st.n = tapegrad::tanh(narrow(gi, 1, 2 * H, H) + st.a * st.hn);
      h_new = st.n + st.b * (h - st.n);
    }
    h = where(mask, h_new, h);
    if (lstm) c = where(mask, c_new, c);
  }
  const DType dtype = xg.dtype();
  Tensor dh = grads[1].defined() ? grads[1] : zeros({B, H}, dtype);
  Tensor dc = lstm ? (grads[2].defined() ? grads[2] : zeros({B, H}, dtype)) : Tensor();
  TensorList dgi_at(static_cast<std::size_t>(steps));
  Tensor dw = zeros(w.shape(), dtype), db = bias.defined() ? zeros(bias.shape(), dtype) : Tensor();
  for (std::int64_t s = steps - 1; s >= 0; --s) {
    const std::int64_t t = reverse ? steps - 1 - s : s;
    const Step& st = at[static_cast<std::size_t>(t)];
    const Tensor dht = grads[0].defined() ? dh + where(st.runs, select(grads[0], 0, t), 0.0) : dh;
    Tensor dgi, dgh, direct, dc_prev;
    if (mode == RecurrentMode::RnnTanh || relu) {
      dgi = relu ? where(gt(st.a, 0.0), dht, 0.0) : dht * (1.0 - st.a * st.a);
      dgh = dgi;
    } else if (lstm) {
      const Tensor tc = tapegrad::tanh(st.c_new);
      const Tensor dct = dc + dht * st.o * (1.0 - tc * tc);
      dgi = concat({dct * st.g * st.a * (1.0 - st.a), dct * st.c * st.b * (1.0 - st.b),
                    dct * st.a * (1.0 - st.g * st.g), dht * tc * st.o * (1.0 - st.o)},
                   1);
      dgh = dgi;
      dc_prev = dct * st.b;
    } else {
      const Tensor dan = dht * (1.0 - st.b) * (1.0 - st.n * st.n);
      const Tensor dar = dan * st.hn * st.a * (1.0 - st.a);
      const Tensor daz = dht * (st.h - st.n) * st.b * (1.0 - st.b);
      dgi = concat({dar, daz, dan}, 1);
      dgh = concat({dar, daz, dan * st.a}, 1);
      direct = dht * st.b;
    }
    dgi = where(st.runs, dgi, 0.0);
    dgh = where(st.runs, dgh, 0.0);
    dgi_at[static_cast<std::size_t>(t)] = dgi;
    Tensor through = matmul(dgh, w);
    if (direct.defined()) through = through + direct;
    dh = where(st.runs, through, dht);
    if (lstm) dc = where(st.runs, dc_prev, dc);
    dw = dw + matmul(dgh.mT(), st.h);
    if (db.defined()) db = db + sum(dgh, {0});
  }
  const Tensor dxg = steps > 0 ? stack(dgi_at, 0) : zeros(xg.shape(), dtype);
  return {dxg, dh, dc, dw, db};
}

void check_layer(RecurrentMode mode, const Tensor& xg, const Tensor& h0, const Tensor& c0, const Tensor& w,
                 const Tensor& bias, const Tensor& lengths, LayerDims& d) {
  const std::string op = std::string(recurrent_mode_name(mode)) + "_layer";
  const std::int64_t per_unit = recurrent_gates(mode);
  if (!xg.defined() || !h0.defined() || !w.defined()) throw ValueError(op + ": input_gates, h0 and w_hh are required");
  if (xg.dim() != 3)
    throw ShapeError(message(op, ": input_gates must be (T, B, ", per_unit, " H), got shape ", xg.shape().str()));
  if (h0.dim() != 2 || h0.shape()[0] != xg.shape()[1])
    throw ShapeError(message(op, ": h0 must be (B, H) with B = ", xg.shape()[1], ", got shape ", h0.shape().str()));
  if (mode == RecurrentMode::Lstm) {
    if (!c0.defined()) throw ValueError(op + ": the LSTM needs c0");
    if (c0.shape() != h0.shape())
      throw ShapeError(op + ": c0 must have h0's shape " + h0.shape().str() + ", got " + c0.shape().str());
  } else if (c0.defined()) {
    throw ValueError(op + ": c0 is for the LSTM only");
  }
  d.steps = xg.shape()[0];
  d.batch = xg.shape()[1];
  d.hidden = h0.shape()[1];
  d.gates = per_unit * d.hidden;
  if (xg.shape()[2] != d.gates)
    throw ShapeError(message(op, ": input_gates' last axis must be ", per_unit, " H = ", d.gates, " for hidden size ",
                             d.hidden, ", got shape ", xg.shape().str()));
  if (w.shape() != Shape{d.gates, d.hidden})
    throw ShapeError(op + ": w_hh must be " + Shape{d.gates, d.hidden}.str() + ", got shape " + w.shape().str());
  if (bias.defined() && bias.shape() != Shape{d.gates})
    throw ShapeError(op + ": b_hh must be " + Shape{d.gates}.str() + ", got shape " + bias.shape().str());
  for (const Tensor* t : {&h0, &c0, &w, &bias})
    if (t->defined() && t->dtype() != xg.dtype())
      throw TypeError(op + ": dtype mismatch, input_gates is " + dtype_name(xg.dtype()) + " and a state or weight is " +
                      dtype_name(t->dtype()));
  dispatch_floating(xg.dtype(), op.c_str(), [](auto) {});
  if (lengths.defined()) {
    if (lengths.dtype() != kInt64 || lengths.shape() != Shape{d.batch})
      throw ShapeError(op + ": lengths must be int64 of shape " + Shape{d.batch}.str() + ", got " +
                       dtype_name(lengths.dtype()) + " of shape " + lengths.shape().str());
  }
}

}  // namespace

const char* recurrent_mode_name(RecurrentMode mode) {
  switch (mode) {
    case RecurrentMode::RnnTanh:
      return "rnn_tanh";
    case RecurrentMode::RnnRelu:
      return "rnn_relu";
    case RecurrentMode::Lstm:
      return "lstm";
    case RecurrentMode::Gru:
      return "gru";
  }
  return "recurrent";
}

int recurrent_gates(RecurrentMode mode) {
  switch (mode) {
    case RecurrentMode::Lstm:
      return 4;
    case RecurrentMode::Gru:
      return 3;
    default:
      return 1;
  }
}

TensorList recurrent_layer(RecurrentMode mode, const Tensor& input_gates, const Tensor& h0, const Tensor& c0,
                           const Tensor& w_hh, const Tensor& b_hh, const Tensor& lengths, bool reverse) {
  // The fused kernels run in float32 and float64: bfloat16 operands are widened, and the results
  // rounded back only when every floating operand was bfloat16 (beside float32, bfloat16 meets it in float32).
  using detail::is_bf16;
  const auto bf16_or_absent = [&](const Tensor& t) { return !t.defined() || is_bf16(t); };
  if (is_bf16(input_gates) || is_bf16(h0) || is_bf16(c0) || is_bf16(w_hh) || is_bf16(b_hh)) {
    const bool all_bf16 =
        is_bf16(input_gates) && is_bf16(h0) && bf16_or_absent(c0) && is_bf16(w_hh) && bf16_or_absent(b_hh);
    TensorList r =
        recurrent_layer(mode, detail::widen_bf16(input_gates), detail::widen_bf16(h0), detail::widen_bf16(c0),
                        detail::widen_bf16(w_hh), detail::widen_bf16(b_hh), lengths, reverse);
    if (all_bf16)
      for (Tensor& t : r)
        if (t.defined() && t.dtype() == kFloat32) t = t.to(kBFloat16);
    return r;
  }
  LayerDims d;
  check_layer(mode, input_gates, h0, c0, w_hh, b_hh, lengths, d);
  const std::string op = std::string(recurrent_mode_name(mode)) + "_layer";
  std::vector<std::int64_t> len(static_cast<std::size_t>(d.batch), d.steps);
  if (lengths.defined()) {
    const Tensor ld = kernels::dense(lengths);
    for (std::int64_t b = 0; b < d.batch; ++b) {
      len[static_cast<std::size_t>(b)] = ld.data_ptr<std::int64_t>()[b];
      if (len[static_cast<std::size_t>(b)] < 0 || len[static_cast<std::size_t>(b)] > d.steps)
        throw ValueError(message(op, ": lengths[", b, "] = ", len[b], " is outside [0, ", d.steps, "]"));
    }
  }
  const bool lstm = mode == RecurrentMode::Lstm;
  const DType dtype = input_gates.dtype();
  const bool record_it = any_requires_grad({&input_gates, &h0, &c0, &w_hh, &b_hh});
  const Tensor xg = kernels::dense(input_gates).detach(), hd = kernels::dense(h0).detach();
  const Tensor cd = lstm ? kernels::dense(c0).detach() : Tensor(), wd = kernels::dense(w_hh).detach();
  const Tensor bd = b_hh.defined() ? kernels::dense(b_hh).detach() : Tensor();
  Tensor out = empty({d.steps, d.batch, d.hidden}, dtype), h_n = empty({d.batch, d.hidden}, dtype);
  Tensor c_n = lstm ? empty({d.batch, d.hidden}, dtype) : Tensor();
  auto saved = std::make_shared<LayerSaved>();
  if (record_it) {
    saved->h_prev = empty({d.steps, d.batch, d.hidden}, dtype);
    saved->kept = empty({d.steps, d.batch, kept_per_unit(mode) * d.hidden}, dtype);
    if (lstm) {
      saved->c_prev = empty({d.steps, d.batch, d.hidden}, dtype);
      saved->c_new = empty({d.steps, d.batch, d.hidden}, dtype);
    }
  }
  dispatch_floating(dtype, op.c_str(), [&](auto tag) {
    using T = decltype(tag);
    layer_forward<T>(mode, d, len, reverse, xg.data_ptr<T>(), hd.data_ptr<T>(), lstm ? cd.data_ptr<T>() : nullptr,
                     wd.data_ptr<T>(), bd.defined() ? bd.data_ptr<T>() : nullptr, out.data_ptr<T>(), h_n.data_ptr<T>(),
                     lstm ? c_n.data_ptr<T>() : nullptr, record_it ? saved.get() : nullptr);
  });
  TensorList outputs{out, h_n};
  if (lstm) outputs.push_back(c_n);
  if (!record_it) return outputs;
  record_multi(
      lstm ? "lstm_layer"
           : (mode == RecurrentMode::Gru ? "gru_layer"
                                         : (mode == RecurrentMode::RnnTanh ? "rnn_tanh_layer" : "rnn_relu_layer")),
      outputs, {input_gates, h0, c0, w_hh, b_hh},
      [mode, d, len, reverse, saved, sx = SavedTensor(input_gates), sh = SavedTensor(h0), sc = SavedTensor(c0),
       sw = SavedTensor(w_hh), sb = SavedTensor(b_hh)](const TensorList& grads) -> TensorList {
        const Tensor& xg = sx.unpack();
        const Tensor& h0 = sh.unpack();
        const Tensor& c0 = sc.unpack();
        const Tensor& w = sw.unpack();
        const Tensor& bias = sb.unpack();
        bool taped = is_grad_enabled() && any_requires_grad({&xg, &h0, &c0, &w, &bias});
        for (const Tensor& g : grads) taped = taped || (is_grad_enabled() && g.defined() && g.requires_grad());
        if (taped) return layer_backward_taped(mode, grads, xg, h0, c0, w, bias, len, reverse);
        const bool lstm = mode == RecurrentMode::Lstm;
        const DType dtype = xg.dtype();
        Tensor dxg = empty(xg.shape(), dtype), dh0 = empty(h0.shape(), dtype);
        Tensor dc0 = lstm ? empty(h0.shape(), dtype) : Tensor();
        Tensor dw = empty(w.shape(), dtype), db = bias.defined() ? empty(bias.shape(), dtype) : Tensor();
        const Tensor dout = grads[0].defined() ? kernels::dense(grads[0]) : Tensor();
        const Tensor dhn = grads[1].defined() ? kernels::dense(grads[1]) : Tensor();
        const Tensor dcn = lstm && grads[2].defined() ? kernels::dense(grads[2]) : Tensor();
        const Tensor wd = kernels::dense(w);
        dispatch_floating(dtype, "recurrent_layer backward", [&](auto tag) {
          using T = decltype(tag);
          auto ptr = [](const Tensor& t) { return t.defined() ? t.data_ptr<T>() : nullptr; };
          layer_backward<T>(mode, d, len, reverse, *saved, wd.data_ptr<T>(), ptr(dout), ptr(dhn), ptr(dcn),
                            dxg.data_ptr<T>(), dh0.data_ptr<T>(), ptr(dc0), ptr(dw), ptr(db));
        });
        return {dxg, dh0, dc0, dw, db};
      });
  return outputs;
}

// ---------------------------------------------------------------- cells

namespace {

// x W_ih^T + b_ih as a one-step sequence (1, B, G), checked against the cell's weights.
Tensor cell_input_gates(const char* op, const Tensor& x, const Tensor& h, const Tensor& w_ih, const Tensor& b_ih) {
  if (x.dim() != 2 || h.dim() != 2 || x.shape()[0] != h.shape()[0])
    throw ShapeError(message(op, ": expected input (B, I) and state (B, H) with the same B, got shapes ",
                             x.shape().str(), " and ", h.shape().str()));
  if (w_ih.dim() != 2 || w_ih.shape()[1] != x.shape()[1])
    throw ShapeError(
        message(op, ": w_ih of shape ", w_ih.shape().str(), " does not take input of shape ", x.shape().str()));
  const Tensor g = linear(x, w_ih, b_ih);
  return unsqueeze(g, 0);
}

}  // namespace

Tensor rnn_tanh_cell(const Tensor& x, const Tensor& h, const Tensor& w_ih, const Tensor& w_hh, const Tensor& b_ih,
                     const Tensor& b_hh) {
  const Tensor xg = cell_input_gates("rnn_tanh_cell", x, h, w_ih, b_ih);
  return recurrent_layer(RecurrentMode::RnnTanh, xg, h, Tensor(), w_hh, b_hh)[1];
}

Tensor rnn_relu_cell(const Tensor& x, const Tensor& h, const Tensor& w_ih, const Tensor& w_hh, const Tensor& b_ih,
                     const Tensor& b_hh) {
  const Tensor xg = cell_input_gates("rnn_relu_cell", x, h, w_ih, b_ih);
  return recurrent_layer(RecurrentMode::RnnRelu, xg, h, Tensor(), w_hh, b_hh)[1];
}

std::pair<Tensor, Tensor> lstm_cell(const Tensor& x, const Tensor& h, const Tensor& c, const Tensor& w_ih,
                                    const Tensor& w_hh, const Tensor& b_ih, const Tensor& b_hh) {
  const Tensor xg = cell_input_gates("lstm_cell", x, h, w_ih, b_ih);
  const TensorList r = recurrent_layer(RecurrentMode::Lstm, xg, h, c, w_hh, b_hh);
  return {r[1], r[2]};
}

Tensor gru_cell(const Tensor& x, const Tensor& h, const Tensor& w_ih, const Tensor& w_hh, const Tensor& b_ih,
                const Tensor& b_hh) {
  const Tensor xg = cell_input_gates("gru_cell", x, h, w_ih, b_ih);
  return recurrent_layer(RecurrentMode::Gru, xg, h, Tensor(), w_hh, b_hh)[1];
}

}  // namespace tapegrad
