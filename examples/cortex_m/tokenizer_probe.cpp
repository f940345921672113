// The tokenizer's code size on the Cortex-M7 (examples/cortex_m/run.sh compiles this at -Os three
// times and reports the differences): PROBE_ENCODE adds encode, PROBE_DECODE the streaming decoder,
// neither: the tables' check alone (make_tokenizer). The tables are a generated header's constexpr
// data (SentencePiece BPE, 600 pieces): read-only data, reported apart from the code.
#include <cstddef>
#include <string_view>

#include <ctformer/text/load.hpp>

#include "sp_identity_tables.hpp"

namespace ct = ctformer;

static ct::tokenizer tok;
[[maybe_unused]] static ct::tokenizer::Workspace<256> ws;
[[maybe_unused]] static ct::token ids[256];

extern "C" int probe_make() { return ct::make_tokenizer(sp_identity_tables, sp_identity_metadata, tok).ok(); }
#ifdef PROBE_ENCODE
extern "C" int probe_encode(const char* s, unsigned n) {
    std::size_t c = 0;
    return tok.encode(std::string_view(s, n), ids, c, ws).ok() ? static_cast<int>(c) : -1;
}
#endif
#ifdef PROBE_DECODE
extern "C" int probe_decode(void (*out)(const char*, unsigned), unsigned n) {
    ct::text_decoder d(tok);
    int ok = 0;
    auto emit = [&](std::string_view s) { out(s.data(), static_cast<unsigned>(s.size())); };
    for (unsigned i = 0; i < n; ++i) ok += d.push(ids[i], emit).ok();
    d.finish(emit);
    return ok;
}
#endif
