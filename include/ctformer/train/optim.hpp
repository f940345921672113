// ctformer/train/optim.hpp — optimizers over reflected params and grads (same type, same layout), no heap:
// torch.optim.SGD and torch.optim.AdamW with PyTorch's defaults and its order of float operations,
// clip_grad_norm_, and a cosine-with-warmup learning-rate schedule.
//
//   static ct::AdamW<Model::Params> opt;               // state: exp_avg, exp_avg_sq, step (reflected:
//   opt.options.lr = 3e-4;                             //   checkpoints save it, checkpoint.hpp)
//   ct::zero_grad(grads);  /* forward_train + backward per micro-batch */
//   ct::clip_grad_norm(grads, 1.0);
//   opt.step(params, grads, ct::cosine_warmup{3e-4, 100, 2000});
// (Inside a `ct::use_executor on(pool);` scope, each tensor's update splits over the pool's threads.)
//
// Each update runs elementwise over the raw storage (zip_storage): the panel padding of a packed
// weight is zero in params, grads and state, and every update keeps it zero.
#pragma once
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <type_traits>

#include "../kernels/optim.hpp"
#include "../core/reflect.hpp"
#include "../core/schedule.hpp"
#include "../core/status.hpp"
#include "../core/tensor.hpp"

namespace ctformer {

// PyTorch's optimizer.zero_grad() (set_to_none aside): every gradient to zero, each tensor in
// parts of the calling thread's executor where it is large enough.
template <class P> void zero_grad(P& grads) { zero_params(grads); }

// torch.nn.utils.clip_grad_norm_(grads, max_norm): the global L2 norm over every gradient; if it
// exceeds max_norm every gradient is scaled by max_norm / (norm + 1e-6). Returns the norm before
// clipping (accumulated in double). As in PyTorch, a NaN norm (a NaN gradient) makes every gradient
// NaN and an infinite one scales them by 0 (inf entries become NaN): check the returned norm and
// skip the optimizer step when it is not finite.
template <class P> double clip_grad_norm(P& grads, double max_norm) {
    double sq = 0;
    zip_storage([&](std::size_t n, const auto* g) {
        for (std::size_t i = 0; i < n; ++i) sq += static_cast<double>(g[i]) * static_cast<double>(g[i]);
    }, static_cast<const P&>(grads));
    const double norm = std::sqrt(sq), coef = max_norm / (norm + 1e-6);
    if (!(coef >= 1.0))  // (NaN included: PyTorch multiplies by clamp(coef, max=1), NaN stays NaN)
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

namespace detail {
inline constexpr bool finite(double x) { return x - x == 0; }
// A step counter (a double, as torch.optim's state["step"]): a non-negative integer that steps()
// can return and 1 - beta^t can use (at most 2^53, where doubles stop counting by one).
inline constexpr bool valid_step_count(double t) {
    constexpr double limit = 9007199254740992.0;  // 2^53
    return t >= 0 && t <= limit && static_cast<double>(static_cast<std::uint64_t>(t)) == t &&
           static_cast<std::uint64_t>(t) <= std::numeric_limits<std::size_t>::max();
}
// Whether pred(T{}) holds for the element type T of every tensor of params (an update's scalars
// are rounded to each tensor's dtype).
template <class P, class Pred> bool for_every_dtype(const P& params, Pred&& pred) {
    bool ok = true;
    zip_storage([&](std::size_t, const auto* p) { ok = ok && pred(std::remove_cvref_t<decltype(*p)>{}); }, params);
    return ok;
}
// opt.step with options.lr = lr_at(opt.steps()); on an error the previous lr is kept.
template <class Opt, class P, class Schedule> status scheduled_step(Opt& opt, P& params, const P& grads, const Schedule& lr_at) {
    const double previous = opt.options.lr;
    opt.options.lr = lr_at(opt.steps());
    const status st = opt.step(params, grads);
    if (!st) opt.options.lr = previous;
    return st;
}
// The step counter may still be incremented (steps stay exact).
inline constexpr bool steppable(double t) { return valid_step_count(t) && t < 9007199254740992.0; }
}  // namespace detail

struct sgd_options {
    double lr = 1e-2, momentum = 0, dampening = 0, weight_decay = 0;
    bool nesterov = false;
    // PyTorch's checks (lr, momentum, weight_decay >= 0; nesterov needs momentum > 0 and dampening
    // 0), and every value finite: errc::invalid_option naming the field.
    constexpr status validate() const {
        if (!(detail::finite(lr) && lr >= 0)) return status::error(errc::invalid_option, "lr");
        if (!(detail::finite(momentum) && momentum >= 0)) return status::error(errc::invalid_option, "momentum");
        if (!detail::finite(dampening)) return status::error(errc::invalid_option, "dampening");
        if (!(detail::finite(weight_decay) && weight_decay >= 0)) return status::error(errc::invalid_option, "weight_decay");
        if (nesterov && (momentum <= 0 || dampening != 0)) return status::error(errc::invalid_option, "nesterov");
        return {};
    }
};
// torch.optim.SGD (foreach=False): d = g + wd·p; buf = d (first step) or momentum·buf + (1-dampening)·d;
// d = nesterov ? d + momentum·buf : buf; p -= lr·d.
// step checks the options and the step counter first: on an error nothing is written.
template <class P> struct SGD {
    static_assert(all_dense<P>(), "ctformer: optimizers update dense weights: quantized params (ct::weights<...>) are for inference");
    BOOST_HANA_DEFINE_STRUCT(SGD, (P, momentum_buffer), (Tensor<double, 1>, step_count));
    sgd_options options{};

    std::size_t steps() const {
        const double t = step_count.storage[0];
        return detail::valid_step_count(t) ? static_cast<std::size_t>(t) : 0;
    }
    status step(P& params, const P& grads) {
        const sgd_options o = options;
        if (status st = o.validate(); !st) return st;
        if (!detail::steppable(step_count.storage[0])) return status::error(errc::value_out_of_range, "step_count");
        if (!detail::for_every_dtype(params, [&]<class T>(T) {
                return detail::finite(static_cast<T>(o.lr)) && detail::finite(static_cast<T>(o.weight_decay)) &&
                       detail::finite(static_cast<T>(o.momentum)) && detail::finite(static_cast<T>(1 - o.dampening));
            }))
            return status::error(errc::invalid_option, "lr");  // a value beyond the dtype's range
        const bool first = step_count.storage[0] == 0;
        zip_storage([&](std::size_t n, auto* p, const auto* g, auto* buf) {
            using T = std::remove_cvref_t<decltype(*p)>;
            const T wd = static_cast<T>(o.weight_decay), mom = static_cast<T>(o.momentum);
            const T damp = static_cast<T>(1 - o.dampening), neg_lr = static_cast<T>(-o.lr);
            schedule::split_elements(n, [&](std::size_t i0, std::size_t i1) {
                for (std::size_t i = i0; i < i1; ++i) {
                    T d = o.weight_decay != 0 ? std::fma(wd, p[i], g[i]) : g[i];
                    if (o.momentum != 0) {
                        buf[i] = first ? d : std::fma(damp, d, buf[i] * mom);
                        d = o.nesterov ? std::fma(mom, buf[i], d) : buf[i];
                    }
                    p[i] = std::fma(neg_lr, d, p[i]);
                }
            });
        }, params, grads, momentum_buffer);
        step_count.storage[0] += 1;
        return {};
    }
    // The learning rate from a schedule (checked as options.lr is).
    template <class Schedule> status step(P& params, const P& grads, const Schedule& lr_at) {
        return detail::scheduled_step(*this, params, grads, lr_at);
    }
};

struct adamw_options {
    double lr = 1e-3, beta1 = 0.9, beta2 = 0.999, eps = 1e-8, weight_decay = 1e-2;
    // PyTorch's checks (lr, eps, weight_decay >= 0; betas in [0, 1)), every value finite, and eps
    // > 0: with eps = 0 (which PyTorch accepts) a parameter whose gradients have all been zero
    // becomes 0/0 = NaN, and so would the zero padding of packed weights. errc::invalid_option.
    constexpr status validate() const {
        if (!(detail::finite(lr) && lr >= 0)) return status::error(errc::invalid_option, "lr");
        if (!(beta1 >= 0 && beta1 < 1)) return status::error(errc::invalid_option, "beta1");
        if (!(beta2 >= 0 && beta2 < 1)) return status::error(errc::invalid_option, "beta2");
        if (!(detail::finite(eps) && eps > 0)) return status::error(errc::invalid_option, "eps");
        if (!(detail::finite(weight_decay) && weight_decay >= 0)) return status::error(errc::invalid_option, "weight_decay");
        return {};
    }
};
// torch.optim.AdamW (amsgrad=False, foreach=False), step t = 1, 2, ...:
//   p *= 1 - lr·wd;  m = β1·m + (1-β1)·g;  v = β2·v + (1-β2)·g·g
//   p += -(lr / (1-β1^t)) · m / (sqrt(v) / sqrt(1-β2^t) + eps)
// Scalars are computed in double and rounded to the dtype, as PyTorch's Python scalars are; the
// products, fused multiply-adds and divisions are PyTorch's vectorized kernels' (addcmul and add with
// alpha fuse, addcdiv does not), so the result is bit for bit torch.optim.AdamW's (tests/test_models.cpp);
// the update is one vector kernel (kernels::adamw_update).
// step checks the options, the step counter and every scalar in the params' dtype first (eps must
// not round to 0, lr / (1 - β1^t) must stay finite): on an error nothing is written.
template <class P> struct AdamW {
    static_assert(all_dense<P>(), "ctformer: optimizers update dense weights: quantized params (ct::weights<...>) are for inference");
    BOOST_HANA_DEFINE_STRUCT(AdamW, (P, exp_avg), (P, exp_avg_sq), (Tensor<double, 1>, step_count));
    adamw_options options{};

    std::size_t steps() const {
        const double t = step_count.storage[0];
        return detail::valid_step_count(t) ? static_cast<std::size_t>(t) : 0;
    }
    status step(P& params, const P& grads) {
        const adamw_options o = options;
        if (status st = o.validate(); !st) return st;
        if (!detail::steppable(step_count.storage[0])) return status::error(errc::value_out_of_range, "step_count");
        const double t = step_count.storage[0] + 1;
        const double bc1 = 1 - std::pow(o.beta1, t), bc2_sqrt = std::sqrt(1 - std::pow(o.beta2, t));
        auto scalars = [&]<class T>(T) {
            return kernels::adamw_scalars<T>{static_cast<T>(1 - o.lr * o.weight_decay), static_cast<T>(o.beta1),
                                             static_cast<T>(o.beta2), static_cast<T>(1 - o.beta1),
                                             static_cast<T>(1 - o.beta2), static_cast<T>(o.eps),
                                             static_cast<T>(-(o.lr / bc1)), static_cast<T>(bc2_sqrt)};
        };
        if (!detail::for_every_dtype(params, [&]<class T>(T) { return scalars(T{}).eps > 0; }))
            return status::error(errc::invalid_option, "eps");  // rounds to 0 in a dtype
        if (!detail::for_every_dtype(params, [&]<class T>(T) {
                const auto sc = scalars(T{});
                return sc.bias_correction2_sqrt > 0 && detail::finite(sc.neg_step) && detail::finite(sc.decay);
            }))
            return status::error(errc::invalid_option, "lr");  // lr / (1 - beta1^t) beyond the dtype's range
        zip_storage([&](std::size_t n, auto* p, const auto* g, auto* m, auto* v) {
            using T = std::remove_cvref_t<decltype(*p)>;
            schedule::split_elements(n, [&](std::size_t i0, std::size_t i1) {
                kernels::adamw_update(i1 - i0, p + i0, g + i0, m + i0, v + i0, scalars(T{}));
            });
        }, params, grads, exp_avg, exp_avg_sq);
        step_count.storage[0] = t;
        return {};
    }
    // The learning rate from a schedule (checked as options.lr is).
    template <class Schedule> status step(P& params, const P& grads, const Schedule& lr_at) {
        return detail::scheduled_step(*this, params, grads, lr_at);
    }
};

}  // namespace ctformer
