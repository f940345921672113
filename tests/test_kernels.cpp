// Every kernel against a plain scalar reference, on sizes that are not multiples of the vector
// width or the GEMM tile; and the accuracy of the vector exp / erf / tanh.
#include <cstring>
#include <random>

#include "common.hpp"
#include <ctformer/kernels/sampling.hpp>

namespace {
template <class T> std::vector<T> random_vec(std::size_t n, unsigned seed, double lo = -1, double hi = 1) {
    std::mt19937 g(seed);
    std::uniform_real_distribution<double> d(lo, hi);
    std::vector<T> v(n);
    for (auto& x : v) x = static_cast<T>(d(g));
    return v;
}
template <class T> constexpr double kernel_tol = std::is_same_v<T, float> ? 2e-5 : 1e-12;
}  // namespace

TEST_CASE_TEMPLATE("kernels: gemm vs scalar reference (odd sizes, strides, bias, activation)", T, float, double) {
    const std::array<std::size_t, 3> sizes[] = {{1, 1, 1},  {3, 5, 7},    {7, 9, 17},  {13, 33, 31}, {6, 16, 8},
                                    {25, 70, 3}, {5, 100, 300}, {4, 24, 0},  {31, 47, 513},
                                    {29, 40, 1021}};  // (strided: rows 4 KB / 8 KB apart, a packed)
    unsigned seed = 1;
    for (const auto& sz : sizes) {
        const std::size_t M = sz[0], N = sz[1], K = sz[2];
        // 3, 4: the packed path (bias, bias + relu); 5, 6: accumulate onto c (in place, packed)
        for (int variant = 0; variant < 7; ++variant) {
            const std::size_t lda = K + (variant >= 2 ? 3 : 0), ldb = N + (variant >= 2 ? 5 : 0),
                              ldc = N + (variant >= 2 ? 2 : 0);
            std::vector<T> pack(ct::kernels::gemm_pack_elems<T>(M), T(99));
            auto a = random_vec<T>(M * lda + 1, seed++), b = random_vec<T>((K ? K : 1) * ldb, seed++),
                 bias = random_vec<T>(N, seed++);
            const bool accumulate = variant >= 5;
            std::vector<T> c = accumulate ? random_vec<T>(M * ldc, seed++) : std::vector<T>(M * ldc, T(-7)), want = c;
            const T* bp = variant == 1 || (variant >= 3 && variant <= 5) ? bias.data() : nullptr;
            const bool relu = variant == 1 || variant == 4;
            T* pk = variant >= 3 && variant != 5 ? pack.data() : nullptr;
            if (relu)
                ct::kernels::gemm(M, N, K, a.data(), lda, b.data(), ldb, c.data(), ldc, bp, ct::relu{}, pk, accumulate);
            else
                ct::kernels::gemm(M, N, K, a.data(), lda, b.data(), ldb, c.data(), ldc, bp, ct::kernels::identity_op{}, pk,
                                  accumulate);
            for (std::size_t i = 0; i < M; ++i)
                for (std::size_t j = 0; j < N; ++j) {
                    double s = (accumulate ? double(want[i * ldc + j]) : 0.0) + (bp ? bp[j] : 0.0);
                    for (std::size_t k = 0; k < K; ++k) s += double(a[i * lda + k]) * double(b[k * ldb + j]);
                    want[i * ldc + j] = static_cast<T>(relu ? std::max(s, 0.0) : s);
                }
            CHECK_CLOSE("gemm " << M << "x" << N << "x" << K << " variant " << variant, c.data(), want.data(), c.size(),
                        kernel_tol<T> * (1 + std::sqrt(double(K))));
        }
    }
}

TEST_CASE_TEMPLATE("kernels: gemm_tn (a stored transposed, both read in place) vs scalar reference", T, float, double) {
    // M and N below, at and past the register tile and the vector width (attention's tiles: M keys
    // or query rows, N = the row block or head_dim), K past one KC block; accumulate onto c.
    const std::array<std::size_t, 3> sizes[] = {{1, 1, 1}, {3, 5, 7}, {16, 16, 16}, {64, 16, 64}, {13, 33, 31},
                                                {25, 70, 3}, {40, 72, 300}, {4, 24, 0}};
    unsigned seed = 40;
    for (const auto& sz : sizes)
        for (bool accumulate : {false, true}) {
            const std::size_t M = sz[0], N = sz[1], K = sz[2], lda = M + 3, ldb = N + 5, ldc = N + 2;
            auto at = random_vec<T>((K ? K : 1) * lda, seed++), b = random_vec<T>((K ? K : 1) * ldb, seed++);
            std::vector<T> c = accumulate ? random_vec<T>(M * ldc, seed++) : std::vector<T>(M * ldc, T(-7)), want = c;
            ct::kernels::gemm_tn(M, N, K, at.data(), lda, b.data(), ldb, c.data(), ldc, accumulate);
            for (std::size_t i = 0; i < M; ++i)
                for (std::size_t j = 0; j < N; ++j) {
                    double s = accumulate ? double(want[i * ldc + j]) : 0.0;
                    for (std::size_t k = 0; k < K; ++k) s += double(at[k * lda + i]) * double(b[k * ldb + j]);
                    want[i * ldc + j] = static_cast<T>(s);
                }
            CHECK_CLOSE("gemm_tn " << M << "x" << N << "x" << K << (accumulate ? " accumulate" : ""), c.data(), want.data(),
                        c.size(), kernel_tol<T> * (1 + std::sqrt(double(K))));
        }
}

// A low-rank adapter's narrow products (kernels/lowrank.hpp): N a rank (1..32: past the 4-result
// pass, half a vector, whole vectors), K below, at and past the vector width and a panel (edge
// panels of the weight), M past the broadcast tiles' rows.
namespace {
// gemm_nt_rows<N> and gemm_nt_weight_rows<N> against the scalar reference on M x K sizes past whole
// vectors, panels and row groups; and rows give the same bits however they are grouped (each row
// alone = all rows at once).
template <class T, std::size_t N> void check_rank_products(unsigned seed) {
    constexpr std::size_t NR = ct::panels::gemm_tile<T>::NR;
    // (30 rows: whole row tiles and a tail; K 2101: past the packed columns' budget at rank 8)
    const std::array<std::size_t, 2> sizes[] = {{1, 1}, {3, 7}, {5, 64}, {2, 2 * NR + 3}, {7, 300}, {4, 0}, {9, 33}, {30, 65}, {3, 2101}};
    for (const auto& sz : sizes)
        for (bool accumulate : {false, true}) {
            const std::size_t M = sz[0], K = sz[1], lda = K + 3, ldb = K + 1, ldc = N + 2;
            auto a = random_vec<T>(M * lda + 1, seed++), b = random_vec<T>(N * ldb + 1, seed++);
            std::vector<T> c = accumulate ? random_vec<T>(M * ldc, seed++) : std::vector<T>(M * ldc, T(-7)), want = c, cw = c;
            std::vector<T> c1 = c, cw1 = c;
            // the weight (Out = K, In = N) in panel layout, element (o, n) = b[n][o]
            std::vector<T> w(ct::panels::panel_elems<T>(N, K ? K : 1), T(0));
            for (std::size_t o = 0; o < K; ++o)
                for (std::size_t n = 0; n < N; ++n) w[ct::panels::panel_index<T>(N, n, o)] = b[n * ldb + o];
            ct::kernels::gemm_nt_rows<N>(M, K, a.data(), lda, b.data(), ldb, c.data(), ldc, accumulate);
            ct::kernels::gemm_nt_weight_rows<N>(M, K, a.data(), lda, w.data(), cw.data(), ldc, accumulate);
            for (std::size_t i = 0; i < M; ++i) {
                ct::kernels::gemm_nt_rows<N>(1, K, a.data() + i * lda, lda, b.data(), ldb, c1.data() + i * ldc, ldc, accumulate);
                ct::kernels::gemm_nt_weight_rows<N>(1, K, a.data() + i * lda, lda, w.data(), cw1.data() + i * ldc, ldc, accumulate);
            }
            CHECK(std::memcmp(c.data(), c1.data(), c.size() * sizeof(T)) == 0);
            CHECK(std::memcmp(cw.data(), cw1.data(), cw.size() * sizeof(T)) == 0);
            for (std::size_t i = 0; i < M; ++i)
                for (std::size_t j = 0; j < N; ++j) {
                    double s = accumulate ? double(want[i * ldc + j]) : 0.0;
                    for (std::size_t k = 0; k < K; ++k) s += double(a[i * lda + k]) * double(b[j * ldb + k]);
                    want[i * ldc + j] = static_cast<T>(s);
                }
            const double tol = kernel_tol<T> * (1 + std::sqrt(double(K)));
            CHECK_CLOSE("gemm_nt_rows " << M << "x" << N << "x" << K << (accumulate ? " accumulate" : ""), c.data(), want.data(),
                        c.size(), tol);
            CHECK_CLOSE("gemm_nt_weight_rows " << M << "x" << N << "x" << K << (accumulate ? " accumulate" : ""), cw.data(),
                        want.data(), cw.size(), tol);
        }
}
}  // namespace

TEST_CASE_TEMPLATE("kernels: gemm_nt_rows and gemm_nt_weight_rows (a rank's columns) vs scalar reference", T, float, double) {
    // ranks that share a vector's width (1, 4, 8, 16, 32) and ranks that do not (3, 5, 9, 12)
    check_rank_products<T, 1>(70);
    check_rank_products<T, 2>(120);
    check_rank_products<T, 3>(170);
    check_rank_products<T, 4>(270);
    check_rank_products<T, 5>(370);
    check_rank_products<T, 8>(470);
    check_rank_products<T, 9>(570);
    check_rank_products<T, 12>(670);
    check_rank_products<T, 16>(770);
    check_rank_products<T, 32>(870);
}

TEST_CASE_TEMPLATE("kernels: gemm_panels (weights in panel layout) vs scalar reference", T, float, double) {
    // M 1..4 take the streaming GEMV, larger M the tiled path; N not a multiple of the panel,
    // K past one KC block; the panel padding holds garbage that must never reach c. a is read in
    // place (13x48x257, 31x47x513, 29x40x1100: rows over 4 KB apart but not aliasing in L1) or
    // packed (29x40x1024 unstrided: rows a multiple of 4 KB apart). Past one K block and one panel
    // the tiles run panel by panel; 16x300x1000 and 24x300x1024 (weights over
    // forward_prefetch_min_bytes; the latter's a packed when unstrided, K block by K block) also
    // prefetch the block read next on 256-bit-and-narrower builds. With 512-bit vectors K blocks
    // of KC_in_place where nothing is packed: 29x40x1100 two of them; 16x40x2048 unstrided reads a
    // in place at KC (its 16 rows alias, but only a longer block would be packed).
    const std::array<std::size_t, 3> sizes[] = {{1, 1, 1},     {1, 37, 19}, {2, 70, 64},     {3, 16, 300},
                                                {4, 129, 33},  {1, 200, 513}, {5, 33, 7},    {13, 48, 257},
                                                {31, 47, 513}, {2, 8, 0},    {29, 40, 1100}, {29, 40, 1024},
                                                {16, 300, 1000}, {24, 300, 1024}, {16, 40, 2048}};
    unsigned seed = 100;
    using tile = ct::kernels::gemm_tile<T>;
    for (const auto& sz : sizes) {
        const std::size_t M = sz[0], N = sz[1], K = sz[2];
        // plain; bias; bias + relu with strided a and c; accumulate onto c (the fused residual add)
        // with bias; accumulate without bias, strided
        for (int variant = 0; variant < 5; ++variant) {
            const std::size_t lda = K + (variant == 2 || variant == 4 ? 3 : 0),
                              ldc = N + (variant == 2 || variant == 4 ? 2 : 0);
            const bool accumulate = variant >= 3;
            auto a = random_vec<T>(M * lda + 1, seed++), w = random_vec<T>(N * K + 1, seed++),  // w: (N, K)
                bias = random_vec<T>(N, seed++);
            std::vector<T> panels(ct::kernels::panel_elems<T>(K, N) + 1, std::numeric_limits<T>::quiet_NaN());
            for (std::size_t n = 0; n < N; ++n)
                for (std::size_t k = 0; k < K; ++k) panels[ct::kernels::panel_index<T>(K, k, n)] = w[n * K + k];
            std::vector<T> pack(ct::kernels::gemm_pack_elems<T>(M), T(99));
            std::vector<T> c = random_vec<T>(M * ldc, seed++), want = c;
            const T* bp = variant >= 1 && variant <= 3 ? bias.data() : nullptr;
            const bool relu = variant == 2;
            if (relu)
                ct::kernels::gemm_panels(M, N, K, a.data(), lda, panels.data(), c.data(), ldc, bp, ct::relu{}, pack.data(),
                                         accumulate);
            else
                ct::kernels::gemm_panels(M, N, K, a.data(), lda, panels.data(), c.data(), ldc, bp, ct::kernels::identity_op{},
                                         pack.data(), accumulate);
            for (std::size_t i = 0; i < M; ++i)
                for (std::size_t j = 0; j < N; ++j) {
                    double s = (accumulate ? double(want[i * ldc + j]) : 0.0) + (bp ? bp[j] : 0.0);
                    for (std::size_t k = 0; k < K; ++k) s += double(a[i * lda + k]) * double(w[j * K + k]);
                    want[i * ldc + j] = static_cast<T>(relu ? std::max(s, 0.0) : s);
                }
            CHECK_CLOSE("gemm_panels " << M << "x" << N << "x" << K << " variant " << variant << " NR " << tile::NR,
                        c.data(), want.data(), c.size(), kernel_tol<T> * (1 + std::sqrt(double(K))));
        }
    }
}

TEST_CASE_TEMPLATE("kernels: the backward's GEMMs (weight and input gradients) vs scalar reference", T, float, double) {
    // transpose_square: a (W x W) block in registers
    {
        constexpr std::size_t W = ct::simd::width<T>;
        const auto in = random_vec<T>(W * W, 7);
        std::array<ct::simd::vec<T>, W> v;
        for (std::size_t i = 0; i < W; ++i) v[i] = ct::simd::load(in.data() + i * W);
        ct::simd::transpose_square<T>(v.data());
        std::vector<T> got(W * W);
        for (std::size_t i = 0; i < W; ++i) ct::simd::store(got.data() + i * W, v[i]);
        for (std::size_t i = 0; i < W; ++i)
            for (std::size_t j = 0; j < W; ++j) {
                INFO("transpose_square W " << W << " (" << i << ", " << j << ")");
                CHECK(got[i * W + j] == in[j * W + i]);
            }
    }
    // kernels::transpose: whole (W x W) blocks in registers and the edges, at strides
    {
        constexpr std::size_t W = ct::simd::width<T>;
        const std::array<std::size_t, 2> shapes[] = {{1, 1}, {W, W}, {2 * W + 3, W + 5}, {5, 3 * W}, {3 * W, 2 * W}};
        for (const auto& sh : shapes) {
            const std::size_t rows = sh[0], cols = sh[1], ldx = cols + 3, ldy = rows + 2;
            const auto x = random_vec<T>(rows * ldx, 11);
            std::vector<T> y(cols * ldy, T(-7));
            std::vector<T> ys(cols * ldy, T(-7));
            const T scale = T(0.3);  // the scaled transpose: one rounded product per element, on both paths
            ct::kernels::transpose(rows, cols, x.data(), ldx, y.data(), ldy);
            ct::kernels::transpose_scaled(rows, cols, x.data(), ldx, ys.data(), ldy, scale);
            std::size_t wrong = 0, wrong_scaled = 0;
            for (std::size_t c = 0; c < cols; ++c)
                for (std::size_t r = 0; r < ldy; ++r) {
                    wrong += y[c * ldy + r] != (r < rows ? x[r * ldx + c] : T(-7));
                    wrong_scaled += ys[c * ldy + r] != (r < rows ? T(x[r * ldx + c] * scale) : T(-7));
                }
            INFO("transpose " << rows << "x" << cols);
            CHECK(wrong == 0);
            CHECK(wrong_scaled == 0);
        }
    }
    // (M, N, K) as the kernels name them: M past one packed block of rows (tn), K past one KC
    // block and not a multiple of the panel width (the transposed packing's edge), N past a panel.
    using tile = ct::kernels::gemm_tile<T>;
    const std::size_t tn_rows = ct::kernels::detail::tn_block_rows<T>(128);
    // M one and two vectors: gemm_nt_panels' few-row path (K past a panel and not a multiple of it)
    constexpr std::size_t W = ct::simd::width<T>;
    const std::array<std::size_t, 3> sizes[] = {{5, 7, 3},     {13, 33, 16},  {64, 192, 16}, {tn_rows + 29, 70, 128},
                                                {200, 47, 300}, {31, 2 * tile::NR, 2 * tile::NR}, {40, 96, 513},
                                                {W, 70, 45}, {2 * W, 2 * tile::NR + 3, 3 * tile::NR + 5}, {W, 9, 0}};
    unsigned seed = 300;
    for (const auto& sz : sizes) {
        const std::size_t M = sz[0], N = sz[1], K = sz[2];
        std::vector<T> pack(ct::kernels::gemm_train_pack_elems<T>(std::max(M, K), std::max(M, K), std::max(M, N)), T(99));
        // tn: c (M, N) in panel layout += aᵀ · b, a: (K, M) at lda, b: (K, N) at ldb
        {
            const std::size_t lda = M + 3, ldb = N + 1;
            auto a = random_vec<T>(K * lda + 1, seed++), b = random_vec<T>(K * ldb + 1, seed++);
            auto c0 = random_vec<T>(M * N, seed++);
            std::vector<T> panels(ct::kernels::panel_elems<T>(M, N), T(0));
            for (std::size_t m = 0; m < M; ++m)
                for (std::size_t n = 0; n < N; ++n) panels[ct::kernels::panel_index<T>(M, m, n)] = c0[m * N + n];
            ct::kernels::gemm_tn_panels(M, N, K, a.data(), lda, b.data(), ldb, panels.data(), pack.data());
            std::vector<T> got(M * N), want(M * N);
            for (std::size_t m = 0; m < M; ++m)
                for (std::size_t n = 0; n < N; ++n) {
                    double s = double(c0[m * N + n]);
                    for (std::size_t k = 0; k < K; ++k) s += double(a[k * lda + m]) * double(b[k * ldb + n]);
                    want[m * N + n] = static_cast<T>(s);
                    got[m * N + n] = panels[ct::kernels::panel_index<T>(M, m, n)];
                }
            CHECK_CLOSE("gemm_tn_panels " << M << "x" << N << "x" << K, got.data(), want.data(), got.size(),
                        kernel_tol<T> * (1 + std::sqrt(double(K))));
        }
        // nt: c (M, N) at ldc (+)= a: (M, K) · Pᵀ, P: (N, K) in panel layout
        for (const bool accumulate : {false, true}) {
            const std::size_t lda = K + 2, ldc = N + 3;
            auto a = random_vec<T>(M * lda + 1, seed++), p = random_vec<T>(N * K + 1, seed++);
            std::vector<T> panels(ct::kernels::panel_elems<T>(N, K) + 1, std::numeric_limits<T>::quiet_NaN());
            for (std::size_t n = 0; n < N; ++n)
                for (std::size_t k = 0; k < K; ++k) panels[ct::kernels::panel_index<T>(N, n, k)] = p[n * K + k];
            auto c = random_vec<T>(M * ldc, seed++), want = c;
            ct::kernels::gemm_nt_panels(M, N, K, a.data(), lda, panels.data(), c.data(), ldc, pack.data(), accumulate);
            for (std::size_t m = 0; m < M; ++m)
                for (std::size_t n = 0; n < N; ++n) {
                    double s = accumulate ? double(want[m * ldc + n]) : 0.0;
                    for (std::size_t k = 0; k < K; ++k) s += double(a[m * lda + k]) * double(p[n * K + k]);
                    want[m * ldc + n] = static_cast<T>(s);
                }
            CHECK_CLOSE("gemm_nt_panels " << M << "x" << N << "x" << K << " accumulate " << accumulate, c.data(),
                        want.data(), c.size(), kernel_tol<T> * (1 + std::sqrt(double(K))));
        }
    }
}

TEST_CASE_TEMPLATE("kernels: reductions, softmax, norms vs scalar reference", T, float, double) {
    for (std::size_t n : {1u, 3u, 8u, 15u, 16u, 17u, 43u, 64u, 83u, 129u, 200u}) {  // (whole vectors past four: 43, 83, 200)
        auto x = random_vec<T>(n, static_cast<unsigned>(n), -3, 3);
        double s = 0, m = -1e300;
        for (T v : x) s += v, m = std::max(m, double(v));
        const T got_s = ct::kernels::sum(x.data(), n), got_m = ct::kernels::max(x.data(), n);
        CHECK_CLOSE("sum n=" << n, &got_s, &s, 1, kernel_tol<T> * n);
        CHECK_CLOSE("max n=" << n, &got_m, &m, 1, 0.0);

        // softmax with some blocked entries
        std::vector<T> sm = x;
        if (n > 2) sm[1] = -std::numeric_limits<T>::infinity();
        std::vector<double> want(n);
        double mx = -1e300, tot = 0;
        for (std::size_t i = 0; i < n; ++i) mx = std::max(mx, double(sm[i]));
        for (std::size_t i = 0; i < n; ++i) tot += (want[i] = std::exp(double(sm[i]) - mx));
        for (auto& w : want) w /= tot;
        CHECK(ct::kernels::softmax_inplace(sm.data(), n));
        CHECK_CLOSE("softmax n=" << n, sm.data(), want.data(), n, kernel_tol<T>);

        // layer norm / rms norm with and without affine
        auto g = random_vec<T>(n, 7), be = random_vec<T>(n, 8);
        std::vector<T> y(n), yr(n);
        double mean = s / n, var = 0, ss = 0;
        for (T v : x) var += (v - mean) * (v - mean), ss += double(v) * v;
        var /= n;
        std::vector<double> wl(n), wr(n), wn(n);
        for (std::size_t i = 0; i < n; ++i) {
            wl[i] = (x[i] - mean) / std::sqrt(var + 1e-5) * g[i] + be[i];
            wn[i] = (x[i] - mean) / std::sqrt(var + 1e-5);
            wr[i] = x[i] / std::sqrt(ss / n + 1e-6) * g[i];
        }
        ct::kernels::layer_norm_row(x.data(), y.data(), n, T(1e-5), g.data(), be.data());
        CHECK_CLOSE("layer_norm n=" << n, y.data(), wl.data(), n, kernel_tol<T> * 10);
        ct::kernels::layer_norm_row(x.data(), y.data(), n, T(1e-5), static_cast<const T*>(nullptr),
                                    static_cast<const T*>(nullptr));
        CHECK_CLOSE("layer_norm (no affine) n=" << n, y.data(), wn.data(), n, kernel_tol<T> * 10);
        ct::kernels::rms_norm_row(x.data(), yr.data(), n, T(1e-6), g.data());
        CHECK_CLOSE("rms_norm n=" << n, yr.data(), wr.data(), n, kernel_tol<T> * 10);
    }
    // all blocked: zeros, no NaN
    std::vector<T> blocked(5, -std::numeric_limits<T>::infinity());
    CHECK_FALSE(ct::kernels::softmax_inplace(blocked.data(), blocked.size()));
    for (T v : blocked) CHECK(v == T(0));
}

TEST_CASE_TEMPLATE("kernels: hsum_lanes, hmax_lanes; layer_norm_rows and rms_norm_rows vs double, rows in groups and one by one", T, float, double) {
    constexpr std::size_t W = ct::simd::width<T>;
    {  // lane i = the sum of vector i's lanes (small integers: exact in any order)
        std::array<ct::simd::vec<T>, W> v;
        std::array<T, W> want{};
        for (std::size_t i = 0; i < W; ++i) {
            std::array<T, W> lanes{};
            for (std::size_t j = 0; j < W; ++j) want[i] += (lanes[j] = T(int(i * 7 + j * 3) % 11 - 5));
            v[i] = ct::simd::load(lanes.data());
        }
        std::array<T, W> got{};
        ct::simd::store(got.data(), ct::simd::hsum_lanes<T>(v.data()));
        for (std::size_t i = 0; i < W; ++i) CHECK(got[i] == want[i]);
        // hmax_lanes: lane i = the largest of vector i's lanes
        for (std::size_t i = 0; i < W; ++i) {
            std::array<T, W> lanes{};
            want[i] = T(-100);
            for (std::size_t j = 0; j < W; ++j) want[i] = std::max(want[i], lanes[j] = T(int(i * 5 + j * 7) % 13 - 6) / T(4));
            v[i] = ct::simd::load(lanes.data());
        }
        ct::simd::store(got.data(), ct::simd::hmax_lanes<T>(v.data()));
        for (std::size_t i = 0; i < W; ++i) CHECK(got[i] == want[i]);
    }
    // rows: fewer than a group, one group, groups and a tail; n: whole vectors (grouped) or not
    for (std::size_t rows : {std::size_t(1), W + 1, 2 * W + 3})
        for (std::size_t n : {W, 4 * W, 3 * W + 1, std::size_t(64)}) {
            auto x = random_vec<T>(rows * n, unsigned(rows * 31 + n));
            for (std::size_t r = 0; r < rows; ++r)  // a different mean and scale per row
                for (std::size_t j = 0; j < n; ++j) x[r * n + j] = x[r * n + j] * T(1 + r % 4) + T(r % 5) - T(2);
            const auto g = random_vec<T>(n, 7), be = random_vec<T>(n, 8);
            std::vector<double> wl(rows * n), wr(rows * n);
            for (std::size_t r = 0; r < rows; ++r) {
                double mean = 0, var = 0, ss = 0;
                for (std::size_t j = 0; j < n; ++j) mean += x[r * n + j], ss += double(x[r * n + j]) * x[r * n + j];
                mean /= n;
                for (std::size_t j = 0; j < n; ++j) var += (x[r * n + j] - mean) * (x[r * n + j] - mean);
                var /= n;
                for (std::size_t j = 0; j < n; ++j) {
                    wl[r * n + j] = (x[r * n + j] - mean) / std::sqrt(var + 1e-5) * g[j] + be[j];
                    wr[r * n + j] = x[r * n + j] / std::sqrt(ss / n + 1e-6) * g[j];
                }
            }
            std::vector<T> y(rows * n), yr = x;  // yr: in place
            ct::kernels::layer_norm_rows(x.data(), y.data(), rows, n, T(1e-5), g.data(), be.data());
            CHECK_CLOSE("layer_norm_rows rows=" << rows << " n=" << n, y.data(), wl.data(), rows * n, kernel_tol<T> * 10);
            ct::kernels::rms_norm_rows(yr.data(), yr.data(), rows, n, T(1e-6), g.data());
            CHECK_CLOSE("rms_norm_rows (in place) rows=" << rows << " n=" << n, yr.data(), wr.data(), rows * n,
                        kernel_tol<T> * 10);
        }
}

TEST_CASE_TEMPLATE("kernels: vector max with the maximum in every lane; blocking a row's tail", T, float, double) {
    constexpr std::size_t W = ct::simd::width<T>;
    for (std::size_t lane = 0; lane < W; ++lane) {
        std::array<T, W> v{};
        for (std::size_t i = 0; i < W; ++i) v[i] = T(-1) - T(i);
        v[lane] = T(5);
        CHECK(ct::simd::hmax<T>(ct::simd::load(v.data())) == T(5));
    }
    const T neg_inf = -std::numeric_limits<T>::infinity();
    for (std::size_t n : {std::size_t(W), 2 * W, 4 * W + 3})
        for (std::size_t valid = 0; valid <= n; ++valid) {
            auto row = random_vec<T>(n, unsigned(valid));
            const auto orig = row;
            ct::kernels::block_tail(row.data(), valid, n);
            std::size_t wrong = 0;
            for (std::size_t j = 0; j < n; ++j) wrong += j < valid ? row[j] != orig[j] : row[j] != neg_inf;
            INFO("n " << n << " valid " << valid);
            CHECK(wrong == 0);
        }
}

TEST_CASE_TEMPLATE("kernels: online softmax over key tiles equals the one-pass softmax", T, float, double) {
    // A row of 150 scores (some blocked) split into tiles of 1, 7, 64 and 150: the streamed
    // probabilities p_j = exp(s_j - m_final) / l_final, reconstructed with the returned
    // corrections, match a scalar softmax; a fully blocked row keeps l = 0.
    const std::size_t n = 150;
    auto s = random_vec<T>(n, 77, -4, 4);
    for (std::size_t j = 0; j < n; j += 9) s[j] = -std::numeric_limits<T>::infinity();
    double mx = -1e300, tot = 0;
    for (T x : s) mx = std::max(mx, double(x));
    std::vector<double> want(n);
    for (std::size_t j = 0; j < n; ++j) tot += (want[j] = std::exp(double(s[j]) - mx));
    for (auto& w : want) w /= tot;
    for (std::size_t tile : {1u, 7u, 64u, 150u}) {
        T m = -std::numeric_limits<T>::infinity(), l = 0;
        std::vector<T> p(s);
        std::vector<double> scale_since(n, 1.0);  // product of corrections after each tile
        for (std::size_t j0 = 0; j0 < n; j0 += tile) {
            const std::size_t len = std::min(tile, n - j0);
            const T corr = ct::kernels::online_softmax_tile(p.data() + j0, len, m, l);
            for (std::size_t j = 0; j < j0; ++j) scale_since[j] *= double(corr);
        }
        std::vector<double> got(n);
        for (std::size_t j = 0; j < n; ++j) got[j] = double(p[j]) * scale_since[j] / double(l);
        CHECK_CLOSE("online softmax, tile " << tile, got.data(), want.data(), n, kernel_tol<T>);
    }
    std::vector<T> blocked(5, -std::numeric_limits<T>::infinity());
    T m = -std::numeric_limits<T>::infinity(), l = 0;
    CHECK(ct::kernels::online_softmax_tile(blocked.data(), blocked.size(), m, l) == T(1));
    CHECK(l == T(0));
}

TEST_CASE_TEMPLATE("kernels: the online softmax down the columns of a transposed tile equals it column by column", T, float, double) {
    // Two key tiles (13 and 5 keys) over 16 query columns, keys blocked by -inf scores and by each
    // column's key end (column 2 has none before the second tile, column 7 none at all, column 9
    // ends inside the first tile); the blocked scores past a column's end hold garbage (NaN and
    // inf included) that must never show. Each column must equal online_softmax_tile over its
    // keys (values, m, l and the factors).
    const T neg_inf = -std::numeric_limits<T>::infinity();
    constexpr std::size_t R = 16;
    std::array<T, R> kend, m1, l1, c1, m2, l2, c2;
    m1.fill(neg_inf), l1.fill(0), m2.fill(neg_inf), l2.fill(0);
    for (std::size_t c = 0; c < R; ++c) kend[c] = T(c == 7 ? 0 : c == 2 ? 15 : c == 9 ? 4 : 18 - c % 3);
    std::size_t j0 = 0;
    for (std::size_t n : {13u, 5u}) {
        auto s = random_vec<T>(n * R, unsigned(9 + n), -6, 6);
        for (std::size_t j = 0; j < n; ++j)
            for (std::size_t c = 0; c < R; ++c) {
                if ((j + c) % 4 == 1) s[j * R + c] = neg_inf;
                if (j0 + j >= std::size_t(kend[c])) s[j * R + c] = (j + c) % 2 ? std::numeric_limits<T>::quiet_NaN() : T(1e30);
            }
        std::vector<T> want(n * R, T(0));
        for (std::size_t c = 0; c < R; ++c) {  // the reference: column c's keys below its end as a row
            std::vector<T> row(n);
            for (std::size_t j = 0; j < n; ++j) row[j] = j0 + j < std::size_t(kend[c]) ? s[j * R + c] : neg_inf;
            c2[c] = ct::kernels::online_softmax_tile(row.data(), n, m2[c], l2[c]);
            for (std::size_t j = 0; j < n; ++j) want[j * R + c] = row[j];
        }
        ct::kernels::online_softmax_cols(s.data(), n, R, kend.data(), j0, m1.data(), l1.data(), c1.data());
        CHECK_CLOSE("probabilities, tile at " << j0, s.data(), want.data(), n * R, kernel_tol<T>);
        std::size_t max_differs = 0;  // -inf for column 7
        for (std::size_t c = 0; c < R; ++c) max_differs += m1[c] != m2[c];
        CHECK(max_differs == 0);
        CHECK_CLOSE("running sum", l1.data(), l2.data(), R, kernel_tol<T>);
        CHECK_CLOSE("correction", c1.data(), c2.data(), R, kernel_tol<T>);
        // normalize_cols: the tile's exponentials over their column sums; column 7 (no key) stays zero
        for (std::size_t j = 0; j < n; ++j)
            for (std::size_t c = 0; c < R; ++c) want[j * R + c] = l2[c] > T(0) ? want[j * R + c] / l2[c] : T(0);
        ct::kernels::normalize_cols(s.data(), n, R, l1.data());
        CHECK_CLOSE("normalized, tile at " << j0, s.data(), want.data(), n * R, kernel_tol<T>);
        j0 += n;
    }
}

TEST_CASE_TEMPLATE("kernels: vexp_nonpositive (the softmax's exp) vs libm; exact zero from -88, NaN kept", T, float, double) {
    constexpr std::size_t W = ct::simd::width<T>;
    std::vector<T> x;
    for (int i = 0; i <= 20000; ++i) x.push_back(T(-87.0 * i / 20000.0));
    for (int i = 1; i < 100; ++i) x.push_back(T(-87.0 - i / 100.0));  // (-88, -87): 0 or subnormal
    x.push_back(T(-88)), x.push_back(T(-88.5)), x.push_back(T(-1000)), x.push_back(-std::numeric_limits<T>::infinity());
    x.push_back(std::numeric_limits<T>::quiet_NaN()), x.push_back(T(1e-6));
    while (x.size() % W) x.push_back(T(-1));
    std::vector<T> y(x.size());
    for (std::size_t i = 0; i < x.size(); i += W)
        ct::simd::store(y.data() + i, ct::simd::vexp_nonpositive(ct::simd::load(x.data() + i)));
    double worst = 0;
    for (std::size_t i = 0; i < x.size(); ++i) {
        if (x[i] != x[i]) {
            CHECK(y[i] != y[i]);
        } else if (x[i] <= T(-88)) {
            CHECK(y[i] == T(0));
        } else if (x[i] < T(-87)) {  // below float's normal range: 0 or the subnormal product
            CHECK(y[i] >= T(0));
            CHECK(std::abs(double(y[i]) - std::exp(double(x[i]))) <= std::exp(-87.0));
        } else {
            const double want = std::exp(double(x[i]));
            worst = std::max(worst, std::abs(double(y[i]) - want) / want);
        }
    }
    INFO("max relative error " << worst << " (" << worst / std::numeric_limits<T>::epsilon() << " eps)");
    CHECK(worst <= 4 * std::numeric_limits<T>::epsilon());
}

namespace {
// Blocks every key j with j % 5 == 3 and adds a per-key bias to the others; keys past qpos + 1 +
// shift are out of range (shift < 0 can block the whole row).
struct test_key_mask : ct::mask_base {
    static constexpr bool has_apply = true;
    long shift = 0;
    std::size_t key_end(std::size_t, std::size_t qpos, std::size_t S) const {
        const long e = long(qpos) + 1 + shift;
        return e <= 0 ? 0 : std::min<std::size_t>(std::size_t(e), S);
    }
    template <class T> void apply(const ct::mask_row&, T* row, std::size_t key0, std::size_t n) const {
        for (std::size_t j = 0; j < n; ++j)
            row[j] = (key0 + j) % 5 == 3 ? -std::numeric_limits<T>::infinity() : row[j] + T(0.25) * T((key0 + j) % 3);
    }
};
template <std::size_t Dh, class T> void check_attend_query() {
    // (1100 and 2600 keys: 2 and 5 key spans, merged)
    for (std::size_t S : {1u, 7u, 9u, 16u, 33u, 70u, 1100u, 2600u})
        for (std::size_t pad : {0u, 3u})
            for (std::size_t tile : {7u, 1024u})
                for (long shift : {0L, -1L, -100L}) {
                    if (S > 1024 && (pad != 0) == (tile == 7)) continue;  // (long caches: two of the four layouts)
                    const std::size_t ldk = S + pad, ldv = Dh + 2, qpos = S - 1;
                    auto q = random_vec<T>(Dh, 3), kt = random_vec<T>(Dh * ldk, 4), v = random_vec<T>(S * ldv, 5);
                    const T scale = T(1) / std::sqrt(T(Dh));
                    test_key_mask mask;
                    mask.shift = shift;
                    // reference: scalar softmax in double
                    const std::size_t kend = mask.key_end(0, qpos, S);
                    std::vector<double> want(Dh, 0.0);
                    std::vector<T> sc(S);
                    for (std::size_t j = 0; j < kend; ++j) {
                        double s = 0;
                        for (std::size_t d = 0; d < Dh; ++d) s += double(q[d]) * double(kt[d * ldk + j]);
                        sc[j] = T(s * double(scale));
                    }
                    mask.apply(ct::mask_row{0, 0, 1, qpos}, sc.data(), 0, kend);
                    double mx = -INFINITY, tot = 0;
                    for (std::size_t j = 0; j < kend; ++j) mx = std::max(mx, double(sc[j]));
                    for (std::size_t j = 0; j < kend && mx > -INFINITY; ++j) {
                        const double e = std::exp(double(sc[j]) - mx);
                        tot += e;
                        for (std::size_t d = 0; d < Dh; ++d) want[d] += e * double(v[j * ldv + d]);
                    }
                    for (auto& w : want) w = tot > 0 ? w / tot : 0.0;
                    std::vector<T> got(Dh, T(7)), scores(std::max<std::size_t>(1024, ct::kernels::attention_scratch_elems(Dh))), head(Dh, T(7));
                    ct::kernels::attend_query<Dh>(S, q.data(), kt.data(), ldk, v.data(), ldv, got.data(), scores.data(), tile,
                                         ct::kernels::rule_of(scale, mask, ct::kernels::head_ref{0, 0, 1}, qpos, ct::no_dropout{},
                                         ct::dropout_site::self_attn_weights));
                    CHECK_CLOSE("attend_query Dh " << Dh << " S " << S << " ldk " << ldk << " tile " << tile
                                                   << " shift " << shift,
                                got.data(), want.data(), Dh, kernel_tol<T>);
                    ct::kernels::attend_head(1, S, Dh, q.data(), Dh, ct::kernels::keys_ref<T>{kt.data(), ldk, true}, v.data(), ldv, head.data(), Dh,
                                    scores.data(), ct::kernels::rule_of(scale, mask, ct::kernels::head_ref{0, 0, 1}, qpos, ct::no_dropout{},
                                    ct::dropout_site::self_attn_weights));
                    CHECK_CLOSE("attend_query vs attend_head, Dh " << Dh << " S " << S, got.data(), head.data(), Dh,
                                kernel_tol<T>);
                    // its key spans one at a time (in any order: as threads finish), then merged: the same bits
                    std::vector<T> states(ct::kernels::query_spans_max * ct::kernels::query_span_elems(Dh), T(9)), split(Dh, T(7));
                    T lse_whole = 0, lse_split = 1;
                    ct::kernels::attend_query<Dh>(S, q.data(), kt.data(), ldk, v.data(), ldv, got.data(), scores.data(), tile,
                                         ct::kernels::rule_of(scale, mask, ct::kernels::head_ref{0, 0, 1}, qpos, ct::no_dropout{},
                                         ct::dropout_site::self_attn_weights), &lse_whole);
                    for (std::size_t j = ct::kernels::query_spans_max; j-- > 0;)
                        ct::kernels::attend_query<Dh>(S, q.data(), kt.data(), ldk, v.data(), ldv, split.data(), scores.data(), tile,
                                             ct::kernels::rule_of(scale, mask, ct::kernels::head_ref{0, 0, 1}, qpos, ct::no_dropout{},
                                             ct::dropout_site::self_attn_weights), static_cast<T*>(nullptr), ct::kernels::key_spans<T>{states.data(), j});
                    ct::kernels::attend_query<Dh>(S, q.data(), kt.data(), ldk, v.data(), ldv, split.data(), scores.data(), tile,
                                         ct::kernels::rule_of(scale, mask, ct::kernels::head_ref{0, 0, 1}, qpos, ct::no_dropout{},
                                         ct::dropout_site::self_attn_weights), &lse_split, ct::kernels::key_spans<T>{states.data()});
                    INFO("attend_query by key spans, Dh " << Dh << " S " << S << " tile " << tile << " shift " << shift);
                    CHECK(std::memcmp(split.data(), got.data(), Dh * sizeof(T)) == 0);
                    CHECK(std::memcmp(&lse_split, &lse_whole, sizeof(T)) == 0);
                }
}
}  // namespace

namespace {
// attend_head over Tq rows at positions qpos0.. against a double reference, keys given as rows and
// as their transpose (the two layouts must agree to rounding). Row blocks past one and partial,
// key tiles past one (online-softmax corrections), causal rows that end inside a tile, rows with
// every key blocked (shift), NaN and inf in keys and values that are blocked for every row.
template <std::size_t Dh, class T> void check_attend_head() {
    for (std::size_t Tq : {2u, 16u, 21u, 40u})
        for (std::size_t S : {1u, 9u, 16u, 70u, 130u})
            for (long shift : {0L, -3L, 200L}) {
                const std::size_t ldq = Dh + 1, ldk = Dh + 3, ldkt = S + 2, ldv = Dh + 2, qpos0 = S > Tq ? S - Tq : 0;
                auto q = random_vec<T>(Tq * ldq, 3), k = random_vec<T>(S * ldk, 4), v = random_vec<T>(S * ldv, 5);
                test_key_mask mask;
                mask.shift = shift;
                // keys past every row's end hold NaN and inf: no output may see them
                const std::size_t kmax = mask.key_end(0, qpos0 + Tq - 1, S);
                for (std::size_t j = kmax; j < S; ++j) k[j * ldk] = j % 2 ? std::numeric_limits<T>::quiet_NaN() : T(INFINITY), v[j * ldv + 1] = T(NAN);
                std::vector<T> kt(Dh * ldkt);
                for (std::size_t j = 0; j < S; ++j)
                    for (std::size_t d = 0; d < Dh; ++d) kt[d * ldkt + j] = k[j * ldk + d];
                const T scale = T(1) / std::sqrt(T(Dh));
                std::vector<double> want(Tq * Dh, 0.0);
                for (std::size_t i = 0; i < Tq; ++i) {
                    const std::size_t kend = mask.key_end(0, qpos0 + i, S);
                    std::vector<T> sc(S);
                    for (std::size_t j = 0; j < kend; ++j) {
                        double x = 0;
                        for (std::size_t d = 0; d < Dh; ++d) x += double(q[i * ldq + d]) * double(k[j * ldk + d]);
                        sc[j] = T(x * double(scale));
                    }
                    mask.apply(ct::mask_row{0, 0, 1, qpos0 + i}, sc.data(), 0, kend);
                    double mx = -INFINITY, tot = 0;
                    for (std::size_t j = 0; j < kend; ++j) mx = std::max(mx, double(sc[j]));
                    for (std::size_t j = 0; j < kend && mx > -INFINITY; ++j) {
                        const double e = std::exp(double(sc[j]) - mx);
                        tot += e;
                        for (std::size_t d = 0; d < Dh; ++d) want[i * Dh + d] += e * double(v[j * ldv + d]);
                    }
                    for (std::size_t d = 0; d < Dh; ++d) want[i * Dh + d] = tot > 0 ? want[i * Dh + d] / tot : 0.0;
                }
                std::vector<T> scratch(ct::kernels::attention_scratch_elems(Dh));
                for (bool transposed : {false, true}) {
                    std::vector<T> got(Tq * Dh, T(7)), lse(Tq);
                    const ct::kernels::keys_ref<T> keys = transposed ? ct::kernels::keys_ref<T>{kt.data(), ldkt, true} : ct::kernels::keys_ref<T>{k.data(), ldk, false};
                    ct::kernels::attend_head(Tq, S, Dh, q.data(), ldq, keys, v.data(), ldv, got.data(), Dh, scratch.data(), ct::kernels::rule_of(scale, mask, ct::kernels::head_ref{0, 0, 1}, qpos0, ct::no_dropout{}, ct::dropout_site::self_attn_weights),
                                    lse.data());
                    CHECK_CLOSE("attend_head Dh " << Dh << " Tq " << Tq << " S " << S << " shift " << shift
                                                  << (transposed ? " keys transposed" : " keys as rows"),
                                got.data(), want.data(), Tq * Dh, kernel_tol<T> * 4);
                }
            }
}
}  // namespace

TEST_CASE_TEMPLATE("kernels: attention heads (row blocks, key tiles, both key layouts) vs scalar reference", T, float, double) {
    check_attend_head<5, T>();
    check_attend_head<16, T>();
    check_attend_head<32, T>();
    check_attend_head<72, T>();
}

TEST_CASE_TEMPLATE("kernels: one-query attention (decoding step) vs scalar reference", T, float, double) {
    // Head sizes below, at and past the vector width and the 8-vector register block; keys past
    // the last whole vector, strides with and without room for a whole vector past the row, key
    // tiles that force online-softmax corrections, masked and fully blocked rows.
    check_attend_query<5, T>();
    check_attend_query<16, T>();
    check_attend_query<24, T>();
    check_attend_query<72, T>();
}

TEST_CASE_TEMPLATE("kernels: vector exp / erf / tanh accuracy (documented in docs/design.md)", T, float, double) {
    constexpr std::size_t W = ct::simd::width<T>;
    struct fn {
        const char* name;
        double lo, hi;
        double (*ref)(double);
        double bound_float, bound_double;  // max relative error allowed, in eps of T
    };
    const fn fns[] = {{"exp", -80, 80, [](double x) { return std::exp(x); }, 2, 2},
                      // float erf (simd::verf_float): 2.7 eps with fused multiply-adds, 3.05 where they are not
                      // fused (SSE4.2, armv7 NEON), by tools/fit_erf.py's emulation
                      {"erf", -6, 6, [](double x) { return std::erf(x); }, 4, 64},
                      {"tanh", -12, 12, [](double x) { return std::tanh(x); }, 2, 4}};
    for (const fn& f : fns) {
        double max_rel = 0;
        const std::size_t n = 20000;
        for (std::size_t i = 0; i + W <= n; i += W) {
            alignas(64) T in[W], out[W];
            for (std::size_t l = 0; l < W; ++l) in[l] = static_cast<T>(f.lo + (f.hi - f.lo) * double(i + l) / n);
            ct::simd::vec<T> v = ct::simd::load(in);
            if (f.name[0] == 'e' && f.name[1] == 'x') v = ct::simd::vexp(v);
            else if (f.name[0] == 'e') v = ct::simd::verf(v);
            else v = ct::simd::vtanh(v);
            ct::simd::store(out, v);
            for (std::size_t l = 0; l < W; ++l) {
                const double r = f.ref(double(in[l]));
                if (std::fabs(r) < 1e-30) continue;
                max_rel = std::max(max_rel, std::fabs(double(out[l]) - r) / std::fabs(r));
            }
        }
        const double eps = std::numeric_limits<T>::epsilon();
        MESSAGE(std::string(f.name) << "<" << std::string(sizeof(T) == 4 ? "float" : "double") << ">: max rel error "
                                   << max_rel << " = " << max_rel / eps << " eps");
        CHECK(max_rel <= (sizeof(T) == 4 ? f.bound_float : f.bound_double) * eps);
    }
    // Special values (xsimd alone converts ±inf/NaN to an integer: undefined behaviour, caught by
    // UBSan): exp(-inf) = 0, exp(+inf) = inf, NaN stays NaN, and the clamp edges are exact.
    using lim = std::numeric_limits<T>;
    const T specials[] = {-lim::infinity(), lim::infinity(), lim::quiet_NaN(), -lim::max(), lim::max(),
                          T(-1000),         T(1000),         T(-104),          T(89),       T(0)};
    for (const T x : specials) {
        alignas(64) T in[W], out[W];
        for (std::size_t l = 0; l < W; ++l) in[l] = x;
        ct::simd::store(out, ct::simd::vexp(ct::simd::load(in)));
        const T want = std::exp(x);
        INFO("exp(" << x << ") = " << out[0] << ", libm " << want);
        for (std::size_t l = 0; l < W; ++l) {
            if (std::isnan(want)) CHECK(std::isnan(out[l]));
            else if (want == T(0) || std::isinf(want)) CHECK(out[l] == want);
            else CHECK(std::fabs(out[l] - want) <= 4 * lim::epsilon() * want + lim::denorm_min() * 4);
        }
    }
}

TEST_CASE_TEMPLATE("kernels: normal CDF and GELU accuracy (float: erf's rational with 1/sqrt(2) folded in)", T, float, double) {
    constexpr std::size_t W = ct::simd::width<T>;
    const double eps = std::numeric_limits<T>::epsilon();
    // Measured (float): Φ 1.5 eps absolute over [-12, 12], 2.6 eps relative above -1; GELU 1.7 eps
    // of max(1, |x|) absolute, 2.9 eps relative above -1 (AVX-512). armv7 NEON, without fused
    // multiply-adds and with xsimd's reciprocal-estimate division: 1.9, 3.7, 2.1 and 4.0 eps.
    // Below -1 Φ = (1 + erf)/2 cancels (PyTorch computes it the same way): only absolutely
    // accurate there.
    const double bound = sizeof(T) == 4 ? 5 : 64;
    double phi_abs = 0, phi_rel = 0, gelu_abs = 0, gelu_rel = 0;
    const std::size_t n = 240000;
    for (std::size_t i = 0; i + W <= n; i += W) {
        alignas(64) T in[W], phi[W], g[W];
        for (std::size_t l = 0; l < W; ++l) in[l] = static_cast<T>(-12.0 + 24.0 * double(i + l) / n);
        const auto v = ct::simd::load(in);
        ct::simd::store(phi, ct::simd::vnormal_cdf(v));
        ct::simd::store(g, ct::gelu{}(v));
        for (std::size_t l = 0; l < W; ++l) {
            const double x = double(in[l]), p = 0.5 * std::erfc(-x / std::sqrt(2.0)), r = x * p;
            phi_abs = std::max(phi_abs, std::fabs(double(phi[l]) - p));
            gelu_abs = std::max(gelu_abs, std::fabs(double(g[l]) - r) / std::max(1.0, std::fabs(x)));
            if (x >= -1 && r != 0) {
                phi_rel = std::max(phi_rel, std::fabs(double(phi[l]) - p) / p);
                gelu_rel = std::max(gelu_rel, std::fabs(double(g[l]) - r) / std::fabs(r));
            }
        }
    }
    MESSAGE("normal cdf: " << phi_abs / eps << " eps absolute, " << phi_rel / eps << " eps relative above -1; gelu: "
                           << gelu_abs / eps << " eps of max(1, |x|), " << gelu_rel / eps << " eps relative above -1");
    CHECK(phi_abs <= bound * eps);
    CHECK(phi_rel <= bound * eps);
    CHECK(gelu_abs <= bound * eps);
    CHECK(gelu_rel <= bound * eps);
    // Far below, Φ is 0 (not erf's rounding, -6e-8 in float): GELU -0 as in PyTorch; far above 1
    // (not 1 + ε where the rational is evaluated without FMA: SSE4.2's GELU(30) was 30.000002);
    // NaN at -inf and for NaN, inf at inf, as there.
    using lim = std::numeric_limits<T>;
    const T xs[] = {T(-100), T(-30), -lim::infinity(), lim::infinity(), lim::quiet_NaN(), T(30)};
    for (const T x : xs) {
        alignas(64) T in[W], g[W], p[W];
        for (std::size_t l = 0; l < W; ++l) in[l] = x;
        ct::simd::store(g, ct::gelu{}(ct::simd::load(in)));
        ct::simd::store(p, ct::simd::vnormal_cdf(ct::simd::load(in)));
        const T want = x * T(0.5) * (T(1) + std::erf(x / std::sqrt(T(2))));
        INFO("gelu(" << x << ") = " << g[0] << ", libm " << want << "; normal cdf " << p[0]);
        for (std::size_t l = 0; l < W; ++l) {
            if (std::isnan(want)) CHECK(std::isnan(g[l]));
            else CHECK(g[l] == want);
            CHECK((std::isnan(x) ? std::isnan(p[l]) : p[l] >= T(0) && p[l] <= T(1)));
        }
    }
}

TEST_CASE_TEMPLATE("kernels: vector erf and tanh at ±inf, NaN and huge arguments (no out-of-range conversion)", T, float, double) {
    // (xsimd's double erf and tanh convert through exp to 64-bit integers in software: UBSan
    // caught ±inf there; simd::verf / vtanh clamp their arguments where the result is ±1)
    constexpr std::size_t W = ct::simd::width<T>;
    using lim = std::numeric_limits<T>;
    const T xs[] = {-lim::infinity(), lim::infinity(), lim::quiet_NaN(), T(1e30), T(-1e30), lim::max(), T(30), T(-30)};
    for (const T x : xs) {
        alignas(64) T in[W], e[W], t[W];
        for (std::size_t l = 0; l < W; ++l) in[l] = x;
        ct::simd::store(e, ct::simd::verf(ct::simd::load(in)));
        ct::simd::store(t, ct::simd::vtanh(ct::simd::load(in)));
        INFO("x = " << x << ": erf " << e[0] << ", tanh " << t[0]);
        for (std::size_t l = 0; l < W; ++l) {
            if (std::isnan(x)) {
                CHECK(std::isnan(e[l]));
                CHECK(std::isnan(t[l]));
            } else {
                CHECK(std::fabs(e[l] - std::erf(x)) <= 2 * lim::epsilon());  // (float: the rational's ±1 within 1 ulp)
                CHECK(std::fabs(t[l] - std::tanh(x)) <= 2 * lim::epsilon());
            }
        }
    }
}

TEST_CASE_TEMPLATE("kernels: vmax / vmin are a > b ? a : b and a < b ? a : b lane by lane (b where either is NaN)", T, float, double) {
    constexpr std::size_t W = ct::simd::width<T>;
    using lim = std::numeric_limits<T>;
    const T vals[] = {T(-1), T(2), T(0), -T(0), lim::quiet_NaN(), -lim::infinity(), lim::infinity()};
    for (const T a : vals)
        for (const T b : vals) {
            alignas(64) T va[W], vb[W], mx[W], mn[W];
            for (std::size_t l = 0; l < W; ++l) va[l] = a, vb[l] = b;
            ct::simd::store(mx, ct::simd::vmax(ct::simd::load(va), ct::simd::load(vb)));
            ct::simd::store(mn, ct::simd::vmin(ct::simd::load(va), ct::simd::load(vb)));
            const T want_max = a > b ? a : b, want_min = a < b ? a : b;
            INFO("a = " << a << ", b = " << b << ": max " << mx[0] << ", min " << mn[0]);
            for (std::size_t l = 0; l < W; ++l) {  // bit for bit: the sign of zero and NaN included
                CHECK(std::memcmp(&mx[l], &want_max, sizeof(T)) == 0);
                CHECK(std::memcmp(&mn[l], &want_min, sizeof(T)) == 0);
            }
            const T scalar_max = ct::simd::vmax(a, b), scalar_min = ct::simd::vmin(a, b);
            CHECK(std::memcmp(&scalar_max, &want_max, sizeof(T)) == 0);
            CHECK(std::memcmp(&scalar_min, &want_min, sizeof(T)) == 0);
        }
}

TEST_CASE_TEMPLATE("kernels: all_finite finds any NaN or inf, at every position and stride", T, float, double) {
    using lim = std::numeric_limits<T>;
    std::vector<T> x(7 * 37, T(1.5));
    CHECK(ct::kernels::all_finite(x.data(), 7, 33, 37));
    x[5 * 37 + 35] = lim::quiet_NaN();  // outside the 33 columns: not looked at
    CHECK(ct::kernels::all_finite(x.data(), 7, 33, 37));
    for (const T bad : {lim::quiet_NaN(), lim::infinity(), -lim::infinity()})
        for (std::size_t i : {std::size_t{0}, std::size_t{16}, std::size_t{32}, std::size_t{6 * 37 + 32}}) {
            const T keep = x[i];
            x[i] = bad;
            CHECK_FALSE(ct::kernels::all_finite(x.data(), 7, 33, 37));
            x[i] = keep;
        }
    x[0] = lim::max();
    CHECK(ct::kernels::all_finite(x.data(), 7, 33, 37));
}

TEST_CASE_TEMPLATE("kernels: adamw_update, vectors = the scalar reference bit for bit; the formula in double", T, float, double) {
    // n past whole vectors (the scalar tail), gradients with zeros and a wide range of magnitudes
    constexpr std::size_t W = ct::simd::width<T>, n = 5 * W + 3;
    const ct::kernels::adamw_scalars<T> s{T(1 - 1e-2 * 1e-2), T(0.9), T(0.999), T(1 - 0.9), T(1 - 0.999), T(1e-8),
                                          T(-(1e-2 / (1 - 0.9 * 0.9))), T(std::sqrt(1 - 0.999 * 0.999))};
    auto p = random_vec<T>(n, 21), g = random_vec<T>(n, 22), m = random_vec<T>(n, 23, -0.1, 0.1), v = random_vec<T>(n, 24, 1e-4, 0.01);
    for (std::size_t i = 0; i < n; ++i) g[i] *= T(std::pow(10.0, double(i % 7) - 4)) * T(i % 5 != 0);
    auto p1 = p, m1 = m, v1 = v, p2 = p, m2 = m, v2 = v;
    ct::kernels::adamw_update(n, p1.data(), g.data(), m1.data(), v1.data(), s);
    for (std::size_t i = 0; i < n; ++i) ct::kernels::adamw_update(1, &p2[i], &g[i], &m2[i], &v2[i], s);  // scalar path
    std::size_t differ = 0;
    for (std::size_t i = 0; i < n; ++i) differ += p1[i] != p2[i] || m1[i] != m2[i] || v1[i] != v2[i];
    CHECK(differ == 0);
    std::vector<T> pd(n), md(n), vd(n);
    for (std::size_t i = 0; i < n; ++i) {
        const double mi = 0.9 * double(m[i]) + 0.1 * double(g[i]), vi = 0.999 * double(v[i]) + 0.001 * double(g[i]) * double(g[i]);
        md[i] = T(mi), vd[i] = T(vi);
        pd[i] = T(double(p[i]) * (1 - 1e-4) + double(s.neg_step) * mi / (std::sqrt(vi) / double(s.bias_correction2_sqrt) + 1e-8));
    }
    CHECK_CLOSE("m", m1.data(), md.data(), n, kernel_tol<T>);
    CHECK_CLOSE("v", v1.data(), vd.data(), n, kernel_tol<T>);
    CHECK_CLOSE("p", p1.data(), pd.data(), n, kernel_tol<T>);
}

TEST_CASE_TEMPLATE("kernels: simd::vfma rounds once wherever simd::ieee_vectors holds (at every -O, any -ffp-contract)", T, float, double) {
    // a·b + c where the product's low bits decide the sum: fused and unfused differ in most lanes
    constexpr std::size_t W = ct::simd::width<T>;
    const auto a = random_vec<T>(W * 8, 31), b = random_vec<T>(W * 8, 32), c = random_vec<T>(W * 8, 33);
    std::size_t fused = 0, lanes = 0;
    for (std::size_t i = 0; i < W * 8; i += W) {
        std::array<T, W> got{};
        ct::simd::store(got.data(), ct::simd::vfma(ct::simd::load(&a[i]), ct::simd::load(&b[i]), ct::simd::load(&c[i])));
        for (std::size_t j = 0; j < W; ++j, ++lanes) fused += got[j] == std::fma(a[i + j], b[i + j], c[i + j]);
    }
    MESSAGE(std::string(ct::simd::arch_name()), ": ", fused, " of ", lanes, " lanes equal std::fma");
    if constexpr (ct::simd::ieee_vectors<T> && (W > 1)) CHECK(fused == lanes);
    // vdiv and vsqrt: correctly rounded there too (xsimd 8.1's aarch64 floats estimate both)
    std::size_t exact = 0;
    for (std::size_t i = 0; i < W * 8; i += W) {
        std::array<T, W> q{}, r{};
        const auto av = ct::simd::load(&a[i]), bv = ct::simd::load(&b[i]);
        ct::simd::store(q.data(), ct::simd::vdiv(av, bv));
        ct::simd::store(r.data(), ct::simd::vsqrt(av * av));
        for (std::size_t j = 0; j < W; ++j) {
            exact += q[j] == a[i + j] / b[i + j] && r[j] == std::sqrt(a[i + j] * a[i + j]);
        }
    }
    MESSAGE(std::string(ct::simd::arch_name()), ": ", exact, " of ", lanes, " lanes with vdiv and vsqrt equal / and std::sqrt");
    if constexpr (ct::simd::ieee_vectors<T> && (W > 1)) CHECK(exact == lanes);
}

namespace {
struct scalar_only_act {  // a user activation callable on scalars only (the kernels go lane by lane)
    float operator()(float x) const { return x > 0 ? x * x : 0; }
    double operator()(double x) const { return x > 0 ? x * x : 0; }
    float derivative(float x) const { return x > 0 ? 2 * x : 0; }
    double derivative(double x) const { return x > 0 ? 2 * x : 0; }
};
// gated/gated_grad against the separate passes they replace (map, mul, mul_derivative): the same
// bits, vectors and the scalar tail alike, for SiLU (one exp for value and derivative), GELU and a
// scalar-only functor; and SiLU's derivative against a central difference in double.
template <class T, class A> void check_gated(const A& act) {
    constexpr std::size_t n = 5 * ct::simd::width<T> + 3;
    const auto gate = random_vec<T>(n, 31, -6, 6), up = random_vec<T>(n, 32), dh0 = random_vec<T>(n, 33);
    std::vector<T> h(n), hr(n), dh = dh0, d_up(n), dgr = dh0, dur(n);
    ct::kernels::gated(gate.data(), up.data(), h.data(), n, act);
    ct::kernels::gated_grad(gate.data(), up.data(), dh.data(), d_up.data(), n, act);
    for (std::size_t i = 0; i < n; ++i) {
        hr[i] = static_cast<T>(act(gate[i])) * up[i];
        dur[i] = static_cast<T>(act(gate[i])) * dh0[i];
        dgr[i] = dh0[i] * up[i] * static_cast<T>(act.derivative(gate[i]));
    }
    std::vector<T> hv(n), dv = dh0, duv(n);  // the vector passes the fused kernels replaced
    ct::kernels::map(gate.data(), hv.data(), n, act);
    ct::kernels::mul_inplace(hv.data(), up.data(), n);
    ct::kernels::map(gate.data(), duv.data(), n, act);
    ct::kernels::mul_inplace(duv.data(), dh0.data(), n);
    ct::kernels::mul_inplace(dv.data(), up.data(), n);
    ct::kernels::mul_derivative(dv.data(), gate.data(), n, act);
    std::size_t differ = 0;
    for (std::size_t i = 0; i < n; ++i) differ += h[i] != hv[i] || d_up[i] != duv[i] || dh[i] != dv[i];
    CHECK(differ == 0);
    CHECK_CLOSE("h", h.data(), hr.data(), n, kernel_tol<T>);
    CHECK_CLOSE("d_up", d_up.data(), dur.data(), n, kernel_tol<T>);
    CHECK_CLOSE("d_gate", dh.data(), dgr.data(), n, kernel_tol<T>);
}
}  // namespace

TEST_CASE_TEMPLATE("kernels: gated and gated_grad (a gated FFN's hidden and its backward in one pass) = the separate passes", T, float, double) {
    check_gated<T>(ct::silu{});
    check_gated<T>(ct::gelu{});
    check_gated<T>(scalar_only_act{});
    double worst = 0;
    for (double x = -8; x <= 8; x += 0.37) {
        const auto vd = ct::silu{}.value_and_derivative(x);
        const double e = 1e-6, fd = (ct::silu{}(x + e) - ct::silu{}(x - e)) / (2 * e);
        worst = std::max(worst, std::fabs(vd.derivative - fd) + std::fabs(vd.value - x / (1 + std::exp(-x))));
    }
    INFO("worst |silu' - central difference| + |silu - x·sigmoid(x)| = " << worst);
    CHECK(worst < 1e-8);
}

// ---- The sampler's passes (kernels/sampling.hpp) against plain loops ----

namespace ck = ctformer::kernels;

TEST_CASE_TEMPLATE("kernels: the sampler's passes (shift_divide, first_above, zero_below) = plain loops; block_draw's draws", T, float, double) {
    const T inf = std::numeric_limits<T>::infinity();
    for (std::size_t n : {std::size_t(1), std::size_t(37), std::size_t(64), std::size_t(1000)}) {
        auto x = random_vec<T>(n, unsigned(n), -8, 8);
        x[n / 2] = -inf;  // a blocked token
        auto y = x;
        ck::shift_divide(y.data(), n, T(3.5), T(0.7));
        for (std::size_t i = 0; i < n; ++i) CHECK(y[i] == (x[i] - T(3.5)) / T(0.7));
        for (const T t : {T(-9), T(0), T(5), T(7.9), T(9)})
            for (std::size_t from : {std::size_t(0), std::size_t(1), n / 3, n - 1}) {
                std::size_t want = n;
                for (std::size_t i = from; i < n && want == n; ++i)
                    if (x[i] > t) want = i;
                CHECK(ck::first_above(x.data(), from, n, t) == want);
            }
        auto z = x;
        ck::zero_below(z.data(), n, T(0.5));
        for (std::size_t i = 0; i < n; ++i) CHECK(z[i] == (x[i] < T(0.5) ? T(0) : x[i]));
    }
    // block_draw: u over a fine grid of [0, total) hits each value in proportion to it, never a zero
    for (std::size_t n : {std::size_t(5), std::size_t(64), std::size_t(200)}) {
        auto p = random_vec<T>(n, unsigned(n + 1), 0, 1);
        for (std::size_t i = 0; i < n; i += 3) p[i] = T(0);  // (blocked, or cut by min-p)
        double want_total = 0;
        for (const T v : p) want_total += double(v);
        const double total = ck::block_total(p.data(), n);
        CHECK(std::fabs(total - want_total) <= 1e-5 * want_total);
        constexpr std::size_t M = 200000;
        std::vector<std::size_t> hits(n + 1);
        std::size_t prev = 0, bad = 0;
        for (std::size_t m = 0; m < M; ++m) {
            const std::size_t i = ck::block_draw(p.data(), n, (double(m) + 0.5) / M * total);
            bad += i >= n || !(p[i] > T(0)) || i < prev;  // (out of range, a zero, or not monotone in u)
            prev = i, ++hits[i < n ? i : n];
        }
        CHECK(bad == 0);
        double worst = 0;
        for (std::size_t i = 0; i < n; ++i) worst = std::max(worst, std::fabs(double(hits[i]) / M - double(p[i]) / total));
        INFO(n << " values: worst |frequency - p/total| " << worst);
        CHECK(worst <= 2.0 / M + 1e-5);
        std::size_t last = n;
        for (std::size_t i = 0; i < n; ++i)
            if (p[i] > T(0)) last = i;
        CHECK(ck::block_draw(p.data(), n, total * (1 + 1e-9)) == last);  // past the end: the last value with mass
        std::vector<T> zeros(n, T(0));
        CHECK(ck::block_draw(zeros.data(), n, 0.0) == n);
    }
}
