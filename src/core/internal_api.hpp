// DCT_INTERNAL_API marks the few internals that libdct exports to its own tools (dct-bench,
// dct-ckpt: they link libdct through dct::internal) so that they show exactly what the library
// does: the checkpoint reader, the knob table, the cost model, the kernel backends, the codecs.
// libdct exports them under the version node DCT_PRIVATE (cmake/dct.map), apart from the C ABI
// (DCT_0): no compatibility promise, any release may change them, and only tools built and
// installed together with the library call them. Everything else in src/ stays hidden.
//
// Private header of src/: include it from library sources only.
#pragma once

#if defined(__GNUC__) || defined(__clang__)
#define DCT_INTERNAL_API __attribute__((visibility("default")))
#else
#define DCT_INTERNAL_API
#endif
