// ctformer/core/tensor.hpp — statically shaped storage and views.
//
// Tensor<T, Dims...> owns its elements inline (64-byte aligned, size a compile-time constant) so
// it can live in static storage or in memory the user owns; it never allocates. TensorView is the
// same shape over a pointer the user provides. PackedWeight stores a PyTorch Linear weight
// (out, in) in the GEMM's panel layout while presenting PyTorch's shape and element order to the
// importer, so the import format is PyTorch's and the kernel layout is ctformer's.
#pragma once
#include <array>
#include <cstddef>
#include <type_traits>

#include "panels.hpp"

namespace ctformer {

template <std::size_t... Dims> struct shape_of {
    static_assert(sizeof...(Dims) > 0, "ctformer: a tensor needs at least one dimension");
    static_assert(((Dims > 0) && ...), "ctformer: a tensor dimension is zero");
    static constexpr std::size_t rank = sizeof...(Dims);
    static constexpr std::array<std::size_t, rank> shape{Dims...};
    static constexpr std::size_t size = (Dims * ...);
};

template <class T, std::size_t... Dims> struct Tensor : shape_of<Dims...> {
    using value_type = T;
    using shape_of<Dims...>::size;
    alignas(64) T storage[size];

    constexpr T* data() { return storage; }
    constexpr const T* data() const { return storage; }
    // Element i in PyTorch's (row-major) order: the importer's interface.
    constexpr T get(std::size_t i) const { return storage[i]; }
    constexpr void set(std::size_t i, T v) { storage[i] = v; }
    template <class... I> constexpr T& operator()(I... idx) { return storage[offset(idx...)]; }
    template <class... I> constexpr const T& operator()(I... idx) const { return storage[offset(idx...)]; }

    template <class... I> static constexpr std::size_t offset(I... idx) {
        static_assert(sizeof...(I) == sizeof...(Dims), "ctformer: wrong number of indices");
        std::size_t o = 0, k = 0;
        const std::size_t ids[] = {static_cast<std::size_t>(idx)...};
        for (std::size_t d : {Dims...}) o = o * d + ids[k++];
        return o;
    }
};

template <class T, std::size_t... Dims> struct TensorView : shape_of<Dims...> {
    using value_type = std::remove_const_t<T>;
    using shape_of<Dims...>::size;
    T* ptr;
    constexpr T* data() const { return ptr; }
    constexpr value_type get(std::size_t i) const { return ptr[i]; }
};

// PyTorch Linear weight W: (Out, In), stored for the GEMM as Wᵀ: (In, Out) in column panels
// (core/panels.hpp), the order the micro-kernel and the decoding GEMV read it: packed once at
// load time, no second copy. get/set present PyTorch's shape and element order, so the import
// format stays PyTorch's. Seg: W's rows form Out / Seg blocks used separately (MultiheadAttention's
// Wq | Wk | Wv); each block starts on a whole panel so a kernel can read any block alone.
template <class T, std::size_t Out, std::size_t In, std::size_t Seg = Out> struct PackedWeight : shape_of<Out, In> {
    static_assert(Seg > 0 && Out % Seg == 0, "ctformer: weight segments must divide the output features");
    using value_type = T;
    using shape_of<Out, In>::size;
    static constexpr std::size_t out_features = Out, in_features = In, segment = Seg, segments = Out / Seg;
    static constexpr std::size_t NR = panels::gemm_tile<T>::NR;
    static constexpr std::size_t segment_elems = panels::panel_elems<T>(In, Seg);
    static constexpr std::size_t storage_size = segments * segment_elems;
    // Segments abut without padding: one GEMM may span several.
    static constexpr bool segments_contiguous = Seg % NR == 0;
    alignas(64) T storage[storage_size];

    // Panels of block s: (In, Seg) in panel layout.
    constexpr const T* panels(std::size_t s = 0) const { return storage + s * segment_elems; }
    constexpr T* panels(std::size_t s = 0) { return storage + s * segment_elems; }
    // Element i of W in PyTorch's row-major (Out, In) order.
    static constexpr std::size_t storage_index(std::size_t i) {
        const std::size_t o = i / In, k = i % In;
        return o / Seg * segment_elems + panels::panel_index<T>(In, k, o % Seg);
    }
    constexpr T get(std::size_t i) const { return storage[storage_index(i)]; }
    constexpr void set(std::size_t i, T v) { storage[storage_index(i)] = v; }
};

template <class X> struct is_tensor_storage : std::false_type {};
template <class T, std::size_t... D> struct is_tensor_storage<Tensor<T, D...>> : std::true_type {};
template <class T, std::size_t O, std::size_t I, std::size_t S>
struct is_tensor_storage<PackedWeight<T, O, I, S>> : std::true_type {};
template <class X> inline constexpr bool is_tensor_storage_v = is_tensor_storage<std::remove_cv_t<X>>::value;

// Views of user memory with a compile-time shape.
template <std::size_t... Dims, class T> constexpr TensorView<T, Dims...> view(T* p) { return {{}, p}; }

// Shape queries used by static_asserts: anything with value_type, shape and data().
template <class X> concept tensor_like = requires(const X& x) {
    typename X::value_type;
    X::shape;
    x.data();
};
template <class X> inline constexpr std::size_t dim(std::size_t i) { return X::shape[i]; }

}  // namespace ctformer
