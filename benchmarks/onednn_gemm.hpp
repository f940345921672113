// oneDNN as the GEMM library of the hand-written peer layer (blas_decoder.hpp) and of the kernel
// table: a matmul primitive per call shape (created on first use and kept, as a user who knows
// their shapes would), its operands described with their real strides, the bias, the activation
// and the residual add fused as oneDNN attributes and post-ops. Debian's libdnnl-dev (oneDNN 2.6,
// OpenMP runtime: OMP_NUM_THREADS=1 for one thread).
#pragma once
#include <oneapi/dnnl/dnnl.hpp>

#include <map>
#include <tuple>
#include <unordered_map>

#include "blas_decoder.hpp"

namespace blas_peer {

struct OneDnn {
    using md = dnnl::memory::desc;
    using dt = dnnl::memory::data_type;
    dnnl::engine eng{dnnl::engine::kind::cpu, 0};
    dnnl::stream stream{eng};
    // (M, N, K, lda, ldb, ldc, trans_b, bias, add, act, alpha) -> the primitive and its memory handles
    using key = std::tuple<int, int, int, int, int, int, bool, bool, bool, act, float>;
    struct call {
        dnnl::matmul prim;
        dnnl::memory a, b, bias, c;
        std::unordered_map<int, dnnl::memory> args;  // (the handles above: set per call)
    };
    std::map<key, call> calls;

    call& get(const key& k) {
        if (auto it = calls.find(k); it != calls.end()) return it->second;
        const auto [M, N, K, lda, ldb, ldc, trans_b, has_bias, add, a, alpha] = k;
        const md a_md({M, K}, dt::f32, {lda, 1}), c_md({M, N}, dt::f32, {ldc, 1});
        // b: (K, N); stored (N, K) at ldb when transposed (a PyTorch weight, or the keys)
        const md b_md({K, N}, dt::f32, trans_b ? dnnl::memory::dims{1, ldb} : dnnl::memory::dims{ldb, 1});
        const md bias_md = has_bias ? md({1, N}, dt::f32, {N, 1}) : md();
        dnnl::primitive_attr attr;
        if (alpha != 1.0f) attr.set_output_scales(0, {alpha});
        dnnl::post_ops po;
        if (add) po.append_sum(1.0f);
        if (a == act::relu) po.append_eltwise(1.0f, dnnl::algorithm::eltwise_relu, 0.0f, 0.0f);
        if (a == act::gelu) po.append_eltwise(1.0f, dnnl::algorithm::eltwise_gelu_erf, 0.0f, 0.0f);
        attr.set_post_ops(po);
        const dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(a_md, b_md, bias_md, c_md), attr, eng);
        call c{dnnl::matmul(pd), dnnl::memory(a_md, eng, nullptr), dnnl::memory(b_md, eng, nullptr),
               has_bias ? dnnl::memory(bias_md, eng, nullptr) : dnnl::memory(), dnnl::memory(c_md, eng, nullptr), {}};
        c.args = {{DNNL_ARG_SRC, c.a}, {DNNL_ARG_WEIGHTS, c.b}, {DNNL_ARG_DST, c.c}};
        if (has_bias) c.args.emplace(DNNL_ARG_BIAS, c.bias);
        return calls.emplace(k, std::move(c)).first->second;
    }
    void run(call& c, const float* a, const float* b, const float* bias, float* out) {
        c.a.set_data_handle(const_cast<float*>(a));
        c.b.set_data_handle(const_cast<float*>(b));
        c.c.set_data_handle(out);
        if (bias) c.bias.set_data_handle(const_cast<float*>(bias));
        c.prim.execute(stream, c.args);
    }

    // y: (M, N) at ldy (+)= act(x: (M, K) · Wᵀ + bias), W: (N, K) row-major (PyTorch's layout)
    void linear(int M, int N, int K, const float* x, const float* Wt, const float* bias, float* y, int ldy, bool add,
                act a) {
        run(get({M, N, K, K, K, ldy, true, true, add, a, 1.0f}), x, Wt, bias, y);
    }
    // c: (M, N) at ldc = alpha · a: (M, K) · b (b: (K, N) at ldb, or bᵀ with b: (N, K) at ldb)
    void product(bool trans_b, int M, int N, int K, float alpha, const float* a, int lda, const float* b, int ldb,
                 float* c, int ldc) {
        run(get({M, N, K, lda, ldb, ldc, trans_b, false, false, act::none, alpha}), a, b, nullptr, c);
    }
};

}  // namespace blas_peer
