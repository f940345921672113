// The generation peer a user would otherwise write: the same pre-norm GELU GPT as ctformer::GPT
// (learned positions, final LayerNorm, untied LM head) in straightforward Eigen, with per-layer
// K/V caches as (context, D) matrices allocated once, one token per step through GEMVs.
#pragma once
#include <Eigen/Dense>
#include <cmath>
#include <vector>

namespace eigen_peer {

struct GPT {
    using Mat = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
    using Vec = Eigen::RowVectorXf;
    struct Block {
        Mat in_w, out_w, w1, w2, k, v;  // (3D, D), (D, D), (F, D), (D, F), caches (Ctx, D)
        Vec in_b, out_b, b1, b2, g1, be1, g2, be2;
    };
    int V, Ctx, D, H, F, len = 0;
    Mat wte, wpe, head;
    std::vector<Block> blocks;
    Vec gf, bf;

    GPT(int v, int ctx, int d, int h, int f, int n) : V(v), Ctx(ctx), D(d), H(h), F(f) {
        auto init = [](int r, int c) { return Mat(Mat::Random(r, c) * 0.02f); };
        wte = init(V, D), wpe = init(Ctx, D), head = init(V, D);
        for (int i = 0; i < n; ++i)
            blocks.push_back({init(3 * D, D), init(D, D), init(F, D), init(D, F), Mat::Zero(Ctx, D), Mat::Zero(Ctx, D),
                              Vec::Zero(3 * D), Vec::Zero(D), Vec::Zero(F), Vec::Zero(D), Vec::Ones(D), Vec::Zero(D),
                              Vec::Ones(D), Vec::Zero(D)});
        gf = Vec::Ones(D), bf = Vec::Zero(D);
    }
    static Vec layer_norm(const Vec& x, const Vec& g, const Vec& b) {
        const float mean = x.mean();
        const float var = (x.array() - mean).square().mean();
        return ((x.array() - mean) / std::sqrt(var + 1e-5f)).matrix().cwiseProduct(g) + b;
    }
    void reset() { len = 0; }
    // Feeds token at position len; returns its logits (V).
    Vec step(int token) {
        Vec x = wte.row(token) + wpe.row(len);
        const int Dh = D / H, n = len + 1;
        const float scale = 1.0f / std::sqrt(float(Dh));
        for (Block& b : blocks) {
            const Vec h = layer_norm(x, b.g1, b.be1);
            const Vec qkv = (b.in_w * h.transpose()).transpose() + b.in_b;
            b.k.row(len) = qkv.segment(D, D);
            b.v.row(len) = qkv.tail(D);
            Vec ctx(D);
            for (int hd = 0; hd < H; ++hd) {
                Vec s = (b.k.block(0, hd * Dh, n, Dh) * qkv.segment(hd * Dh, Dh).transpose()).transpose() * scale;
                s = (s.array() - s.maxCoeff()).exp();
                s /= s.sum();
                ctx.segment(hd * Dh, Dh) = s * b.v.block(0, hd * Dh, n, Dh);
            }
            x += (b.out_w * ctx.transpose()).transpose() + b.out_b;
            Vec u = (b.w1 * layer_norm(x, b.g2, b.be2).transpose()).transpose() + b.b1;
            u = u.unaryExpr([](float z) { return 0.5f * z * (1.0f + std::erf(z * 0.70710678f)); });
            x += (b.w2 * u.transpose()).transpose() + b.b2;
        }
        ++len;
        return (head * layer_norm(x, gf, bf).transpose()).transpose();
    }
};

}  // namespace eigen_peer
