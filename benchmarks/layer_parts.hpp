// Where a layer's time goes: each call the layer's forward makes, timed alone through the module
// API on the rig's weights and workspace (bench_layer.cpp's layer_rig, after one forward has filled
// it), at the layer's own M, N, K and head counts. `parts/<shape>/<part>`; the report sets each part
// beside `layer/<shape>/ctformer` and calls the difference the rest (the residual copy, the input
// checks, and whatever the sequence pays that parts timed alone in warm caches do not).
// Included by bench_layer.cpp (needs layer_rig, flop_counters, shape).
#pragma once

enum class part { norms, qkv, self_heads, self_out, cross_q, memory_kv, cross_heads, cross_out, ffn1, ffn2 };
constexpr const char* part_name(part q) {
    constexpr const char* names[] = {"norms", "qkv", "self_heads", "self_out", "cross_q", "memory_kv", "cross_heads",
                                     "cross_out", "ffn1", "ffn2"};
    return names[static_cast<int>(q)];
}

// FLOPs of one part (attention counted dense, as layer_flops does); the parts add up to it.
constexpr double part_flops(const shape& s, part q) {
    const double B = s.B, T = s.T, S = s.S, D = s.D, F = s.F, M = B * T;
    switch (q) {
        case part::qkv: return 2 * M * 3 * D * D;
        case part::self_heads: return 2 * 2 * B * T * T * D;
        case part::self_out: case part::cross_q: case part::cross_out: return 2 * M * D * D;
        case part::memory_kv: return 2 * B * S * 2 * D * D;
        case part::cross_heads: return 2 * 2 * B * T * S * D;
        case part::ffn1: case part::ffn2: return 2 * M * D * F;
        case part::norms: return 0;
    }
    return 0;
}

// One call of part q, as the layer's forward makes it (x: the layer's input, y: its output rows).
template <const shape& s, part q> void run_part(const float* x, float* y) {
    using R = layer_rig<s>;
    using L = typename R::L;
    using A = typename L::Attn;
    using lin = ct::modules::linear;
    constexpr std::size_t M = s.B * s.T;
    auto& p = R::p;
    auto& ws = R::ws;
    const typename A::buffers bf{ws.qkv(), ws.ctx(), nullptr, ws.scores};
    const typename A::buffers bf_cross{ws.q_cross(), ws.ctx(), nullptr, ws.scores};
    const typename A::transient_cross cross_src{R::mem.data(), ws.kv_mem(), s.B * s.S, s.S, s.T};
    if constexpr (q == part::norms) {  // the layer's norms, each over its M rows
        if constexpr (L::pre_norm) {
            for (std::size_t k = 0; k < L::sublayers; ++k) L::NormM::forward(L::norm_of(p, k), y, ws.normed, M);
        } else {
            for (std::size_t k = 0; k < L::sublayers; ++k) L::NormM::forward(L::norm_of(p, k), y, y, M);
        }
    } else if constexpr (q == part::qkv) {
        lin::forward(p.self_attn.in_proj_weight, 0, 3, x, M, p.self_attn.in_bias_data(), ws.qkv(), A::qkv_ld, ws.pack);
    } else if constexpr (q == part::self_heads) {
        A::self_heads(bf, s.B, s.T, typename A::transient_self{s.T}, ct::causal{}, ct::no_dropout{});
    } else if constexpr (q == part::self_out) {
        A::out_projection(p.self_attn, ws.ctx(), y, true, M, ws.pack);
    } else if constexpr (q == part::cross_q) {
        lin::forward(p.multihead_attn.in_proj_weight, 0, 1, x, M, p.multihead_attn.in_bias_data(), ws.q_cross(), s.D,
                     ws.pack);
    } else if constexpr (q == part::memory_kv) {
        cross_src.project(p.multihead_attn, 0, cross_src.memory_rows(), ws.pack);
    } else if constexpr (q == part::cross_heads) {
        A::cross_heads(bf_cross, s.B, s.T, cross_src, ct::no_mask{}, ct::no_dropout{});
    } else if constexpr (q == part::cross_out) {
        A::out_projection(p.multihead_attn, ws.ctx(), y, true, M, ws.pack);
    } else if constexpr (q == part::ffn1) {
        lin::forward(p.ffn.linear1.weight, 0, 1, x, M, p.ffn.linear1.bias_data(), ws.hidden(), L::FFN::ldh, ws.pack,
                     typename L::Activation{});
    } else if constexpr (q == part::ffn2) {
        lin::forward(p.ffn.linear2.weight, 0, 1, ws.hidden(), M, p.ffn.linear2.bias_data(), y, s.D, ws.pack,
                     ct::kernels::identity_op{}, true, L::FFN::ldh);
    }
    benchmark::DoNotOptimize(y[0]);
    benchmark::DoNotOptimize(ws.ctx()[0]);
    benchmark::ClobberMemory();
}

template <const shape& s, part q> void BM_part(benchmark::State& st) {
    using R = layer_rig<s>;
    R::fill_all();
    R::forward();
    for (auto _ : st) run_part<s, q>(R::tgt.data(), R::out.data());
    flop_counters(st, part_flops(s, q));
}

// parts/<shape>/sequence: the parts in the forward's order (the norms as one call, where the first
// of them runs), one after another as the layer runs them: each part's weights and operands are
// where the previous parts left the caches. Each call is timed by the clock: counter seq_<part> is
// its mean time in µs. Beside parts/<shape>/<part> (the same call repeated alone) it says which
// calls the sequence slows down.
template <const shape& s, part... qs> void BM_sequence(benchmark::State& st) {
    using R = layer_rig<s>;
    R::fill_all();
    R::forward();
    using clock = std::chrono::steady_clock;
    double total[sizeof...(qs)] = {};
    for (auto _ : st) {
        std::size_t i = 0;
        ((total[i] += [] {
              const auto t0 = clock::now();
              run_part<s, qs>(R::tgt.data(), R::out.data());
              return std::chrono::duration<double, std::micro>(clock::now() - t0).count();
          }(), ++i), ...);
    }
    std::size_t i = 0;
    ((st.counters[std::string("seq_") + part_name(qs)] = total[i++] / double(st.iterations())), ...);
    flop_counters(st, (part_flops(s, qs) + ...));
}

#define CT_PART(s, q) CT_BENCH((BM_part<s, part::q>), "parts/" #s "/" #q)
#define CT_PARTS_SELF(s) CT_PART(s, norms); CT_PART(s, qkv); CT_PART(s, self_heads); CT_PART(s, self_out); \
    CT_PART(s, ffn1); CT_PART(s, ffn2)
#define CT_SEQUENCE_SELF(s)                                                                                        \
    CT_BENCH((BM_sequence<s, part::norms, part::qkv, part::self_heads, part::self_out, part::ffn1, part::ffn2>),    \
             "parts/" #s "/sequence")
#define CT_PARTS_CROSS(s) CT_PARTS_SELF(s); CT_PART(s, cross_q); CT_PART(s, memory_kv); CT_PART(s, cross_heads); \
    CT_PART(s, cross_out);                                                                                         \
    CT_BENCH((BM_sequence<s, part::qkv, part::self_heads, part::self_out, part::norms, part::memory_kv,             \
                          part::cross_q, part::cross_heads, part::cross_out, part::ffn1, part::ffn2>),            \
             "parts/" #s "/sequence")
