// ctformer/io/file.hpp — a safetensors file from disk on a hosted target, with no heap allocation in
// the library: read into storage the caller owns, or map it read-only (POSIX). Every failure is a
// status (errc::io_error naming the path, errc::buffer_too_small), never an exception.
//
//   static std::byte storage[64 << 20];
//   const ct::file_read r = ct::read_file("model.safetensors", storage);   // r.bytes: the file
//   ct::mapped_file m;  m.open("model.safetensors");                        // m.bytes(): mapped
#pragma once
#include <cstddef>
#include <cstdio>
#include <span>
#include <string_view>

#include "../core/status.hpp"

#if __has_include(<sys/mman.h>) && __has_include(<fcntl.h>) && __has_include(<unistd.h>)
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#define CTFORMER_HAVE_MMAP 1
#endif

namespace ctformer {

struct file_read {
    status st;
    std::span<const std::byte> bytes;  // the file's bytes within storage (on success)
};

// Reads the whole file at path into storage: errc::io_error if it cannot be opened, sized or read;
// errc::buffer_too_small if it is larger than storage (nothing is read then).
inline file_read read_file(const char* path, std::span<std::byte> storage) {
    std::FILE* f = std::fopen(path, "rb");
    if (!f) return {status::error(errc::io_error, path, ": cannot open"), {}};
#ifdef CTFORMER_HAVE_MMAP
    struct stat info {};
    if (fstat(fileno(f), &info) != 0 || !S_ISREG(info.st_mode)) {  // (a directory opens, and sizes as LONG_MAX)
        std::fclose(f);
        return {status::error(errc::io_error, path, ": not a regular file"), {}};
    }
#endif
    long size = -1;
    if (std::fseek(f, 0, SEEK_END) == 0) size = std::ftell(f);
    if (size < 0 || std::fseek(f, 0, SEEK_SET) != 0) {
        std::fclose(f);
        return {status::error(errc::io_error, path, ": cannot size"), {}};
    }
    if (static_cast<unsigned long>(size) > storage.size()) {
        std::fclose(f);
        return {status::error(errc::buffer_too_small, path), {}};
    }
    const std::size_t n = std::fread(storage.data(), 1, static_cast<std::size_t>(size), f);
    const bool failed = std::ferror(f) != 0 || n != static_cast<std::size_t>(size);
    std::fclose(f);
    if (failed) return {status::error(errc::io_error, path, ": short read"), {}};
    return {{}, storage.first(n)};
}

#ifdef CTFORMER_HAVE_MMAP
// A file mapped read-only (the weights are read in place: the loader copies them into Params;
// tools/flash_image.hpp's images can be used as they are). Unmapped by close() or the destructor.
class mapped_file {
    const std::byte* p_ = nullptr;
    std::size_t n_ = 0;

  public:
    mapped_file() = default;
    mapped_file(const mapped_file&) = delete;
    mapped_file& operator=(const mapped_file&) = delete;
    ~mapped_file() { close(); }

    status open(const char* path) {
        close();
        const int fd = ::open(path, O_RDONLY);
        if (fd < 0) return status::error(errc::io_error, path, ": cannot open");
        struct stat sb;
        if (::fstat(fd, &sb) != 0 || sb.st_size <= 0) {
            ::close(fd);
            return status::error(errc::io_error, path, ": cannot size (or empty)");
        }
        void* m = ::mmap(nullptr, static_cast<std::size_t>(sb.st_size), PROT_READ, MAP_PRIVATE, fd, 0);
        ::close(fd);  // (the mapping keeps the file)
        if (m == MAP_FAILED) return status::error(errc::io_error, path, ": cannot map");
        p_ = static_cast<const std::byte*>(m);
        n_ = static_cast<std::size_t>(sb.st_size);
        return {};
    }
    void close() {
        if (p_) ::munmap(const_cast<std::byte*>(p_), n_);
        p_ = nullptr;
        n_ = 0;
    }
    std::span<const std::byte> bytes() const { return {p_, n_}; }
};
#endif

}  // namespace ctformer
