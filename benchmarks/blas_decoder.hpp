// The layer a performance engineer writes by hand over an optimized GEMM library: every product
// one GEMM call on PyTorch-layout weights (read transposed), attention per (batch row, head) as two
// GEMMs around a masked softmax, LayerNorm and the softmax as plain loops, the residual add folded
// into the projection's GEMM (beta = 1). The GEMM library is a policy (`Gemm`):
//   - OpenBlas: cblas_sgemm (OpenBLAS, one thread), bias and activation as loops;
//   - OneDnn (onednn_gemm.hpp): oneDNN matmul primitives, created once per call shape, with the
//     bias, the activation and the residual add fused as oneDNN post-ops.
// It computes what the benchmarked ctformer layers compute (causal post-norm ReLU
// TransformerDecoderLayer; pre-norm GELU decoder-only block), with the same weights, copied by
// PyTorch name from a ctformer Params; bench_layer checks its output against ctformer's first.
#pragma once
#include <cmath>
#include <limits>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include <ctformer/core/reflect.hpp>

#ifdef CTFORMER_HAVE_CBLAS
#include <cblas.h>
#endif

namespace blas_peer {

enum class act { none, relu, gelu };

#ifdef CTFORMER_HAVE_CBLAS
struct OpenBlas {
    // y: (M, N) at ldy (+)= act(x: (M, K) · Wᵀ + bias), W: (N, K) row-major (PyTorch's layout)
    void linear(int M, int N, int K, const float* x, const float* Wt, const float* bias, float* y, int ldy, bool add,
                act a) {
        for (int r = 0; r < M; ++r)
            for (int j = 0; j < N; ++j) y[r * ldy + j] = (add ? y[r * ldy + j] : 0.0f) + bias[j];
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, M, N, K, 1.0f, x, K, Wt, K, 1.0f, y, ldy);
        if (a != act::none)
            for (int r = 0; r < M; ++r)
                for (int j = 0; j < N; ++j) {
                    float& v = y[r * ldy + j];
                    v = a == act::relu ? (v > 0 ? v : 0.0f) : 0.5f * v * (1.0f + std::erf(v * 0.70710678118654752f));
                }
    }
    // c: (M, N) at ldc = alpha · a: (M, K) · b (b: (K, N) at ldb, or bᵀ with b: (N, K) at ldb)
    void product(bool trans_b, int M, int N, int K, float alpha, const float* a, int lda, const float* b, int ldb,
                 float* c, int ldc) {
        cblas_sgemm(CblasRowMajor, CblasNoTrans, trans_b ? CblasTrans : CblasNoTrans, M, N, K, alpha, a, lda, b, ldb,
                    0.0f, c, ldc);
    }
};
#endif

template <class Gemm> struct Layer {
    int B, T, S, D, H, F;
    bool cross;  // true: post-norm ReLU decoder layer; false: pre-norm GELU decoder-only block
    std::map<std::string, std::vector<float>> w;
    Gemm gemm;
    std::vector<float> qkv, q, kv, ctx, hid, nrm, sc;

    template <class P>
    Layer(const P& params, int b, int t, int s, int d, int h, int f, bool cross_)
        : B(b), T(t), S(s), D(d), H(h), F(f), cross(cross_), qkv(std::size_t(b) * t * 3 * d), q(std::size_t(b) * t * d),
          kv(std::size_t(b) * s * 2 * d), ctx(std::size_t(b) * t * d), hid(std::size_t(b) * t * f),
          nrm(std::size_t(b) * t * d), sc(std::size_t(t) * (s > t ? s : t)) {
        ct::for_each_tensor(params, [&](std::string_view name, const auto& tensor) {
            auto& v = w[std::string(name)];
            v.resize(tensor.size);
            for (std::size_t i = 0; i < tensor.size; ++i) v[i] = tensor.get(i);
        });
    }
    const float* W(const std::string& n) const { return w.at(n).data(); }

    void layer_norm(const float* x, float* y, const std::string& n) const {
        const float *g = W(n + ".weight"), *be = W(n + ".bias");
        for (int r = 0; r < B * T; ++r) {
            const float* xr = x + r * D;
            float mean = 0, var = 0;
            for (int i = 0; i < D; ++i) mean += xr[i];
            mean /= D;
            for (int i = 0; i < D; ++i) var += (xr[i] - mean) * (xr[i] - mean);
            const float rstd = 1.0f / std::sqrt(var / D + 1e-5f);
            for (int i = 0; i < D; ++i) y[r * D + i] = (xr[i] - mean) * rstd * g[i] + be[i];
        }
    }
    // ctx (rows of batch b) = softmax(q·kᵀ/√Dh [causal]) · v, per head
    void attention(int b, int Tk, const float* qb, int ldq, const float* kb, const float* vb, int ldkv, bool causal) {
        const int Dh = D / H;
        const float scale = 1.0f / std::sqrt(float(Dh)), ninf = -std::numeric_limits<float>::infinity();
        for (int h = 0; h < H; ++h) {
            gemm.product(true, T, Tk, Dh, scale, qb + h * Dh, ldq, kb + h * Dh, ldkv, sc.data(), Tk);
            for (int i = 0; i < T; ++i) {
                float* row = sc.data() + i * Tk;
                if (causal)
                    for (int j = i + 1; j < Tk; ++j) row[j] = ninf;
                float m = row[0], sum = 0;
                for (int j = 1; j < Tk; ++j) m = row[j] > m ? row[j] : m;
                for (int j = 0; j < Tk; ++j) sum += (row[j] = std::exp(row[j] - m));
                for (int j = 0; j < Tk; ++j) row[j] /= sum;
            }
            gemm.product(false, T, Dh, Tk, 1.0f, sc.data(), Tk, vb + h * Dh, ldkv, ctx.data() + std::size_t(b) * T * D + h * Dh,
                         D);
        }
    }
    // x: (B, T, D) in place; mem: (B, S, D) (cross only)
    void forward(float* x, const float* mem) {
        const int M = B * T;
        const float* in = x;
        if (!cross) {
            layer_norm(x, nrm.data(), "norm1");
            in = nrm.data();
        }
        gemm.linear(M, 3 * D, D, in, W("self_attn.in_proj_weight"), W("self_attn.in_proj_bias"), qkv.data(), 3 * D, false,
                    act::none);
        for (int b = 0; b < B; ++b) {
            const float* base = qkv.data() + std::size_t(b) * T * 3 * D;
            attention(b, T, base, 3 * D, base + D, base + 2 * D, 3 * D, true);
        }
        gemm.linear(M, D, D, ctx.data(), W("self_attn.out_proj.weight"), W("self_attn.out_proj.bias"), x, D, true,
                    act::none);
        if (cross) {
            layer_norm(x, x, "norm1");
            const float *wi = W("multihead_attn.in_proj_weight"), *bi = W("multihead_attn.in_proj_bias");
            gemm.linear(M, D, D, x, wi, bi, q.data(), D, false, act::none);
            gemm.linear(B * S, 2 * D, D, mem, wi + D * D, bi + D, kv.data(), 2 * D, false, act::none);
            for (int b = 0; b < B; ++b) {
                const float* kvb = kv.data() + std::size_t(b) * S * 2 * D;
                attention(b, S, q.data() + std::size_t(b) * T * D, D, kvb, kvb + D, 2 * D, false);
            }
            gemm.linear(M, D, D, ctx.data(), W("multihead_attn.out_proj.weight"), W("multihead_attn.out_proj.bias"), x, D,
                        true, act::none);
            layer_norm(x, x, "norm2");
            in = x;
        } else {
            layer_norm(x, nrm.data(), "norm2");
            in = nrm.data();
        }
        gemm.linear(M, F, D, in, W("linear1.weight"), W("linear1.bias"), hid.data(), F, false,
                    cross ? act::relu : act::gelu);
        gemm.linear(M, D, F, hid.data(), W("linear2.weight"), W("linear2.bias"), x, D, true, act::none);
        if (cross) layer_norm(x, x, "norm3");
    }
};

}  // namespace blas_peer
