// A plain scalar reference decoder layer in double precision: straight loops over PyTorch's
// formulas, dense masks, no ctformer kernel. The tests compare ctformer against it for every mask
// kind, policy and dropout; it shares nothing with the library but the parameter names and the
// Philox function (whose own known-answer test is in test_dropout.cpp).
#pragma once
#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <map>
#include <string>
#include <vector>

#include <ctformer/ctformer.hpp>

namespace ref {

using vec = std::vector<double>;
inline const double NEG_INF = -std::numeric_limits<double>::infinity();

struct config {
    std::size_t B, T, S, D, H, F;
    bool pre_norm = false, cross = true;
    std::function<double(double)> act = [](double x) { return x > 0 ? x : 0; };
    // norm(row, name prefix) in place; default: LayerNorm with PyTorch's formula.
    enum { layer, rms } norm = layer;
    double eps = 1e-5;
    double scale = -1;  // < 0: 1/sqrt(head_dim)
    // Dropout (training): probabilities per site kind; the Philox stream is ctformer's documented one.
    bool train = false;
    ct::dropout_config drop{};
};

// name -> values in PyTorch layout, read through the params' importer interface.
using params = std::map<std::string, vec>;
template <class P> params read_params(const P& p) {
    params out;
    ct::for_each_tensor(p, [&](std::string_view name, const auto& t) {
        vec v(t.size);
        for (std::size_t i = 0; i < t.size; ++i) v[i] = static_cast<double>(t.get(i));
        out[std::string(name)] = v;
    });
    return out;
}

inline const vec* find(const params& p, const std::string& n) {
    auto it = p.find(n);
    return it == p.end() ? nullptr : &it->second;
}

// y: (rows, out) = x: (rows, in) · Wᵀ + b, W: (out, in)
inline vec linear(const vec& x, std::size_t rows, std::size_t in, const vec& W, const vec* b, std::size_t out,
                  std::size_t w_row0 = 0) {
    vec y(rows * out);
    for (std::size_t r = 0; r < rows; ++r)
        for (std::size_t o = 0; o < out; ++o) {
            double s = b ? (*b)[w_row0 + o] : 0.0;
            for (std::size_t k = 0; k < in; ++k) s += x[r * in + k] * W[(w_row0 + o) * in + k];
            y[r * out + o] = s;
        }
    return y;
}

inline void dropout(const config& c, vec& x, std::size_t offset, std::size_t n, ct::dropout_site site,
                    std::uint64_t row) {
    if (!c.train) return;
    ct::dropout_rng rng(c.drop);
    const double p = rng.probability(site);
    if (p <= 0) return;
    const std::uint64_t threshold = static_cast<std::uint64_t>(p * 4294967296.0);
    for (std::size_t j = 0; j < n; ++j) {
        const auto r = ct::philox4x32({static_cast<std::uint32_t>(j / 4), static_cast<std::uint32_t>(row),
                                       static_cast<std::uint32_t>(row >> 32) ^ (static_cast<std::uint32_t>(site) << 24),
                                       c.drop.step},
                                      {static_cast<std::uint32_t>(c.drop.seed),
                                       static_cast<std::uint32_t>(c.drop.seed >> 32)});
        x[offset + j] = r[j % 4] >= threshold ? x[offset + j] / (1.0 - static_cast<double>(static_cast<float>(p))) : 0.0;
    }
}

inline void norm(const config& c, const params& p, const std::string& name, vec& x, std::size_t rows) {
    const std::size_t D = c.D;
    const vec* g = find(p, name + ".weight");
    const vec* b = find(p, name + ".bias");
    for (std::size_t r = 0; r < rows; ++r) {
        double* row = &x[r * D];
        double mean = 0, var = 0;
        if (c.norm == config::layer) {
            for (std::size_t i = 0; i < D; ++i) mean += row[i];
            mean /= static_cast<double>(D);
            for (std::size_t i = 0; i < D; ++i) var += (row[i] - mean) * (row[i] - mean);
            var /= static_cast<double>(D);
        } else {
            for (std::size_t i = 0; i < D; ++i) var += row[i] * row[i];
            var /= static_cast<double>(D);
        }
        const double rstd = 1.0 / std::sqrt(var + c.eps);
        for (std::size_t i = 0; i < D; ++i)
            row[i] = (row[i] - mean) * rstd * (g ? (*g)[i] : 1.0) + (b ? (*b)[i] : 0.0);
    }
}

// mask: dense additive (B, H, Tq, Sk) (0 keeps, -inf blocks) or empty.
inline vec mha(const config& c, const params& p, const std::string& name, const vec& xq, const vec& xkv,
               std::size_t Tq, std::size_t Sk, const vec& mask, ct::dropout_site site) {
    const std::size_t B = c.B, D = c.D, H = c.H, Dh = D / H;
    const vec& W = *find(p, name + ".in_proj_weight");
    const vec* bi = find(p, name + ".in_proj_bias");
    const vec q = linear(xq, B * Tq, D, W, bi, D, 0);
    const vec k = linear(xkv, B * Sk, D, W, bi, D, D);
    const vec v = linear(xkv, B * Sk, D, W, bi, D, 2 * D);
    const double scale = c.scale < 0 ? 1.0 / std::sqrt(static_cast<double>(Dh)) : c.scale;
    vec ctx(B * Tq * D, 0.0);
    for (std::size_t b = 0; b < B; ++b)
        for (std::size_t h = 0; h < H; ++h)
            for (std::size_t i = 0; i < Tq; ++i) {
                vec s(Sk);
                double m = NEG_INF;
                for (std::size_t j = 0; j < Sk; ++j) {
                    double d = 0;
                    for (std::size_t e = 0; e < Dh; ++e) d += q[(b * Tq + i) * D + h * Dh + e] * k[(b * Sk + j) * D + h * Dh + e];
                    s[j] = d * scale + (mask.empty() ? 0.0 : mask[((b * H + h) * Tq + i) * Sk + j]);
                    m = std::max(m, s[j]);
                }
                if (m == NEG_INF) continue;  // every key blocked: zero output (ctformer's convention)
                double sum = 0;
                for (auto& x : s) sum += (x = std::exp(x - m));
                for (auto& x : s) x /= sum;
                dropout(c, s, 0, Sk, site, (std::uint64_t{b * H + h} << 32) | i);
                for (std::size_t j = 0; j < Sk; ++j)
                    for (std::size_t e = 0; e < Dh; ++e)
                        ctx[(b * Tq + i) * D + h * Dh + e] += s[j] * v[(b * Sk + j) * D + h * Dh + e];
            }
    return linear(ctx, B * Tq, D, *find(p, name + ".out_proj.weight"), find(p, name + ".out_proj.bias"), D);
}

inline void drop_rows(const config& c, vec& x, std::size_t rows, std::size_t width, ct::dropout_site site) {
    for (std::size_t r = 0; r < rows; ++r)
        dropout(c, x, r * width, width, site, (std::uint64_t{r / c.T} << 32) | (r % c.T));
}

// The layer. tgt: (B, T, D), mem: (B, S, D); masks dense additive (B, H, T, T) / (B, H, T, S).
inline vec forward(const config& c, const params& p, const vec& tgt, const vec& mem, const vec& self_mask,
                   const vec& cross_mask) {
    const std::size_t M = c.B * c.T, D = c.D;
    vec x = tgt;
    auto sublayer = [&](const std::string& nname, auto&& f, ct::dropout_site out_site) {
        vec in = x;
        if (c.pre_norm) norm(c, p, nname, in, M);
        vec br = f(in);
        drop_rows(c, br, M, D, out_site);
        for (std::size_t i = 0; i < x.size(); ++i) x[i] += br[i];
        if (!c.pre_norm) norm(c, p, nname, x, M);
    };
    sublayer("norm1", [&](const vec& in) { return mha(c, p, "self_attn", in, in, c.T, c.T, self_mask,
                                                       ct::dropout_site::self_attn_weights); },
             ct::dropout_site::self_attn_out);
    if (c.cross)
        sublayer("norm2", [&](const vec& in) { return mha(c, p, "multihead_attn", in, mem, c.T, c.S, cross_mask,
                                                           ct::dropout_site::cross_attn_weights); },
                 ct::dropout_site::cross_attn_out);
    sublayer(c.cross ? "norm3" : "norm2", [&](const vec& in) {
        vec h = linear(in, M, D, *find(p, "linear1.weight"), find(p, "linear1.bias"), c.F);
        for (auto& v : h) v = c.act(v);
        drop_rows(c, h, M, c.F, ct::dropout_site::ffn_activation);
        return linear(h, M, c.F, *find(p, "linear2.weight"), find(p, "linear2.bias"), D);
    }, ct::dropout_site::ffn_out);
    return x;
}

// Deterministic pseudo-random fill for params and inputs (LayerNorm weights near 1).
struct lcg {
    std::uint64_t s;
    double next() {
        s = s * 6364136223846793005ULL + 1442695040888963407ULL;
        return static_cast<double>(s >> 11) / 9007199254740992.0 * 2.0 - 1.0;  // [-1, 1)
    }
};
template <class P> void randomize(P& p, std::uint64_t seed) {
    lcg g{seed};
    ct::for_each_tensor(p, [&](std::string_view name, auto& t) {
        using T = typename std::remove_cvref_t<decltype(t)>::value_type;
        const bool norm_weight = name.starts_with("norm") && name.ends_with("weight");
        for (std::size_t i = 0; i < t.size; ++i)
            t.set(i, static_cast<T>(norm_weight ? 1.0 + 0.2 * g.next() : 0.3 * g.next()));
    });
}
template <class X> void randomize_tensor(X& x, std::uint64_t seed) {
    lcg g{seed};
    for (std::size_t i = 0; i < x.size; ++i) x.set(i, static_cast<typename X::value_type>(g.next()));
}
template <class X> vec to_vec(const X& x) {
    vec v(x.size);
    for (std::size_t i = 0; i < x.size; ++i) v[i] = static_cast<double>(x.get(i));
    return v;
}

// ---- The backward pass, plain loops (llm.c style): a training forward that keeps every
// intermediate, then each op's backward in reverse. Dense probabilities, no tiling, no
// recomputation: nothing shared with the library but the names and the Philox stream. ----

// The dropout multiplier of each element (0 or 1/(1-p)): dropout applied to ones.
inline vec dropout_mult(const config& c, std::size_t n, ct::dropout_site site, std::uint64_t row) {
    vec m(n, 1.0);
    dropout(c, m, 0, n, site, row);
    return m;
}

// y = x·Wᵀ + b (W rows w_row0..): dx (+)= dy·W, dW += dyᵀ·x, db += Σ dy
inline void linear_backward(const vec& x, std::size_t rows, std::size_t in, const vec& W, std::size_t out,
                            std::size_t w_row0, const vec& dy, vec& dx, vec& dW, vec* db) {
    for (std::size_t r = 0; r < rows; ++r)
        for (std::size_t o = 0; o < out; ++o) {
            const double g = dy[r * out + o];
            if (db) (*db)[w_row0 + o] += g;
            for (std::size_t k = 0; k < in; ++k) {
                dx[r * in + k] += g * W[(w_row0 + o) * in + k];
                dW[(w_row0 + o) * in + k] += g * x[r * in + k];
            }
        }
}

// y = norm(x) per row: dx (+)= , dgamma, dbeta += (x: the norm's input)
inline void norm_backward(const config& c, const params& p, params& g, const std::string& name, const vec& x,
                          const vec& dy, vec& dx, std::size_t rows) {
    const std::size_t D = c.D;
    const vec* gamma = find(p, name + ".weight");
    vec* dgamma = g.count(name + ".weight") ? &g[name + ".weight"] : nullptr;
    vec* dbeta = g.count(name + ".bias") ? &g[name + ".bias"] : nullptr;
    for (std::size_t r = 0; r < rows; ++r) {
        const double* xr = &x[r * D];
        double mean = 0, var = 0;
        if (c.norm == config::layer) {
            for (std::size_t i = 0; i < D; ++i) mean += xr[i];
            mean /= double(D);
        }
        for (std::size_t i = 0; i < D; ++i) var += (xr[i] - mean) * (xr[i] - mean);
        var /= double(D);
        const double rstd = 1.0 / std::sqrt(var + c.eps);
        double sg = 0, sgx = 0;
        for (std::size_t i = 0; i < D; ++i) {
            const double xh = (xr[i] - mean) * rstd, gi = dy[r * D + i] * (gamma ? (*gamma)[i] : 1.0);
            sg += gi;
            sgx += gi * xh;
            if (dgamma) (*dgamma)[i] += dy[r * D + i] * xh;
            if (dbeta) (*dbeta)[i] += dy[r * D + i];
        }
        const double mg = c.norm == config::layer ? sg / double(D) : 0.0, mgx = sgx / double(D);
        for (std::size_t i = 0; i < D; ++i) {
            const double xh = (xr[i] - mean) * rstd, gi = dy[r * D + i] * (gamma ? (*gamma)[i] : 1.0);
            dx[r * D + i] += rstd * (gi - mg - xh * mgx);
        }
    }
}

// Multi-head attention forward keeping q, k, v, probabilities and context, and its backward.
struct mha_saved {
    vec q, k, v, P, ctx;  // P: (B, H, Tq, Sk) before dropout, 0 where blocked
    std::vector<char> live;  // (B, H, Tq): the row has a key
};
inline vec mha_train(const config& c, const params& p, const std::string& name, const vec& xq, const vec& xkv,
                     std::size_t Tq, std::size_t Sk, const vec& mask, ct::dropout_site site, mha_saved& sv) {
    const std::size_t B = c.B, D = c.D, H = c.H, Dh = D / H;
    const vec& W = *find(p, name + ".in_proj_weight");
    const vec* bi = find(p, name + ".in_proj_bias");
    sv.q = linear(xq, B * Tq, D, W, bi, D, 0);
    sv.k = linear(xkv, B * Sk, D, W, bi, D, D);
    sv.v = linear(xkv, B * Sk, D, W, bi, D, 2 * D);
    const double scale = c.scale < 0 ? 1.0 / std::sqrt(static_cast<double>(Dh)) : c.scale;
    sv.P.assign(B * H * Tq * Sk, 0.0);
    sv.live.assign(B * H * Tq, 0);
    sv.ctx.assign(B * Tq * D, 0.0);
    for (std::size_t b = 0; b < B; ++b)
        for (std::size_t h = 0; h < H; ++h)
            for (std::size_t i = 0; i < Tq; ++i) {
                double* s = &sv.P[((b * H + h) * Tq + i) * Sk];
                double m = NEG_INF;
                for (std::size_t j = 0; j < Sk; ++j) {
                    double d = 0;
                    for (std::size_t e = 0; e < Dh; ++e) d += sv.q[(b * Tq + i) * D + h * Dh + e] * sv.k[(b * Sk + j) * D + h * Dh + e];
                    s[j] = d * scale + (mask.empty() ? 0.0 : mask[((b * H + h) * Tq + i) * Sk + j]);
                    m = std::max(m, s[j]);
                }
                if (m == NEG_INF) {
                    for (std::size_t j = 0; j < Sk; ++j) s[j] = 0;
                    continue;
                }
                sv.live[(b * H + h) * Tq + i] = 1;
                double sum = 0;
                for (std::size_t j = 0; j < Sk; ++j) sum += (s[j] = std::exp(s[j] - m));
                for (std::size_t j = 0; j < Sk; ++j) s[j] /= sum;
                const vec mult = dropout_mult(c, Sk, site, (std::uint64_t{b * H + h} << 32) | i);
                for (std::size_t j = 0; j < Sk; ++j)
                    for (std::size_t e = 0; e < Dh; ++e)
                        sv.ctx[(b * Tq + i) * D + h * Dh + e] += s[j] * mult[j] * sv.v[(b * Sk + j) * D + h * Dh + e];
            }
    return linear(sv.ctx, B * Tq, D, *find(p, name + ".out_proj.weight"), find(p, name + ".out_proj.bias"), D);
}
// dy: the output's gradient -> grads of the module (+=), dxq (+)=, dxkv (+)= (may be the same).
inline void mha_backward(const config& c, const params& p, params& g, const std::string& name, const vec& xq,
                         const vec& xkv, std::size_t Tq, std::size_t Sk, ct::dropout_site site, const mha_saved& sv,
                         const vec& dy, vec& dxq, vec& dxkv) {
    const std::size_t B = c.B, D = c.D, H = c.H, Dh = D / H;
    const double scale = c.scale < 0 ? 1.0 / std::sqrt(static_cast<double>(Dh)) : c.scale;
    vec dctx(B * Tq * D, 0.0);
    linear_backward(sv.ctx, B * Tq, D, *find(p, name + ".out_proj.weight"), D, 0, dy, dctx, g[name + ".out_proj.weight"],
                    g.count(name + ".out_proj.bias") ? &g[name + ".out_proj.bias"] : nullptr);
    vec dq(B * Tq * D, 0.0), dk(B * Sk * D, 0.0), dv(B * Sk * D, 0.0);
    for (std::size_t b = 0; b < B; ++b)
        for (std::size_t h = 0; h < H; ++h)
            for (std::size_t i = 0; i < Tq; ++i) {
                if (!sv.live[(b * H + h) * Tq + i]) continue;
                const double* P = &sv.P[((b * H + h) * Tq + i) * Sk];
                const vec mult = dropout_mult(c, Sk, site, (std::uint64_t{b * H + h} << 32) | i);
                vec dP(Sk, 0.0);
                double dot = 0;
                for (std::size_t j = 0; j < Sk; ++j) {
                    double d = 0;
                    for (std::size_t e = 0; e < Dh; ++e) {
                        const double go = dctx[(b * Tq + i) * D + h * Dh + e];
                        d += go * sv.v[(b * Sk + j) * D + h * Dh + e];
                        dv[(b * Sk + j) * D + h * Dh + e] += P[j] * mult[j] * go;
                    }
                    dP[j] = d * mult[j];
                    dot += P[j] * dP[j];
                }
                for (std::size_t j = 0; j < Sk; ++j) {
                    const double ds = P[j] * (dP[j] - dot) * scale;
                    for (std::size_t e = 0; e < Dh; ++e) {
                        dq[(b * Tq + i) * D + h * Dh + e] += ds * sv.k[(b * Sk + j) * D + h * Dh + e];
                        dk[(b * Sk + j) * D + h * Dh + e] += ds * sv.q[(b * Tq + i) * D + h * Dh + e];
                    }
                }
            }
    const vec& W = *find(p, name + ".in_proj_weight");
    vec& dW = g[name + ".in_proj_weight"];
    vec* db = g.count(name + ".in_proj_bias") ? &g[name + ".in_proj_bias"] : nullptr;
    linear_backward(xq, B * Tq, D, W, D, 0, dq, dxq, dW, db);
    linear_backward(xkv, B * Sk, D, W, D, D, dk, dxkv, dW, db);
    linear_backward(xkv, B * Sk, D, W, D, 2 * D, dv, dxkv, dW, db);
}

struct train_result {
    vec out, d_tgt, d_mem;
    params grads;  // PyTorch names and layouts
};

// Forward (training mode when c.train) and the gradients of sum(out · d_out).
// act_grad: the activation's derivative.
inline train_result forward_backward(const config& c, const params& p, const vec& tgt, const vec& mem,
                                     const vec& self_mask, const vec& cross_mask, const vec& d_out,
                                     const std::function<double(double)>& act_grad) {
    const std::size_t M = c.B * c.T, D = c.D, F = c.F;
    const std::size_t n = c.cross ? 3 : 2;
    const std::string norms[3] = {"norm1", "norm2", c.cross ? "norm3" : "norm2"};
    const ct::dropout_site out_site[3] = {ct::dropout_site::self_attn_out,
                                          c.cross ? ct::dropout_site::cross_attn_out : ct::dropout_site::ffn_out,
                                          ct::dropout_site::ffn_out};
    // forward, keeping everything
    std::vector<vec> x_in(n), norm_in(n), branch_in(n);
    mha_saved sa, ca;
    vec u, h;
    vec x = tgt;
    for (std::size_t k = 0; k < n; ++k) {
        const bool ffn = k == n - 1;
        const std::string& nn = ffn ? norms[2] : norms[k];
        const ct::dropout_site site = ffn ? ct::dropout_site::ffn_out : out_site[k];
        x_in[k] = x;
        vec in = x;
        if (c.pre_norm) {
            norm_in[k] = x;
            norm(c, p, nn, in, M);
        }
        branch_in[k] = in;
        vec br;
        if (ffn) {
            u = linear(in, M, D, *find(p, "linear1.weight"), find(p, "linear1.bias"), F);
            h = u;
            for (auto& v : h) v = c.act(v);
            drop_rows(c, h, M, F, ct::dropout_site::ffn_activation);
            br = linear(h, M, F, *find(p, "linear2.weight"), find(p, "linear2.bias"), D);
        } else if (k == 0) {
            br = mha_train(c, p, "self_attn", in, in, c.T, c.T, self_mask, ct::dropout_site::self_attn_weights, sa);
        } else {
            br = mha_train(c, p, "multihead_attn", in, mem, c.T, c.S, cross_mask, ct::dropout_site::cross_attn_weights, ca);
        }
        drop_rows(c, br, M, D, site);
        for (std::size_t i = 0; i < x.size(); ++i) x[i] += br[i];
        if (!c.pre_norm) {
            norm_in[k] = x;
            norm(c, p, nn, x, M);
        }
    }
    train_result res;
    res.out = x;
    for (const auto& [name, v] : p) res.grads[name] = vec(v.size(), 0.0);
    res.d_mem.assign(c.cross ? c.B * c.S * D : 0, 0.0);
    // backward
    vec g = d_out;
    for (std::size_t kk = n; kk-- > 0;) {
        const bool ffn = kk == n - 1;
        const std::string& nn = ffn ? norms[2] : norms[kk];
        const ct::dropout_site site = ffn ? ct::dropout_site::ffn_out : out_site[kk];
        if (!c.pre_norm) {
            vec dx(M * D, 0.0);
            norm_backward(c, p, res.grads, nn, norm_in[kk], g, dx, M);
            g = dx;
        }
        vec dbr = g;
        drop_rows(c, dbr, M, D, site);
        vec din(M * D, 0.0);
        if (ffn) {
            vec dh(M * F, 0.0);
            linear_backward(h, M, F, *find(p, "linear2.weight"), D, 0, dbr, dh, res.grads["linear2.weight"],
                            res.grads.count("linear2.bias") ? &res.grads["linear2.bias"] : nullptr);
            drop_rows(c, dh, M, F, ct::dropout_site::ffn_activation);
            for (std::size_t i = 0; i < dh.size(); ++i) dh[i] *= act_grad(u[i]);
            linear_backward(branch_in[kk], M, D, *find(p, "linear1.weight"), F, 0, dh, din, res.grads["linear1.weight"],
                            res.grads.count("linear1.bias") ? &res.grads["linear1.bias"] : nullptr);
        } else if (kk == 0) {
            mha_backward(c, p, res.grads, "self_attn", branch_in[0], branch_in[0], c.T, c.T,
                         ct::dropout_site::self_attn_weights, sa, dbr, din, din);
        } else {
            mha_backward(c, p, res.grads, "multihead_attn", branch_in[1], mem, c.T, c.S,
                         ct::dropout_site::cross_attn_weights, ca, dbr, din, res.d_mem);
        }
        if (c.pre_norm) norm_backward(c, p, res.grads, nn, norm_in[kk], din, g, M);
        else for (std::size_t i = 0; i < g.size(); ++i) g[i] += din[i];
    }
    res.d_tgt = g;
    return res;
}

}  // namespace ref
