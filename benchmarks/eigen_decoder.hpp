// The peer a user would otherwise write: a straightforward Eigen implementation of
// nn.TransformerDecoderLayer (post-norm, ReLU, causal self-attention), dynamic matrices,
// row-major, weights in PyTorch's layout. Not tuned, not naive: what one writes in an afternoon.
#pragma once
#include <Eigen/Dense>
#include <cmath>
#include <limits>

namespace eigen_peer {

using Mat = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
using Vec = Eigen::RowVectorXf;

struct MHA {
    Mat in_w;  // (3D, D)
    Vec in_b;  // (3D)
    Mat out_w; // (D, D)
    Vec out_b;
};
struct Layer {
    int D, H, F;
    MHA self_attn, cross_attn;
    Mat w1, w2;  // (F, D), (D, F)
    Vec b1, b2, g1, be1, g2, be2, g3, be3;

    Layer(int d, int h, int f) : D(d), H(h), F(f) {
        auto init = [](Mat& m, int r, int c) { m = Mat::Random(r, c) * (1.0f / std::sqrt(float(c))); };
        for (MHA* a : {&self_attn, &cross_attn}) {
            init(a->in_w, 3 * D, D);
            a->in_b = Vec::Random(3 * D) * 0.1f;
            init(a->out_w, D, D);
            a->out_b = Vec::Random(D) * 0.1f;
        }
        init(w1, F, D);
        init(w2, D, F);
        b1 = Vec::Random(F) * 0.1f;
        b2 = Vec::Random(D) * 0.1f;
        for (Vec* g : {&g1, &g2, &g3}) *g = Vec::Ones(D);
        for (Vec* b : {&be1, &be2, &be3}) *b = Vec::Zero(D);
    }

    static void layer_norm(Mat& x, const Vec& g, const Vec& b) {
        for (int r = 0; r < x.rows(); ++r) {
            auto row = x.row(r);
            const float mean = row.mean();
            const float var = (row.array() - mean).square().mean();
            row = ((row.array() - mean) / std::sqrt(var + 1e-5f)).matrix().cwiseProduct(g) + b;
        }
    }
    template <class Row> static void softmax(Row&& s) {
        s = (s.array() - s.maxCoeff()).exp();
        s /= s.sum();
    }
    // x: (T, D), kv: (S, D) -> (T, D)
    Mat attention(const MHA& a, const Mat& x, const Mat& kv, bool causal) const {
        const int T = int(x.rows()), S = int(kv.rows()), Dh = D / H;
        Mat q = (x * a.in_w.topRows(D).transpose()).rowwise() + a.in_b.head(D);
        Mat k = (kv * a.in_w.middleRows(D, D).transpose()).rowwise() + a.in_b.segment(D, D);
        Mat v = (kv * a.in_w.bottomRows(D).transpose()).rowwise() + a.in_b.tail(D);
        Mat ctx(T, D);
        const float scale = 1.0f / std::sqrt(float(Dh));
        for (int h = 0; h < H; ++h) {
            Mat s = (q.middleCols(h * Dh, Dh) * k.middleCols(h * Dh, Dh).transpose()) * scale;
            for (int i = 0; i < T; ++i) {
                if (causal)
                    for (int j = i + 1; j < S; ++j) s(i, j) = -std::numeric_limits<float>::infinity();
                softmax(s.row(i));
            }
            ctx.middleCols(h * Dh, Dh) = s * v.middleCols(h * Dh, Dh);
        }
        return (ctx * a.out_w.transpose()).rowwise() + a.out_b;
    }
    // Incremental decoding the way one writes it with Eigen: per-layer K/V caches as (capacity, D)
    // matrices allocated once, the cross-attention K/V projected once from memory, one token per
    // step through GEMVs. Dropout-free eval, post-norm, ReLU, as forward().
    struct Cache {
        Mat k, v;      // self-attention keys/values, (capacity, D)
        Mat ck, cv;    // cross-attention keys/values of the memory, (S, D)
        int len = 0;
    };
    Cache make_cache(int capacity, const Mat& mem) const {
        const auto& a = cross_attn;
        Cache c{Mat::Zero(capacity, D), Mat::Zero(capacity, D),
                (mem * a.in_w.middleRows(D, D).transpose()).rowwise() + a.in_b.segment(D, D),
                (mem * a.in_w.bottomRows(D).transpose()).rowwise() + a.in_b.tail(D), 0};
        return c;
    }
    // q: (D) over keys k: (n, D), values v: (n, D) -> ctx: (D), per head
    void attend_one(const Vec& q, const Mat& k, const Mat& v, int n, Vec& ctx) const {
        const int Dh = D / H;
        const float scale = 1.0f / std::sqrt(float(Dh));
        for (int h = 0; h < H; ++h) {
            Eigen::RowVectorXf s = (k.block(0, h * Dh, n, Dh) * q.segment(h * Dh, Dh).transpose()).transpose() * scale;
            softmax(s);
            ctx.segment(h * Dh, Dh) = s * v.block(0, h * Dh, n, Dh);
        }
    }
    // x: (D), one token of one batch row -> y: (D); appends its keys/values to the cache.
    void step(const Vec& x_in, Cache& c, Vec& y) const {
        const auto& a = self_attn;
        Mat x = x_in;  // (1, D)
        const Vec qkv = (a.in_w * x_in.transpose()).transpose() + a.in_b;
        c.k.row(c.len) = qkv.segment(D, D);
        c.v.row(c.len) = qkv.tail(D);
        ++c.len;
        Vec ctx(D);
        attend_one(qkv.head(D), c.k, c.v, c.len, ctx);
        x += (a.out_w * ctx.transpose()).transpose() + a.out_b;
        layer_norm(x, g1, be1);
        const auto& b = cross_attn;
        const Vec q = (b.in_w.topRows(D) * x.transpose()).transpose() + b.in_b.head(D);
        attend_one(q, c.ck, c.cv, int(c.ck.rows()), ctx);
        x += (b.out_w * ctx.transpose()).transpose() + b.out_b;
        layer_norm(x, g2, be2);
        const Vec h = ((w1 * x.transpose()).transpose() + b1).cwiseMax(0.0f);
        x += (w2 * h.transpose()).transpose() + b2;
        layer_norm(x, g3, be3);
        y = x;
    }
    // tgt: (T, D), mem: (S, D), one batch row.
    Mat forward(const Mat& tgt, const Mat& mem) const {
        Mat x = tgt + attention(self_attn, tgt, tgt, true);
        layer_norm(x, g1, be1);
        x += attention(cross_attn, x, mem, false);
        layer_norm(x, g2, be2);
        Mat h = ((x * w1.transpose()).rowwise() + b1).cwiseMax(0.0f);
        x += (h * w2.transpose()).rowwise() + b2;
        layer_norm(x, g3, be3);
        return x;
    }
};

}  // namespace eigen_peer
