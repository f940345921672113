// tokenize — a tokenizer's tables from the command line (what llama.cpp's llama-tokenize is to its
// users; also how to check an export against its source):
//   tokenize FILE [--bos] [--eos]     one JSON string per line on stdin -> one JSON array of ids per line
//   tokenize FILE --decode            one JSON array of ids per line    -> one JSON string per line
// FILE: a safetensors file holding "tokenizer.*" (python3 tools/export.py --tokenizer SRC FILE).
// Errors go to stderr with the line number; the exit status is 1 if any line failed.
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <span>
#include <string_view>

#include <ctformer/io/file.hpp>
#include <ctformer/io/json.hpp>
#include <ctformer/io/safetensors.hpp>
#include <ctformer/text/load.hpp>

namespace ct = ctformer;

namespace {
constexpr std::size_t max_line = 1 << 20;
char line[max_line + 2];
char text[max_line];
ct::token ids[max_line];
ct::tokenizer::Workspace<3 * max_line + 8> ws;  // (SentencePiece: a space becomes 3 bytes)
ct::tokenizer tok;
ct::safetensors::file<32> st_file;

// A line "…" (a JSON string) -> its bytes in text; false if it is not one.
bool read_string(std::string_view l, std::size_t& n) {
    ct::safetensors::detail::json js{l.data(), l.data() + l.size()};
    const std::string_view body = js.string();
    js.ws();
    if (!js.ok || js.p != js.end) return false;
    ct::safetensors::detail::unescaper u{body};
    n = 0;
    for (char c; u.next(c);) text[n++] = c;
    return true;
}

void print_json_string(std::string_view s) {
    std::putchar('"');
    for (const char ch : s) {
        const unsigned char c = static_cast<unsigned char>(ch);
        if (c == '"' || c == '\\') std::printf("\\%c", c);
        else if (c == '\n') std::fputs("\\n", stdout);
        else if (c == '\t') std::fputs("\\t", stdout);
        else if (c == '\r') std::fputs("\\r", stdout);
        else if (c < 0x20 || c == 0x7f) std::printf("\\u%04x", c);
        else std::putchar(ch);
    }
    std::putchar('"');
}

bool encode_line(std::string_view l, const ct::encode_options& o, long lineno) {
    std::size_t n = 0, count = 0;
    if (!read_string(l, n)) {
        std::fprintf(stderr, "line %ld: not a JSON string\n", lineno);
        return false;
    }
    const ct::status s = tok.encode({text, n}, ids, count, ws, o);
    if (!s) {
        std::fprintf(stderr, "line %ld: %s: %s\n", lineno, ct::to_string(s.code), s.tensor_name().data());
        return false;
    }
    std::putchar('[');
    for (std::size_t i = 0; i < count; ++i) std::printf(i ? ", %d" : "%d", ids[i]);
    std::puts("]");
    return true;
}

bool decode_line(std::string_view l, long lineno) {
    ct::safetensors::detail::json js{l.data(), l.data() + l.size()};
    ct::text_decoder dec(tok);
    static char out[4 * max_line];
    std::size_t n = 0;
    auto emit = [&](std::string_view s) {
        std::memcpy(out + n, s.data(), s.size());
        n += s.size();
    };
    bool ok = js.expect('[');
    if (ok && !js.eat(']')) {
        do {
            const std::uint64_t u = js.uint();
            if (!js.ok || u > 0x7fffffff) break;
            const long v = static_cast<long>(u);
            if (!dec.push(static_cast<ct::token>(v), emit)) {
                std::fprintf(stderr, "line %ld: id %ld is outside the vocabulary\n", lineno, v);
                return false;
            }
        } while (js.eat(','));
        ok = js.expect(']');
    }
    if (!ok || !js.ok) {
        std::fprintf(stderr, "line %ld: not a JSON array of ids\n", lineno);
        return false;
    }
    dec.finish(emit);
    print_json_string({out, n});
    std::putchar('\n');
    return true;
}
}  // namespace

int main(int argc, char** argv) {
    if (argc < 2) {
        std::fprintf(stderr, "usage: tokenize FILE [--decode] [--bos] [--eos] < lines\n");
        return 2;
    }
    bool decode = false;
    ct::encode_options o;
    for (int i = 2; i < argc; ++i) {
        const std::string_view a = argv[i];
        if (a == "--decode") decode = true;
        else if (a == "--bos") o.add_bos = true;
        else if (a == "--eos") o.add_eos = true;
        else return std::fprintf(stderr, "unknown option %s\n", argv[i]), 2;
    }
    static ct::mapped_file file;
    ct::status s = file.open(argv[1]);
    if (s) s = st_file.parse(file.bytes());
    if (s) s = ct::load_tokenizer(st_file, tok);
    if (!s) {
        std::fprintf(stderr, "%s: %s: %s\n", argv[1], ct::to_string(s.code), s.tensor_name().data());
        return 1;
    }
    bool all = true;
    long lineno = 0;
    while (std::fgets(line, sizeof line, stdin)) {
        ++lineno;
        std::size_t n = std::strlen(line);
        while (n && (line[n - 1] == '\n' || line[n - 1] == '\r')) --n;
        const std::string_view l(line, n);
        all = (decode ? decode_line(l, lineno) : encode_line(l, o, lineno)) && all;
    }
    return all ? 0 : 1;
}
