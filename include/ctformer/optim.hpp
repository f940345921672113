// ctformer/optim.hpp — optimizers over reflected params and grads (same type, same layout), no heap:
// torch.optim.SGD and torch.optim.AdamW with PyTorch's defaults and its order of float operations,
// clip_grad_norm_, and a cosine-with-warmup learning-rate schedule.
//
//   static ct::AdamW<Model::Params> opt;               // state: exp_avg, exp_avg_sq, step (reflected:
//   opt.options.lr = 3e-4;                             //   checkpoints save it, checkpoint.hpp)
//   ct::zero_grad(grads);  /* forward_train + backward per micro-batch */
//   ct::clip_grad_norm(grads, 1.0);
//   opt.step(params, grads, ct::cosine_warmup{3e-4, 100, 2000});
//
// Each update runs elementwise over the raw storage (zip_storage): the panel padding of a packed
// weight is zero in params, grads and state, and every update keeps it zero.
#pragma once
#include <cmath>
#include <cstddef>

#include "kernels/optim.hpp"
#include "params.hpp"
#include "tensor.hpp"

namespace ctformer {

// PyTorch's optimizer.zero_grad() (set_to_none aside): every gradient to zero.
template <class P> void zero_grad(P& grads) { zero_params(grads); }

// torch.nn.utils.clip_grad_norm_(grads, max_norm): the global L2 norm over every gradient; if it
// exceeds max_norm every gradient is scaled by max_norm / (norm + 1e-6). Returns the norm before
// clipping (accumulated in double).
template <class P> double clip_grad_norm(P& grads, double max_norm) {
    double sq = 0;
    zip_storage([&](std::size_t n, const auto* g) {
        for (std::size_t i = 0; i < n; ++i) sq += static_cast<double>(g[i]) * static_cast<double>(g[i]);
    }, static_cast<const P&>(grads));
    const double norm = std::sqrt(sq), coef = max_norm / (norm + 1e-6);
    if (coef < 1.0)
        zip_storage([&](std::size_t n, auto* g) {
            using T = std::remove_cvref_t<decltype(*g)>;
            for (std::size_t i = 0; i < n; ++i) g[i] *= static_cast<T>(coef);
        }, grads);
    return norm;
}

// Learning rate at step s (0-based): linear warmup from 0 over `warmup` steps to base, then cosine
// decay to min_lr at `total` (held after it).
struct cosine_warmup {
    double base, warmup_steps, total_steps, min_lr = 0;
    double operator()(std::size_t s) const {
        const double t = static_cast<double>(s);
        if (t < warmup_steps) return base * (t + 1) / warmup_steps;
        if (t >= total_steps) return min_lr;
        const double progress = (t - warmup_steps) / (total_steps - warmup_steps);
        return min_lr + 0.5 * (base - min_lr) * (1 + std::cos(3.14159265358979323846 * progress));
    }
};

struct sgd_options {
    double lr = 1e-2, momentum = 0, dampening = 0, weight_decay = 0;
    bool nesterov = false;
};
// torch.optim.SGD (foreach=False): d = g + wd·p; buf = d (first step) or momentum·buf + (1-dampening)·d;
// d = nesterov ? d + momentum·buf : buf; p -= lr·d.
template <class P> struct SGD {
    BOOST_HANA_DEFINE_STRUCT(SGD, (P, momentum_buffer), (Tensor<double, 1>, step_count));
    sgd_options options{};

    std::size_t steps() const { return static_cast<std::size_t>(step_count.storage[0]); }
    void step(P& params, const P& grads) {
        const sgd_options o = options;
        const bool first = step_count.storage[0] == 0;
        zip_storage([&](std::size_t n, auto* p, const auto* g, auto* buf) {
            using T = std::remove_cvref_t<decltype(*p)>;
            const T wd = static_cast<T>(o.weight_decay), mom = static_cast<T>(o.momentum);
            const T damp = static_cast<T>(1 - o.dampening), neg_lr = static_cast<T>(-o.lr);
            for (std::size_t i = 0; i < n; ++i) {
                T d = o.weight_decay != 0 ? std::fma(wd, p[i], g[i]) : g[i];
                if (o.momentum != 0) {
                    buf[i] = first ? d : std::fma(damp, d, buf[i] * mom);
                    d = o.nesterov ? std::fma(mom, buf[i], d) : buf[i];
                }
                p[i] = std::fma(neg_lr, d, p[i]);
            }
        }, params, grads, momentum_buffer);
        step_count.storage[0] += 1;
    }
    template <class Schedule> void step(P& params, const P& grads, const Schedule& lr_at) {
        options.lr = lr_at(steps());
        step(params, grads);
    }
};

struct adamw_options {
    double lr = 1e-3, beta1 = 0.9, beta2 = 0.999, eps = 1e-8, weight_decay = 1e-2;
};
// torch.optim.AdamW (amsgrad=False, foreach=False), step t = 1, 2, ...:
//   p *= 1 - lr·wd;  m = β1·m + (1-β1)·g;  v = β2·v + (1-β2)·g·g
//   p += -(lr / (1-β1^t)) · m / (sqrt(v) / sqrt(1-β2^t) + eps)
// Scalars are computed in double and rounded to the dtype, as PyTorch's Python scalars are; the
// products, fused multiply-adds and divisions are PyTorch's vectorized kernels' (addcmul and add with
// alpha fuse, addcdiv does not), so the result is bit for bit torch.optim.AdamW's (tests/test_models.cpp);
// the update is one vector kernel (kernels::adamw_update).
template <class P> struct AdamW {
    BOOST_HANA_DEFINE_STRUCT(AdamW, (P, exp_avg), (P, exp_avg_sq), (Tensor<double, 1>, step_count));
    adamw_options options{};

    std::size_t steps() const { return static_cast<std::size_t>(step_count.storage[0]); }
    void step(P& params, const P& grads) {
        const adamw_options o = options;
        const double t = step_count.storage[0] + 1;
        const double bc1 = 1 - std::pow(o.beta1, t), bc2_sqrt = std::sqrt(1 - std::pow(o.beta2, t));
        zip_storage([&](std::size_t n, auto* p, const auto* g, auto* m, auto* v) {
            using T = std::remove_cvref_t<decltype(*p)>;
            const kernels::adamw_scalars<T> s{static_cast<T>(1 - o.lr * o.weight_decay), static_cast<T>(o.beta1),
                                              static_cast<T>(o.beta2), static_cast<T>(1 - o.beta1),
                                              static_cast<T>(1 - o.beta2), static_cast<T>(o.eps),
                                              static_cast<T>(-(o.lr / bc1)), static_cast<T>(bc2_sqrt)};
            kernels::adamw_update(n, p, g, m, v, s);
        }, params, grads, exp_avg, exp_avg_sq);
        step_count.storage[0] = t;
    }
    template <class Schedule> void step(P& params, const P& grads, const Schedule& lr_at) {
        options.lr = lr_at(steps());
        step(params, grads);
    }
};

}  // namespace ctformer
