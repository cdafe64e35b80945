/* Optional accelerator for the log cleaner (tidelog/cleaner/core.py): the per-record work of a cleaning pass in C,
 * run with the GIL released so cleaner threads run in parallel with each other and with the broker's event loop.
 *
 * The pure-Python cleaner (cleaner.py, batch_filter.py, record_scan.py, offset_map.py) is the reference: every
 * function here gives byte-identical results. Anything this code is not sure to handle exactly as Python does (a
 * control or transactional batch, a malformed record, a non-ASCII header key, a varint beyond
 * 64 bits, a rebuilt batch above max.message.bytes) is not handled here: the chunk functions stop at that batch
 * with status NEED_PYTHON and the caller runs the Python code for it, so odd input always takes the Python path.
 *
 *   whole_batches_end(chunk) -> end of the complete batches at the start of chunk (protocol.record_batch.iter_batches)
 *   map_chunk(map, dirty, slots, entries, max_entries, latest, chunk, pos, end, start_offset[, inflater])
 *     -> (pos, status, entries, latest, records_read, lookups, probes)
 *   map_payload(map, dirty, slots, entries, max_entries, latest, records, base_offset, count, start_offset
 *               [, attributes, inflater])
 *     -> None (Python must map it) or (status, entries, latest, records_read, lookups, probes)
 *   filter_chunk(map, slots, latest, chunk, pos, end, out, out_pos, active, upper_bound, now, retention_ms,
 *                max_message_bytes, max_ts, offset_of_max_ts[, inflater, deflate])
 *     -> (pos, status, out_pos, last_offset, max_ts, offset_of_max_ts, messages_read, bytes_read,
 *         messages_written, bytes_written, invalid, lookups, probes)
 *   map_file(map, dirty, slots, entries, max_entries, latest, fd, pos, end, window, have, skip, chunk_rest, limit,
 *            start_offset[, inflater])
 *     -> (pos, have, chunk_rest, status, read, entries, latest, records_read, lookups, probes)
 *   filter_file(map, slots, latest, fd, pos, end, window, have, skip, chunk_rest, limit, out, out_pos, chunk_out,
 *               active, upper_bound, now, retention_ms, max_message_bytes, last_offset, max_ts, offset_of_max_ts
 *               [, inflater, deflate])
 *     -> (pos, have, chunk_rest, status, read, chunks, out_pos, chunk_out, last_offset, max_ts, offset_of_max_ts,
 *         messages_read, bytes_read, messages_written, bytes_written, invalid, lookups, probes)
 *     The file variants read a segment themselves (pread of a dup'ed fd) into `window`, in the chunks the Python
 *     reader reads, and go on from chunk to chunk up to `end` or `limit` bytes: a pass takes the GIL once per
 *     `limit` bytes instead of twice per chunk. window[:have] holds the file from pos, the chunk in progress ends
 *     at window[chunk_rest], and its first `skip` bytes are a batch Python handled. `read` counts the bytes read
 *     per chunk as Kafka's throttle does; `chunks` lists (out end, last offset, max timestamp, its offset) for
 *     each chunk finished with output, which the caller appends to the cleaned segment one chunk at a time as
 *     Kafka's cleanInto does (chunk_out: where the chunk in progress starts in out). Statuses beyond the chunk
 *     functions': PARTIAL (the batch at the start of a chunk is not whole in the window: Python's reader grows
 *     its buffer or fails) and IO_ERROR (raised as OSError).
 *   filter_payload(map, slots, latest, records, base_offset, count, base_ts, max_ts, attributes, now, horizon_if_new,
 *                  marker_for_empty_txn[, inflater])
 *     -> None (Python must decide) or (kept, all_kept, need_horizon, invalid, lookups, probes, records, base_ts,
 *        new_max_ts, horizon)  where records is the re-encoded records section (None when nothing needs rebuilding)
 *   set_window(bytes) -> the previous inflate window (for the tests)
 *   zero_dirty_blocks(map, dirty[, free_pages]) -> blocks zeroed   (SkimpyOffsetMap.clear; MADV_FREE after)
 *   md5(data) -> 16 bytes;  md5_many(keys) -> digests;  crc32c(data) -> int        (for the tests)
 *   gil_free_seconds() -> CPU seconds spent in this module with the GIL released (for bench/cleaner.py)
 *
 * `records` is a batch's records section as stored: compressed per `attributes`, it is read as a bounded stream
 * through `inflater` (record_stream.stream_inflater), never inflated whole (see "bounded inflate" below).
 *
 * The offset map is Kafka's SkimpyOffsetMap layout (offset_map.py): slots of 16 bytes of MD5(key) + a big-endian
 * int64 offset, the same probe sequence, so the C and Python code share one map.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <string.h>
#include <time.h>
#include <sys/mman.h>
#include <unistd.h>

#define HEADER_SIZE 61
#define LOG_OVERHEAD 12
#define SLOT_SIZE 24
#define HASH_SIZE 16

enum { DONE = 0, MAP_FULL = 1, NEED_PYTHON = 2, OUT_FULL = 3, PARTIAL = 4, IO_ERROR = 5 };

/* ------------------------------------------------------------------------------------------------ MD5 (RFC 1321) */

static uint32_t md5_k[64];

#define ROTL(x, s) (((x) << (s)) | ((x) >> (32 - (s))))
#define MF(x, y, z) ((z) ^ ((x) & ((y) ^ (z))))
#define MG(x, y, z) ((y) ^ ((z) & ((x) ^ (y))))
#define MH(x, y, z) ((x) ^ (y) ^ (z))
#define MI(x, y, z) ((y) ^ ((x) | ~(z)))
#define STEP(f, a, b, c, d, g, i, s) a += f(b, c, d) + w[g] + md5_k[i]; a = ROTL(a, s) + b;

/* The 64 steps of MD5 (RFC 1321 3.4), written once for the one-lane and the four-lane code: S(round function,
 * the four registers in turn, message word, constant index, shift). */
#define MD5_STEPS(S, F, G, H, I) \
    S(F, a, b, c, d, 0, 0, 7) S(F, d, a, b, c, 1, 1, 12) S(F, c, d, a, b, 2, 2, 17) \
    S(F, b, c, d, a, 3, 3, 22) S(F, a, b, c, d, 4, 4, 7) S(F, d, a, b, c, 5, 5, 12) \
    S(F, c, d, a, b, 6, 6, 17) S(F, b, c, d, a, 7, 7, 22) S(F, a, b, c, d, 8, 8, 7) \
    S(F, d, a, b, c, 9, 9, 12) S(F, c, d, a, b, 10, 10, 17) S(F, b, c, d, a, 11, 11, 22) \
    S(F, a, b, c, d, 12, 12, 7) S(F, d, a, b, c, 13, 13, 12) S(F, c, d, a, b, 14, 14, 17) \
    S(F, b, c, d, a, 15, 15, 22) S(G, a, b, c, d, 1, 16, 5) S(G, d, a, b, c, 6, 17, 9) \
    S(G, c, d, a, b, 11, 18, 14) S(G, b, c, d, a, 0, 19, 20) S(G, a, b, c, d, 5, 20, 5) \
    S(G, d, a, b, c, 10, 21, 9) S(G, c, d, a, b, 15, 22, 14) S(G, b, c, d, a, 4, 23, 20) \
    S(G, a, b, c, d, 9, 24, 5) S(G, d, a, b, c, 14, 25, 9) S(G, c, d, a, b, 3, 26, 14) \
    S(G, b, c, d, a, 8, 27, 20) S(G, a, b, c, d, 13, 28, 5) S(G, d, a, b, c, 2, 29, 9) \
    S(G, c, d, a, b, 7, 30, 14) S(G, b, c, d, a, 12, 31, 20) S(H, a, b, c, d, 5, 32, 4) \
    S(H, d, a, b, c, 8, 33, 11) S(H, c, d, a, b, 11, 34, 16) S(H, b, c, d, a, 14, 35, 23) \
    S(H, a, b, c, d, 1, 36, 4) S(H, d, a, b, c, 4, 37, 11) S(H, c, d, a, b, 7, 38, 16) \
    S(H, b, c, d, a, 10, 39, 23) S(H, a, b, c, d, 13, 40, 4) S(H, d, a, b, c, 0, 41, 11) \
    S(H, c, d, a, b, 3, 42, 16) S(H, b, c, d, a, 6, 43, 23) S(H, a, b, c, d, 9, 44, 4) \
    S(H, d, a, b, c, 12, 45, 11) S(H, c, d, a, b, 15, 46, 16) S(H, b, c, d, a, 2, 47, 23) \
    S(I, a, b, c, d, 0, 48, 6) S(I, d, a, b, c, 7, 49, 10) S(I, c, d, a, b, 14, 50, 15) \
    S(I, b, c, d, a, 5, 51, 21) S(I, a, b, c, d, 12, 52, 6) S(I, d, a, b, c, 3, 53, 10) \
    S(I, c, d, a, b, 10, 54, 15) S(I, b, c, d, a, 1, 55, 21) S(I, a, b, c, d, 8, 56, 6) \
    S(I, d, a, b, c, 15, 57, 10) S(I, c, d, a, b, 6, 58, 15) S(I, b, c, d, a, 13, 59, 21) \
    S(I, a, b, c, d, 4, 60, 6) S(I, d, a, b, c, 11, 61, 10) S(I, c, d, a, b, 2, 62, 15) \
    S(I, b, c, d, a, 9, 63, 21)

static void md5_block(uint32_t h[4], const uint8_t *p) {
    uint32_t w[16];
    for (int i = 0; i < 16; i++)
        w[i] = (uint32_t)p[4 * i] | (uint32_t)p[4 * i + 1] << 8 | (uint32_t)p[4 * i + 2] << 16 |
               (uint32_t)p[4 * i + 3] << 24;
    uint32_t a = h[0], b = h[1], c = h[2], d = h[3];
    MD5_STEPS(STEP, MF, MG, MH, MI)
    h[0] += a; h[1] += b; h[2] += c; h[3] += d;
}

static void md5(const uint8_t *p, size_t n, uint8_t out[16]) {
    uint32_t h[4] = {0x67452301u, 0xefcdab89u, 0x98badcfeu, 0x10325476u};
    uint64_t bits = (uint64_t)n * 8;
    while (n >= 64) {
        md5_block(h, p);
        p += 64;
        n -= 64;
    }
    uint8_t tail[128];
    memcpy(tail, p, n);
    tail[n] = 0x80;
    size_t total = n < 56 ? 64 : 128;
    memset(tail + n + 1, 0, total - n - 1);
    for (int i = 0; i < 8; i++)
        tail[total - 8 + i] = (uint8_t)(bits >> (8 * i));
    md5_block(h, tail);
    if (total == 128)
        md5_block(h, tail + 64);
    for (int i = 0; i < 4; i++) {
        out[4 * i] = (uint8_t)h[i];
        out[4 * i + 1] = (uint8_t)(h[i] >> 8);
        out[4 * i + 2] = (uint8_t)(h[i] >> 16);
        out[4 * i + 3] = (uint8_t)(h[i] >> 24);
    }
}

/* MD5 is one long dependency chain (each step needs the previous): a single hash leaves most of the CPU idle.
 * Keys of at most 55 bytes (one block) are hashed four at a time in the 32-bit lanes of SSE2 registers, which
 * every x86-64 CPU has; other keys, and other CPUs, use md5() above. */
#if defined(__x86_64__) && defined(__SSE2__)
#include <emmintrin.h>
#define HAVE_MD5_X4 1

#define VROTL(x, s) _mm_or_si128(_mm_slli_epi32((x), (s)), _mm_srli_epi32((x), 32 - (s)))
#define VF(x, y, z) _mm_xor_si128((z), _mm_and_si128((x), _mm_xor_si128((y), (z))))
#define VG(x, y, z) _mm_xor_si128((y), _mm_and_si128((z), _mm_xor_si128((x), (y))))
#define VH(x, y, z) _mm_xor_si128(_mm_xor_si128((x), (y)), (z))
#define VI(x, y, z) _mm_xor_si128((y), _mm_or_si128((x), _mm_xor_si128((z), ones)))
#define VSTEP(f, a, b, c, d, g, i, s)                                                                    \
    a = _mm_add_epi32(_mm_add_epi32(a, f(b, c, d)), _mm_add_epi32(w[g], _mm_set1_epi32((int)md5_k[i]))); \
    a = _mm_add_epi32(VROTL(a, s), b);

/* four single-block messages (already padded) -> four digests */
static void md5_block_x4(const uint8_t *blocks[4], uint8_t out[4][16]) {
    const __m128i ones = _mm_set1_epi32(-1);
    __m128i w[16];
    for (int j = 0; j < 16; j++) {
        uint32_t v[4];
        for (int l = 0; l < 4; l++)
            memcpy(&v[l], blocks[l] + 4 * j, 4); /* MD5 words are little-endian, as x86 */
        w[j] = _mm_set_epi32((int)v[3], (int)v[2], (int)v[1], (int)v[0]);
    }
    __m128i a = _mm_set1_epi32(0x67452301), b = _mm_set1_epi32((int)0xefcdab89u),
            c = _mm_set1_epi32((int)0x98badcfeu), d = _mm_set1_epi32(0x10325476);
    const __m128i a0 = a, b0 = b, c0 = c, d0 = d;
    MD5_STEPS(VSTEP, VF, VG, VH, VI)
    a = _mm_add_epi32(a, a0); b = _mm_add_epi32(b, b0); c = _mm_add_epi32(c, c0); d = _mm_add_epi32(d, d0);
    uint32_t h[4][4];
    _mm_storeu_si128((__m128i *)h[0], a);
    _mm_storeu_si128((__m128i *)h[1], b);
    _mm_storeu_si128((__m128i *)h[2], c);
    _mm_storeu_si128((__m128i *)h[3], d);
    for (int l = 0; l < 4; l++)
        for (int k = 0; k < 4; k++)
            memcpy(out[l] + 4 * k, &h[k][l], 4);
}

static void pad_block(uint8_t block[64], const uint8_t *key, size_t len) {
    memcpy(block, key, len);
    block[len] = 0x80;
    memset(block + len + 1, 0, 55 - len);
    uint64_t bits = (uint64_t)len * 8;
    for (int i = 0; i < 8; i++)
        block[56 + i] = (uint8_t)(bits >> (8 * i));
}
#endif

/* digests of n keys (n <= GROUP_MAX) */
#define GROUP_MAX 64
static void md5_many(const uint8_t *const *keys, const size_t *lens, int n, uint8_t (*out)[16]) {
#ifdef HAVE_MD5_X4
    uint8_t blocks[4][64];
    const uint8_t *lanes[4] = {blocks[0], blocks[1], blocks[2], blocks[3]};
    int which[4];
    int filled = 0;
    for (int i = 0; i < n; i++) {
        if (lens[i] > 55) {
            md5(keys[i], lens[i], out[i]);
            continue;
        }
        pad_block(blocks[filled], keys[i], lens[i]);
        which[filled++] = i;
        if (filled == 4) {
            uint8_t digests[4][16];
            md5_block_x4(lanes, digests);
            for (int l = 0; l < 4; l++)
                memcpy(out[which[l]], digests[l], 16);
            filled = 0;
        }
    }
    for (int l = 0; l < filled; l++)
        md5(keys[which[l]], lens[which[l]], out[which[l]]);
#else
    for (int i = 0; i < n; i++)
        md5(keys[i], lens[i], out[i]);
#endif
}

/* ------------------------------------------------------------------------------------------------ CRC-32C */

static uint32_t crc_table[8][256];

static uint32_t crc32c_sw(uint32_t crc, const uint8_t *p, size_t n) {
    while (n >= 8) {
        uint32_t lo = crc ^ ((uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24);
        crc = crc_table[7][lo & 0xFF] ^ crc_table[6][(lo >> 8) & 0xFF] ^ crc_table[5][(lo >> 16) & 0xFF] ^
              crc_table[4][lo >> 24] ^ crc_table[3][p[4]] ^ crc_table[2][p[5]] ^ crc_table[1][p[6]] ^
              crc_table[0][p[7]];
        p += 8;
        n -= 8;
    }
    while (n--)
        crc = crc_table[0][(crc ^ *p++) & 0xFF] ^ (crc >> 8);
    return crc;
}

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define HAVE_HW_CRC 1
__attribute__((target("sse4.2"))) static uint32_t crc32c_hw(uint32_t crc, const uint8_t *p, size_t n) {
    uint64_t c = crc;
    while (n >= 8) {
        uint64_t v;
        memcpy(&v, p, 8);
        c = __builtin_ia32_crc32di(c, v);
        p += 8;
        n -= 8;
    }
    uint32_t c32 = (uint32_t)c;
    while (n--)
        c32 = __builtin_ia32_crc32qi(c32, *p++);
    return c32;
}
#endif

static int use_hw_crc = 0;

static uint32_t crc32c(const uint8_t *p, size_t n) {
#ifdef HAVE_HW_CRC
    if (use_hw_crc)
        return ~crc32c_hw(0xFFFFFFFFu, p, n);
#endif
    return ~crc32c_sw(0xFFFFFFFFu, p, n);
}

/* ------------------------------------------------------------------------------------------------ byte helpers */

static inline int64_t be64(const uint8_t *p) {
    uint64_t v = 0;
    for (int i = 0; i < 8; i++)
        v = v << 8 | p[i];
    return (int64_t)v;
}
static inline int32_t be32(const uint8_t *p) {
    return (int32_t)((uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3]);
}
static inline int16_t be16(const uint8_t *p) { return (int16_t)((uint16_t)p[0] << 8 | p[1]); }
static inline void put64(uint8_t *p, int64_t v) {
    for (int i = 7; i >= 0; i--) {
        p[i] = (uint8_t)v;
        v = (int64_t)((uint64_t)v >> 8);
    }
}
static inline void put32(uint8_t *p, uint32_t v) {
    p[0] = (uint8_t)(v >> 24); p[1] = (uint8_t)(v >> 16); p[2] = (uint8_t)(v >> 8); p[3] = (uint8_t)v;
}
static inline void put16(uint8_t *p, uint16_t v) { p[0] = (uint8_t)(v >> 8); p[1] = (uint8_t)v; }

/* A zig-zag varint/varlong. 0: ok; -1: runs past `end` or does not fit 64 bits (the caller hands the batch to
 * Python, whose arbitrary-precision decode is the reference). */
static inline int read_varint(const uint8_t *d, size_t *p, size_t end, int64_t *out) {
    size_t q = *p;
    if (q < end && d[q] < 0x80) {
        uint64_t v = d[q];
        *out = (int64_t)(v >> 1) ^ -(int64_t)(v & 1);
        *p = q + 1;
        return 0;
    }
    uint64_t v = 0;
    for (int shift = 0; shift < 64; shift += 7) {
        if (q >= end)
            return -1;
        uint8_t b = d[q++];
        if (shift == 63 && b > 1)
            return -1;
        v |= (uint64_t)(b & 0x7F) << shift;
        if (b < 0x80) {
            *out = (int64_t)(v >> 1) ^ -(int64_t)(v & 1);
            *p = q;
            return 0;
        }
    }
    return -1;
}

static inline size_t write_varint(uint8_t *o, int64_t n) {
    uint64_t v = ((uint64_t)n << 1) ^ (uint64_t)(n >> 63);
    size_t k = 0;
    while (v > 0x7F) {
        o[k++] = (uint8_t)((v & 0x7F) | 0x80);
        v >>= 7;
    }
    o[k++] = (uint8_t)v;
    return k;
}

static inline size_t varint_size(int64_t n) {
    uint64_t v = ((uint64_t)n << 1) ^ (uint64_t)(n >> 63);
    size_t k = 1;
    while (v > 0x7F) {
        v >>= 7;
        k++;
    }
    return k;
}

/* CPU time this module's threads spent with the GIL released (bench/cleaner.py: how much of a pass can run in
 * parallel with other threads, whatever the machine's load). */
static int64_t gil_free_ns = 0;

static inline int64_t thread_cpu_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

#define RELEASE_GIL Py_BEGIN_ALLOW_THREADS int64_t cpu0_ = thread_cpu_ns();
#define ACQUIRE_GIL __atomic_fetch_add(&gil_free_ns, thread_cpu_ns() - cpu0_, __ATOMIC_RELAXED); Py_END_ALLOW_THREADS

/* The Python side of a core call that runs with the GIL released: the codec functions, and the state to take the
 * GIL back for a call to them (the codec libraries release it again while they work). */
typedef struct {
    PyThreadState **save;
    int64_t *cpu0;
    PyObject *inflater; /* record_stream.stream_inflater(codec, memoryview) -> an object with read(n) -> bytes,
                         * or the whole section as bytes */
    PyObject *deflate;  /* records.compress(codec, data) -> bytes */
} Codecs;

static void take_gil(const Codecs *cx) {
    __atomic_fetch_add(&gil_free_ns, thread_cpu_ns() - *cx->cpu0, __ATOMIC_RELAXED);
    PyEval_RestoreThread(*cx->save);
}

static void drop_gil(const Codecs *cx) {
    PyErr_Clear(); /* any error: the caller hands the batch to the Python code, which raises it again */
    *cx->save = PyEval_SaveThread();
    *cx->cpu0 = thread_cpu_ns();
}

/* cx->deflate(codec, memoryview of data) -> bytes, copied into *out (PyMem_RawMalloc: the caller frees). -1 on any
 * error. */
static int deflate_records(const Codecs *cx, int codec, const uint8_t *data, size_t len, uint8_t **out,
                           size_t *out_len) {
    take_gil(cx);
    int rc = -1;
    PyObject *view = PyMemoryView_FromMemory((char *)data, (Py_ssize_t)len, PyBUF_READ);
    PyObject *result = view != NULL ? PyObject_CallFunction(cx->deflate, "iO", codec, view) : NULL;
    Py_XDECREF(view);
    if (result != NULL && PyBytes_Check(result)) {
        size_t n = (size_t)PyBytes_GET_SIZE(result);
        *out = PyMem_RawMalloc(n ? n : 1);
        if (*out != NULL) {
            memcpy(*out, PyBytes_AS_STRING(result), n);
            *out_len = n;
            rc = 0;
        }
    }
    Py_XDECREF(result);
    drop_gil(cx);
    return rc;
}

/* ------------------------------------------------------------------------------------------------ bounded inflate */

/* A compressed records section is read as a bounded stream (record_stream.py, whose rules this follows): the
 * Python inflater (protocol/inflaters.py, the produce path's validator's) is pulled a read at a time into a window
 * of whole records. A section that inflates to at most the window comes whole, as before; a longer one comes as
 * runs of the whole records the window holds (a record longer than the window is held whole). */
static size_t window_size = 1024 * 1024; /* record_stream.WINDOW; set_window() for the tests */
#define READ_SIZE (256 * 1024)

typedef struct {
    const Codecs *cx;
    PyObject *view, *src;
    uint8_t *buf;
    size_t cap, pos, len; /* unread bytes: buf[pos:len] */
    int eof;
} Stream;

static int stream_open(Stream *s, const Codecs *cx, int codec, const uint8_t *data, size_t len) {
    memset(s, 0, sizeof(*s));
    s->cx = cx;
    take_gil(cx);
    s->view = PyMemoryView_FromMemory((char *)data, (Py_ssize_t)len, PyBUF_READ);
    s->src = s->view != NULL ? PyObject_CallFunction(cx->inflater, "iO", codec, s->view) : NULL;
    int rc = s->src != NULL ? 0 : -1;
    if (s->src != NULL && PyBytes_Check(s->src)) { /* the whole section, inflated within the window in one call */
        size_t n = (size_t)PyBytes_GET_SIZE(s->src);
        s->buf = PyMem_RawMalloc(n ? n : 1);
        if (s->buf != NULL) {
            memcpy(s->buf, PyBytes_AS_STRING(s->src), n);
            s->cap = s->len = n;
            s->eof = 1;
        }
        rc = s->buf != NULL ? 0 : -1;
        Py_CLEAR(s->src);
    }
    drop_gil(cx);
    return rc;
}

static void stream_close(Stream *s) {
    if (s->view != NULL || s->src != NULL) {
        take_gil(s->cx);
        Py_CLEAR(s->src);
        if (s->view != NULL) {
            PyObject *done = PyObject_CallMethod(s->view, "release", NULL);
            Py_XDECREF(done);
            Py_CLEAR(s->view);
        }
        drop_gil(s->cx);
    }
    PyMem_RawFree(s->buf);
    s->buf = NULL;
}

/* Hold at least `want` unread bytes, unless the stream ends first. -1: the codec failed (or out of memory). */
static int stream_pull(Stream *s, size_t want) {
    if (s->pos) {
        memmove(s->buf, s->buf + s->pos, s->len - s->pos);
        s->len -= s->pos;
        s->pos = 0;
    }
    if (s->len >= want || s->eof)
        return 0;
    int rc = 0;
    take_gil(s->cx);
    while (s->len < want && !s->eof) {
        size_t ask = want - s->len > READ_SIZE ? want - s->len : READ_SIZE;
        PyObject *chunk = PyObject_CallMethod(s->src, "read", "n", (Py_ssize_t)ask);
        if (chunk == NULL || !PyBytes_Check(chunk)) {
            Py_XDECREF(chunk);
            rc = -1;
            break;
        }
        size_t n = (size_t)PyBytes_GET_SIZE(chunk);
        if (n == 0) {
            s->eof = 1;
            Py_DECREF(chunk);
            break;
        }
        if (s->len + n > s->cap) {
            size_t cap = s->len + n < window_size + READ_SIZE ? window_size + READ_SIZE : s->len + n;
            uint8_t *grown = PyMem_RawRealloc(s->buf, cap);
            if (grown == NULL) {
                Py_DECREF(chunk);
                rc = -1;
                break;
            }
            s->buf = grown;
            s->cap = cap;
        }
        memcpy(s->buf + s->len, PyBytes_AS_STRING(chunk), n);
        s->len += n;
        Py_DECREF(chunk);
    }
    drop_gil(s->cx);
    return rc;
}

/* Open the stream and fill the window: 1 when the whole section is in it (buf[0:len]), 0 when it is longer, -1 on
 * a codec error. */
static int stream_start(Stream *s, const Codecs *cx, int codec, const uint8_t *data, size_t len) {
    if (stream_open(s, cx, codec, data, len) < 0 || stream_pull(s, window_size + 1) < 0)
        return -1;
    return s->eof;
}

/* The next run of at most `left` whole records: buf[pos:pos + *span] holds *n >= 1 of them. -1: the section is
 * malformed or cut short, or the codec failed. */
static int stream_records(Stream *s, int32_t left, size_t *span, int32_t *n) {
    for (;;) {
        const uint8_t *d = s->buf;
        size_t p = s->pos, end = s->len, need = 0;
        int32_t k = 0;
        while (k < left) {
            size_t q = p;
            int64_t length;
            if (read_varint(d, &q, end, &length) < 0) {
                if (end - p >= 10)
                    return -1;
                need = p - s->pos + 10;
                break;
            }
            if (length < 0)
                return -1;
            if ((uint64_t)length > end - q) {
                need = q - s->pos + (size_t)length;
                break;
            }
            p = q + (size_t)length;
            k++;
        }
        if (k > 0) {
            *span = p - s->pos;
            *n = k;
            return 0;
        }
        if (s->eof || stream_pull(s, need > window_size ? need : window_size) < 0)
            return -1;
    }
}

/* After RecordsCount records nothing may remain (DefaultRecordBatch's iterator). */
static int stream_end(Stream *s) {
    if (s->len > s->pos || stream_pull(s, 1) < 0)
        return -1;
    return s->len > s->pos ? -1 : 0;
}

/* ------------------------------------------------------------------------------------------------ offset map */

#define DIRTY_BLOCK 256 /* offset_map.DIRTY_BLOCK: the map marks the blocks it wrote, clear() zeroes those */

typedef struct {
    uint8_t *buf;
    uint8_t *dirty;  /* one byte per DIRTY_BLOCK of buf (NULL: the caller only reads) */
    int64_t slots;
    int64_t entries;
    int64_t lookups;
    int64_t probes;
} Map;

static inline int64_t probe_position(const Map *m, const uint8_t *digest, int64_t attempt) {
    int32_t value;
    if (attempt < HASH_SIZE - 3) {
        value = be32(digest + attempt);
    } else {
        value = (int32_t)((uint32_t)be32(digest + 12) + (uint32_t)(attempt - (HASH_SIZE - 4)));
    }
    int64_t v = value == INT32_MIN ? 0 : (value < 0 ? -(int64_t)value : value);
    return (v % m->slots) * SLOT_SIZE;
}

static inline int slot_is_empty(const uint8_t *s) {
    static const uint8_t zero[SLOT_SIZE];
    return memcmp(s, zero, SLOT_SIZE) == 0;
}

/* offset_map._find and the inlined first probe of put_digest/get_digest: the slot position, *found; -1 when the
 * table is exhausted. */
static int64_t map_find(Map *m, const uint8_t *digest, int *found) {
    m->lookups++;
    int64_t limit = m->slots + HASH_SIZE - 4;
    for (int64_t attempt = 0; attempt < limit; attempt++) {
        int64_t pos = probe_position(m, digest, attempt);
        m->probes++;
        const uint8_t *s = m->buf + pos;
        if (memcmp(s, digest, HASH_SIZE) == 0) {
            *found = 1;
            return pos;
        }
        if (slot_is_empty(s)) {
            *found = 0;
            return pos;
        }
    }
    *found = 0;
    return -1;
}

/* Keys are hashed a group at a time and their first slots prefetched before the first is probed: the slots are
 * random lines of a map of up to log.cleaner.dedupe.buffer.size, so each probe would otherwise wait for memory. */
#define GROUP 32 /* <= GROUP_MAX */

static inline void prefetch_slot(const Map *m, const uint8_t *digest) {
    __builtin_prefetch(m->buf + probe_position(m, digest, 0), 1, 0);
}

/* put of a hashed key; -1 when the map is full (Python raises OverflowError there: the caller hands the batch to
 * Python). */
static int map_put_digest(Map *m, const uint8_t *digest, int64_t offset) {
    if (m->entries >= m->slots)
        return -1;
    int found;
    int64_t pos = map_find(m, digest, &found);
    if (pos < 0)
        return -1;
    if (!found) {
        memcpy(m->buf + pos, digest, HASH_SIZE);
        m->entries++;
        m->dirty[pos / DIRTY_BLOCK] = 1;
        m->dirty[(pos + SLOT_SIZE - 1) / DIRTY_BLOCK] = 1;
    }
    put64(m->buf + pos + HASH_SIZE, offset);
    return 0;
}

static int64_t map_get_digest(Map *m, const uint8_t *digest) {
    int found;
    int64_t pos = map_find(m, digest, &found);
    if (pos < 0 || !found)
        return -1;
    return be64(m->buf + pos + HASH_SIZE);
}

/* ------------------------------------------------------------------------------------------------ batch header */

typedef struct {
    int64_t base_offset;
    int32_t length;
    int32_t leader_epoch;
    int8_t magic;
    int16_t attributes;
    int32_t last_offset_delta;
    int64_t base_ts;
    int64_t max_ts;
    int64_t producer_id;
    int16_t producer_epoch;
    int32_t base_sequence;
    int32_t count;
} Header;

static void read_header(const uint8_t *d, Header *h) {
    h->base_offset = be64(d);
    h->length = be32(d + 8);
    h->leader_epoch = be32(d + 12);
    h->magic = (int8_t)d[16];
    h->attributes = be16(d + 21);
    h->last_offset_delta = be32(d + 23);
    h->base_ts = be64(d + 27);
    h->max_ts = be64(d + 35);
    h->producer_id = be64(d + 43);
    h->producer_epoch = be16(d + 51);
    h->base_sequence = be32(d + 53);
    h->count = be32(d + 57);
}

/* iter_batches' rule: a complete batch with Length >= 49 */
static size_t whole_end(const uint8_t *d, size_t pos, size_t end) {
    while (end - pos >= HEADER_SIZE) {
        int32_t length = be32(d + pos + 8);
        if (length < HEADER_SIZE - LOG_OVERHEAD || (size_t)length + LOG_OVERHEAD > end - pos)
            break;
        pos += (size_t)length + LOG_OVERHEAD;
    }
    return pos;
}

/* base + any int32 delta (+1) fits int64 */
#define OFFSET_OK(b) ((b) >= 0 && (b) <= INT64_MAX - ((int64_t)1 << 32))
#define ATTR_CODEC 0x07
#define ATTR_LOG_APPEND 0x08
#define ATTR_TXN 0x10
#define ATTR_CONTROL 0x20
#define ATTR_HORIZON 0x40

/* ------------------------------------------------------------------------------------------------ map build */

typedef struct {
    int64_t records_read;
    int64_t latest;
    int64_t max_entries;
} MapRun;

/* record_scan.scan_records + the map build loop of Cleaner._build_offset_map_for_segment over one records section.
 * DONE, MAP_FULL (records_read counts the records before the one that did not fit) or NEED_PYTHON (nothing changed
 * that Python would not redo: the map is only written after the whole section scanned cleanly). */
static int scan_ok(const uint8_t *d, size_t end, int32_t count) {
    size_t p = 0;
    for (int32_t i = 0; i < count; i++) {
        int64_t length, v, key_len;
        if (read_varint(d, &p, end, &length) < 0 || length < 0 || (uint64_t)length > end - p)
            return 0;
        size_t start = p;
        p++; /* attributes */
        if (read_varint(d, &p, end, &v) < 0 || read_varint(d, &p, end, &v) < 0 || v < INT32_MIN || v > INT32_MAX ||
            read_varint(d, &p, end, &key_len) < 0 || key_len < -1)
            return 0;
        if (key_len >= 0) {
            if ((uint64_t)key_len > end - p)
                return 0;
            p += (size_t)key_len;
        }
        if (p >= end || p > start + (size_t)length)
            return 0;
        p = start + (size_t)length;
    }
    return p == end;
}

static int map_records(Map *m, MapRun *run, const uint8_t *d, size_t end, int64_t base_offset, int32_t count,
                       int64_t start_offset) {
    if (!scan_ok(d, end, count))
        return NEED_PYTHON;
    size_t p = 0;
    int32_t i = 0;
    uint8_t digests[GROUP][16];
    const uint8_t *keys[GROUP];
    size_t lens[GROUP];
    int64_t offsets[GROUP];
    int32_t read_before[GROUP]; /* records of the group before this one (the count when the map fills there) */
    while (i < count) {
        int n = 0;
        int32_t group_read = 0;
        for (; i < count && n < GROUP; i++) {
            int64_t length = 0, v = 0, delta = 0, key_len = 0;
            read_varint(d, &p, end, &length);
            size_t start = p;
            p++;
            read_varint(d, &p, end, &v);
            read_varint(d, &p, end, &delta);
            read_varint(d, &p, end, &key_len);
            int64_t offset = base_offset + delta;
            if (key_len >= 0 && offset >= start_offset) {
                keys[n] = d + p;
                lens[n] = (size_t)key_len;
                offsets[n] = offset;
                read_before[n] = group_read;
                n++;
            }
            group_read++;
            p = start + (size_t)length;
        }
        md5_many(keys, lens, n, digests);
        for (int k = 0; k < n; k++)
            prefetch_slot(m, digests[k]);
        for (int k = 0; k < n; k++) {
            if (m->entries >= run->max_entries) {
                run->records_read += read_before[k];
                return MAP_FULL;
            }
            if (map_put_digest(m, digests[k], offsets[k]) < 0)
                return NEED_PYTHON; /* cannot happen below max_entries; Python raises */
            run->latest = offsets[k];
        }
        run->records_read += group_read;
    }
    return DONE;
}

/* The map's slots (writable) and, for the map builders, its dirty-block bytes. */
static int get_map(PyObject *obj, Py_buffer *view, Map *m, long long slots, long long entries) {
    if (PyObject_GetBuffer(obj, view, PyBUF_WRITABLE) < 0)
        return -1;
    if (slots <= 0 || view->len < slots * SLOT_SIZE) {
        PyBuffer_Release(view);
        PyErr_SetString(PyExc_ValueError, "offset map buffer is smaller than its slots");
        return -1;
    }
    m->buf = view->buf;
    m->dirty = NULL;
    m->slots = slots;
    m->entries = entries;
    m->lookups = 0;
    m->probes = 0;
    return 0;
}

static int get_dirty(PyObject *obj, Py_buffer *view, Map *m) {
    if (PyObject_GetBuffer(obj, view, PyBUF_WRITABLE) < 0)
        return -1;
    if (view->len * DIRTY_BLOCK < m->slots * SLOT_SIZE) {
        PyBuffer_Release(view);
        PyErr_SetString(PyExc_ValueError, "dirty-block buffer is too small for the map");
        return -1;
    }
    m->dirty = view->buf;
    return 0;
}

/* The map build over one data batch's records, plain or compressed. A compressed section that fits the window is
 * mapped as a plain one; a longer one is read twice from the stream, checked whole first and then mapped, so that
 * NEED_PYTHON still leaves the map as it was (the price, a second inflate, only for sections over the window). */
static int map_batch(Map *m, MapRun *run, int codec, const uint8_t *records, size_t len, int64_t base_offset,
                     int32_t count, int64_t start_offset, const Codecs *cx) {
    if (!codec)
        return map_records(m, run, records, len, base_offset, count, start_offset);
    Stream s;
    int whole = stream_start(&s, cx, codec, records, len), status = NEED_PYTHON;
    if (whole == 1)
        status = map_records(m, run, s.buf, s.len, base_offset, count, start_offset);
    for (int pass = 0; whole == 0 && pass < 2; pass++) {
        if (pass == 1) {
            stream_close(&s);
            if (stream_open(&s, cx, codec, records, len) < 0) {
                status = NEED_PYTHON;
                break;
            }
        }
        int32_t left = count, n = 0;
        size_t span = 0;
        status = DONE;
        while (left > 0) {
            if (stream_records(&s, left, &span, &n) < 0) {
                status = NEED_PYTHON;
                break;
            }
            status = pass == 0 ? (scan_ok(s.buf + s.pos, span, n) ? DONE : NEED_PYTHON)
                               : map_records(m, run, s.buf + s.pos, span, base_offset, n, start_offset);
            if (status != DONE)
                break;
            s.pos += span;
            left -= n;
        }
        if (status != DONE || (pass == 0 && stream_end(&s) < 0)) {
            status = status == MAP_FULL ? MAP_FULL : NEED_PYTHON;
            break;
        }
    }
    stream_close(&s);
    return status;
}

/* The map and its dirty-block bytes, for the map builders: both views, or neither (-1, an error set). */
static int get_map_and_dirty(PyObject *map_obj, PyObject *dirty_obj, Py_buffer *mapview, Py_buffer *dirtyview, Map *m,
                             long long slots, long long entries) {
    if (get_map(map_obj, mapview, m, slots, entries) < 0)
        return -1;
    if (get_dirty(dirty_obj, dirtyview, m) < 0) {
        PyBuffer_Release(mapview);
        return -1;
    }
    return 0;
}

/* The data batches the chunk loops decide themselves (anything else goes to Python): magic 2, neither transactional
 * nor control, a record count and offsets that fit, and for a compressed one, the codec functions at hand. */
static int chunk_batch_ok(const Header *h, int have_codecs) {
    return !(h->attributes & (ATTR_TXN | ATTR_CONTROL)) && h->magic == 2 && h->count >= 0 &&
           OFFSET_OK(h->base_offset) && (!(h->attributes & ATTR_CODEC) || have_codecs);
}

/* The header of the (whole) batch at d; its size with the log overhead, and its codec. */
static inline int batch_at(const uint8_t *d, Header *h, size_t *size) {
    read_header(d, h);
    *size = (size_t)h->length + LOG_OVERHEAD;
    return h->attributes & ATTR_CODEC;
}

/* Map the whole batches of d[*pp, stop): DONE at stop, else MAP_FULL or NEED_PYTHON with *pp at that batch. */
static int map_range(Map *m, MapRun *run, const uint8_t *d, size_t *pp, size_t stop, int64_t start_offset,
                     const Codecs *cx) {
    size_t p = *pp;
    int status = DONE;
    while (p < stop) {
        Header h;
        size_t size;
        int codec = batch_at(d + p, &h, &size);
        if (!chunk_batch_ok(&h, cx->inflater != Py_None)) {
            status = NEED_PYTHON;
            break;
        }
        int64_t last_offset = h.base_offset + h.last_offset_delta;
        if (last_offset >= start_offset) {
            MapRun saved = *run;
            status = map_batch(m, run, codec, d + p + HEADER_SIZE, size - HEADER_SIZE, h.base_offset, h.count,
                               start_offset, cx);
            if (status == NEED_PYTHON) {
                *run = saved;
                break;
            }
            if (status == MAP_FULL)
                break;
            run->latest = last_offset;
        } else {
            run->records_read += h.count;
        }
        p += size;
    }
    *pp = p;
    return status;
}

static PyObject *py_map_chunk(PyObject *self, PyObject *args) {
    PyObject *map_obj, *dirty_obj, *inflate = Py_None;
    Py_buffer chunk;
    long long slots, entries, max_entries, latest, start_offset;
    Py_ssize_t pos, end;
    if (!PyArg_ParseTuple(args, "OOLLLLy*nnL|O", &map_obj, &dirty_obj, &slots, &entries, &max_entries, &latest,
                          &chunk, &pos, &end, &start_offset, &inflate))
        return NULL;
    Py_buffer mapview, dirtyview;
    Map m;
    if (pos < 0 || end > chunk.len || pos > end) {
        PyBuffer_Release(&chunk);
        PyErr_SetString(PyExc_ValueError, "bad chunk range");
        return NULL;
    }
    if (get_map_and_dirty(map_obj, dirty_obj, &mapview, &dirtyview, &m, slots, entries) < 0) {
        PyBuffer_Release(&chunk);
        return NULL;
    }
    MapRun run = {0, latest, max_entries};
    const uint8_t *d = chunk.buf;
    size_t p = (size_t)pos, stop = whole_end(d, (size_t)pos, (size_t)end);
    int status;
    RELEASE_GIL
    Codecs cx = {&_save, &cpu0_, inflate, Py_None};
    status = map_range(&m, &run, d, &p, stop, start_offset, &cx);
    ACQUIRE_GIL
    PyBuffer_Release(&dirtyview);
    PyBuffer_Release(&mapview);
    PyBuffer_Release(&chunk);
    return Py_BuildValue("niLLLLL", (Py_ssize_t)p, status, (long long)m.entries, (long long)run.latest,
                         (long long)run.records_read, (long long)m.lookups, (long long)m.probes);
}

static PyObject *py_map_payload(PyObject *self, PyObject *args) {
    PyObject *map_obj, *dirty_obj, *inflate = Py_None;
    Py_buffer payload;
    long long slots, entries, max_entries, latest, base_offset, start_offset;
    int count, attributes = 0;
    if (!PyArg_ParseTuple(args, "OOLLLLy*LiL|iO", &map_obj, &dirty_obj, &slots, &entries, &max_entries, &latest,
                          &payload, &base_offset, &count, &start_offset, &attributes, &inflate))
        return NULL;
    Py_buffer mapview, dirtyview;
    Map m;
    if (get_map_and_dirty(map_obj, dirty_obj, &mapview, &dirtyview, &m, slots, entries) < 0) {
        PyBuffer_Release(&payload);
        return NULL;
    }
    MapRun run = {0, latest, max_entries};
    int status, codec = attributes & ATTR_CODEC;
    RELEASE_GIL
    Codecs cx = {&_save, &cpu0_, inflate, Py_None};
    status = count < 0 || !OFFSET_OK(base_offset) || (codec && inflate == Py_None)
                 ? NEED_PYTHON
                 : map_batch(&m, &run, codec, payload.buf, (size_t)payload.len, base_offset, count, start_offset, &cx);
    ACQUIRE_GIL
    PyBuffer_Release(&dirtyview);
    PyBuffer_Release(&mapview);
    PyBuffer_Release(&payload);
    if (status == NEED_PYTHON)
        Py_RETURN_NONE;
    return Py_BuildValue("iLLLLL", status, (long long)m.entries, (long long)run.latest, (long long)run.records_read,
                         (long long)m.lookups, (long long)m.probes);
}

/* ------------------------------------------------------------------------------------------------ filter */

typedef struct {
    size_t start;    /* record start (after its length varint) */
    size_t end;      /* record end */
    int64_t ts;      /* absolute timestamp as iter_records reads it */
    int64_t delta;   /* offset delta */
    size_t key, key_len; int key_null;
    size_t val, val_len; int val_null;
    int tombstone;   /* record_scan's test: the value length's first byte is 0x01 */
    size_t hdr, hdr_len; int64_t hdr_count; /* headers section [hdr, hdr + hdr_len) as written (re-encoded below) */
} Rec;

typedef struct {
    int64_t kept;
    int all_kept;
    int tombstones;
    int64_t invalid;
    int64_t first_ts_kept;
    int first_set;
    int64_t max_ts_kept;
    size_t out_size;       /* size of the re-encoded records section */
} Decision;

/* A key or a value: a varint length (-1: null) and that many bytes, inside [*q, rend). -1: odd. */
static inline int read_blob(const uint8_t *d, size_t *q, size_t rend, size_t *at, size_t *len, int *is_null) {
    int64_t n;
    if (read_varint(d, q, rend, &n) < 0 || n < -1)
        return -1;
    *is_null = n < 0;
    *at = *q;
    *len = n < 0 ? 0 : (size_t)n;
    if (*len > rend - *q)
        return -1;
    *q += *len;
    return 0;
}

/* A key or a value as encode_record writes it (a null one as varint -1); the size only when o is NULL. */
static inline size_t write_blob(uint8_t *o, const uint8_t *d, size_t at, size_t len, int is_null) {
    if (is_null) {
        if (o)
            o[0] = 0x01;
        return 1;
    }
    if (!o)
        return varint_size((int64_t)len) + len;
    size_t n = write_varint(o, (int64_t)len);
    memcpy(o + n, d + at, len);
    return n + len;
}

/* Parse one record the way iter_records does, requiring every field inside the record and the record's length
 * to match its fields; header keys must be ASCII (Python decodes and re-encodes them as UTF-8). 0 ok, -1: odd. */
static int parse_record(const uint8_t *d, size_t *p, size_t end, int64_t base_ts, int log_append, int64_t max_ts,
                        Rec *r) {
    int64_t length, tsd, delta, count;
    if (read_varint(d, p, end, &length) < 0 || length < 0 || (uint64_t)length > end - *p)
        return -1;
    size_t start = *p, rend = start + (size_t)length;
    size_t q = start + 1;
    if (q > rend)
        return -1;
    if (read_varint(d, &q, rend, &tsd) < 0 || read_varint(d, &q, rend, &delta) < 0 || delta < INT32_MIN ||
        delta > INT32_MAX)
        return -1;
    const int64_t lim = (int64_t)1 << 61;
    if (tsd > lim || tsd < -lim || base_ts > lim || base_ts < -lim || max_ts > lim || max_ts < -lim)
        return -1;
    if (read_blob(d, &q, rend, &r->key, &r->key_len, &r->key_null) < 0 || q >= rend)
        return -1;
    r->tombstone = d[q] == 0x01;
    if (read_blob(d, &q, rend, &r->val, &r->val_len, &r->val_null) < 0)
        return -1;
    r->hdr = q;
    if (read_varint(d, &q, rend, &count) < 0 || count < 0)
        return -1;
    for (int64_t i = 0; i < count; i++) {
        int64_t hk, hv;
        if (read_varint(d, &q, rend, &hk) < 0 || hk < 0 || (uint64_t)hk > rend - q)
            return -1;
        for (int64_t j = 0; j < hk; j++)
            if (d[q + j] >= 0x80)
                return -1;
        q += (size_t)hk;
        if (read_varint(d, &q, rend, &hv) < 0 || hv < -1)
            return -1;
        if (hv >= 0) {
            if ((uint64_t)hv > rend - q)
                return -1;
            q += (size_t)hv;
        }
    }
    if (q != rend)
        return -1;
    r->hdr_len = q - r->hdr;
    r->hdr_count = count;
    r->start = start;
    r->end = rend;
    r->ts = log_append ? max_ts : base_ts + tsd;
    r->delta = delta;
    *p = rend;
    return 0;
}

/* Re-encode a record's headers canonically (encode_record writes minimal varints); returns bytes written, or the
 * size only when o is NULL. */
static size_t encode_headers(const uint8_t *d, const Rec *r, uint8_t *o) {
    size_t q = r->hdr, n = 0;
    int64_t count = 0, hk = 0, hv = 0;
    read_varint(d, &q, r->end, &count);
    n += o ? write_varint(o + n, count) : varint_size(count);
    for (int64_t i = 0; i < count; i++) {
        read_varint(d, &q, r->end, &hk);
        n += o ? write_varint(o + n, hk) : varint_size(hk);
        if (o)
            memcpy(o + n, d + q, (size_t)hk);
        n += (size_t)hk;
        q += (size_t)hk;
        read_varint(d, &q, r->end, &hv);
        if (hv < 0) {
            if (o)
                o[n] = 0x01;
            n++;
        } else {
            n += o ? write_varint(o + n, hv) : varint_size(hv);
            if (o)
                memcpy(o + n, d + q, (size_t)hv);
            n += (size_t)hv;
            q += (size_t)hv;
        }
    }
    return n;
}

static size_t record_body_size(const uint8_t *d, const Rec *r, int64_t ts_delta) {
    return 1 + varint_size(ts_delta) + varint_size(r->delta) + write_blob(NULL, d, r->key, r->key_len, r->key_null) +
           write_blob(NULL, d, r->val, r->val_len, r->val_null) + encode_headers(d, r, NULL);
}

static size_t encode_record(const uint8_t *d, const Rec *r, int64_t ts_delta, uint8_t *o) {
    size_t body = record_body_size(d, r, ts_delta);
    size_t n = write_varint(o, (int64_t)body);
    o[n++] = 0;
    n += write_varint(o + n, ts_delta);
    n += write_varint(o + n, r->delta);
    n += write_blob(o + n, d, r->key, r->key_len, r->key_null);
    n += write_blob(o + n, d, r->val, r->val_len, r->val_null);
    n += encode_headers(d, r, o + n);
    return n;
}

typedef struct {
    int64_t base_offset;
    int64_t base_ts;
    int64_t max_ts;
    int is_control;
    int log_append;
    int horizon_passed;   /* has a delete horizon and now >= it */
    int has_horizon;
    int64_t old_horizon;
    int64_t new_horizon;  /* now + delete.retention.ms */
    int marker_for_empty_txn;
    int64_t latest;       /* the map's latest offset */
} FilterArgs;

static void decision_init(Decision *dec) {
    memset(dec, 0, sizeof(*dec));
    dec->all_kept = 1;
    dec->max_ts_kept = -1;
}

/* The per-record decision of BatchFilter.filter (Kafka's shouldRetainRecord) over `count` whole records filling
 * d[0:end]: keep[i] for each, the totals added to dec; *prev_delta carries the offset order across the runs of one
 * batch. -1: hand to Python. */
static int decide_records(Map *m, const uint8_t *d, size_t end, int32_t count, const FilterArgs *a, Decision *dec,
                          uint8_t *keep, int64_t *prev_delta_io) {
    size_t p = 0;
    int64_t prev_delta = *prev_delta_io;
    Rec recs[GROUP];
    uint8_t digests[GROUP][16], hashed[GROUP][16];
    const uint8_t *keys[GROUP];
    size_t lens[GROUP];
    int slot_of[GROUP];
    int32_t i = 0;
    while (i < count) {
        int n = 0, nk = 0;
        for (; i < count && n < GROUP; i++, n++) {
            Rec *q = &recs[n];
            if (parse_record(d, &p, end, a->base_ts, a->log_append, a->max_ts, q) < 0)
                return -1;
            if (q->delta <= prev_delta)
                return -1; /* Python keeps records by offset: duplicates would keep each other */
            prev_delta = q->delta;
            if (!a->is_control && a->base_offset + q->delta <= a->latest && !q->key_null) {
                keys[nk] = d + q->key;
                lens[nk] = q->key_len;
                slot_of[nk++] = n;
            }
        }
        md5_many(keys, lens, nk, hashed);
        for (int k = 0; k < nk; k++) {
            memcpy(digests[slot_of[k]], hashed[k], 16);
            prefetch_slot(m, hashed[k]);
        }
        for (int k = 0; k < n; k++) {
            const Rec *q = &recs[k];
            int64_t offset = a->base_offset + q->delta;
            int retain;
            if (a->is_control || offset > a->latest) {
                retain = 1;
            } else if (q->key_null) {
                dec->invalid++;
                retain = 0;
            } else if (offset < map_get_digest(m, digests[k])) {
                retain = 0;
            } else {
                retain = !(q->tombstone && a->horizon_passed);
            }
            keep[i - n + k] = (uint8_t)retain;
            if (retain) {
                dec->kept++;
                if (q->tombstone)
                    dec->tombstones = 1;
                if (!dec->first_set) {
                    dec->first_set = 1;
                    dec->first_ts_kept = q->ts;
                }
                if (q->ts > dec->max_ts_kept)
                    dec->max_ts_kept = q->ts;
            } else {
                dec->all_kept = 0;
            }
        }
    }
    *prev_delta_io = prev_delta;
    return p == end ? 0 : -1;
}

/* The rebuilt records section once a batch's records are decided: the kept ones of the `count` records filling
 * d[0:end] (keep NULL: all of them) re-encoded against the new base timestamp, into out (cap), or when out is NULL
 * into *alloc (allocated here, the caller frees). Nothing is written unless *rebuild. -1: hand to Python; -2: out
 * too small. */
static int encode_kept(const uint8_t *d, size_t end, int32_t count, const uint8_t *keep, const FilterArgs *a,
                       Decision *dec, int *rebuild, int64_t *new_base_ts, int64_t *horizon_out, uint8_t *out,
                       size_t cap, uint8_t **alloc) {
    Rec r;
    size_t p;
    int need_horizon = (dec->tombstones || a->marker_for_empty_txn) && !a->has_horizon;
    *rebuild = dec->kept > 0 && !(dec->all_kept && !need_horizon);
    if (!*rebuild)
        return 0;
    int64_t horizon = need_horizon ? a->new_horizon : (a->has_horizon ? a->old_horizon : -1);
    *horizon_out = horizon;
    int64_t base_ts = horizon >= 0 ? horizon : dec->first_ts_kept;
    int64_t origin = base_ts != -1 ? base_ts : 0;
    if (origin > ((int64_t)1 << 62) || origin < -((int64_t)1 << 62))
        return -1;
    *new_base_ts = base_ts;
    if (out == NULL) {
        cap = end * 2 + (size_t)count * 24 + 64;
        out = *alloc = PyMem_RawMalloc(cap);
        if (out == NULL)
            return -1;
    }
    size_t n = 0;
    p = 0;
    for (int32_t i = 0; i < count; i++) {
        parse_record(d, &p, end, a->base_ts, a->log_append, a->max_ts, &r);
        if (keep != NULL && !keep[i])
            continue;
        int64_t tsd = r.ts - origin;
        size_t body = record_body_size(d, &r, tsd);
        if (n + body + 10 > cap)
            return -2;
        n += encode_record(d, &r, tsd, out + n);
    }
    dec->out_size = n;
    return 0;
}

/* BatchFilter.filter's record loop for one batch, plain or compressed: decided, and the kept records re-encoded when
 * the batch must be rebuilt, into `target` (cap) for a plain batch when given, else into *rebuilt (allocated here:
 * the caller frees). `keep` has a byte per record of a plain batch. A compressed section that fits the window is
 * decided as a plain one; a longer one is decided run by run from the stream, its kept records copied aside as they
 * stand (all that grows is what is retained) and re-encoded from there once the batch is decided. -1: hand to
 * Python; -2: target too small. */
static int filter_batch(Map *m, const FilterArgs *a, int codec, int32_t count, const uint8_t *records, size_t len,
                        const Codecs *cx, uint8_t *keep, Decision *dec, int *rebuild, int64_t *new_base_ts,
                        int64_t *horizon, uint8_t *target, size_t target_cap, uint8_t **rebuilt) {
    int64_t prev_delta = INT64_MIN;
    *rebuilt = NULL;
    decision_init(dec);
    if (!codec) {
        if (decide_records(m, records, len, count, a, dec, keep, &prev_delta) < 0)
            return -1;
        return encode_kept(records, len, count, keep, a, dec, rebuild, new_base_ts, horizon, target, target_cap,
                           rebuilt);
    }
    Stream s;
    uint8_t *run_keep = NULL, *retained = NULL;
    size_t keep_cap = 0, retained_len = 0, retained_cap = 0;
    int whole = stream_start(&s, cx, codec, records, len), rc = -1;
    if (whole == 1 && (size_t)count <= s.len && (run_keep = PyMem_RawMalloc((size_t)count + 1)) != NULL &&
        decide_records(m, s.buf, s.len, count, a, dec, run_keep, &prev_delta) == 0)
        rc = encode_kept(s.buf, s.len, count, run_keep, a, dec, rebuild, new_base_ts, horizon, NULL, 0, rebuilt);
    if (whole == 0) {
        int32_t left = count, n = 0;
        size_t span = 0;
        rc = 0;
        while (rc == 0 && left > 0) {
            if (stream_records(&s, left, &span, &n) < 0)
                rc = -1;
            else if ((size_t)n > keep_cap) {
                uint8_t *grown = PyMem_RawRealloc(run_keep, (size_t)n);
                rc = grown == NULL ? -1 : 0;
                run_keep = grown != NULL ? grown : run_keep;
                keep_cap = grown != NULL ? (size_t)n : keep_cap;
            }
            if (rc == 0)
                rc = decide_records(m, s.buf + s.pos, span, n, a, dec, run_keep, &prev_delta);
            /* the kept records of the run, as they stand (length varint and all) */
            for (int32_t i = 0; rc == 0 && i < n; i++) {
                size_t q = s.pos;
                int64_t length = 0;
                read_varint(s.buf, &q, s.len, &length);
                size_t size = q - s.pos + (size_t)length;
                if (run_keep[i] && retained_len + size > retained_cap) {
                    size_t grown_cap = 2 * retained_cap > retained_len + size ? 2 * retained_cap : retained_len + size;
                    uint8_t *grown = PyMem_RawRealloc(retained, grown_cap);
                    if (grown == NULL) {
                        rc = -1;
                        break;
                    }
                    retained = grown;
                    retained_cap = grown_cap;
                }
                if (run_keep[i]) {
                    memcpy(retained + retained_len, s.buf + s.pos, size);
                    retained_len += size;
                }
                s.pos += size;
            }
            left -= n;
        }
        if (rc == 0 && stream_end(&s) == 0)
            rc = encode_kept(retained, retained_len, (int32_t)dec->kept, NULL, a, dec, rebuild, new_base_ts, horizon,
                             NULL, 0, rebuilt);
        else
            rc = -1;
    }
    stream_close(&s);
    PyMem_RawFree(run_keep);
    PyMem_RawFree(retained);
    if (rc < 0) {
        PyMem_RawFree(*rebuilt);
        *rebuilt = NULL;
    }
    return rc;
}

static void write_batch_header(uint8_t *o, const Header *h, int32_t length, int16_t attributes, int64_t base_ts,
                               int64_t max_ts, int32_t count) {
    put64(o, h->base_offset);
    put32(o + 8, (uint32_t)length);
    put32(o + 12, (uint32_t)h->leader_epoch);
    o[16] = 2;
    put16(o + 21, (uint16_t)attributes);
    put32(o + 23, (uint32_t)h->last_offset_delta);
    put64(o + 27, base_ts);
    put64(o + 35, max_ts);
    put64(o + 43, h->producer_id);
    put16(o + 51, (uint16_t)h->producer_epoch);
    put32(o + 53, (uint32_t)h->base_sequence);
    put32(o + 57, (uint32_t)count);
    put32(o + 17, crc32c(o + 21, (size_t)length + LOG_OVERHEAD - 21));
}

/* _is_last_batch_of_active_producer for a data batch: active holds sorted (producer id, last data offset) pairs */
static int last_batch_of_active(const int64_t *active, size_t n, int64_t pid, int64_t last_offset) {
    size_t lo = 0, hi = n;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (active[2 * mid] < pid)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < n && active[2 * lo] == pid && active[2 * lo + 1] == last_offset;
}

typedef struct {
    int64_t messages_read, bytes_read, messages_written, bytes_written, invalid;
    int64_t last_offset, max_ts, offset_of_max_ts;
} FilterTotals;

/* One batch read (size bytes) and what was written of it: `written` bytes holding dec->kept records, last offset
 * and max timestamp of the batch written (nothing when written is 0). */
static void note_batch(FilterTotals *t, const Header *h, size_t size, const Decision *dec, size_t written,
                       int64_t last_offset, int64_t max_ts) {
    t->messages_read += h->count;
    t->bytes_read += (int64_t)size;
    t->invalid += dec->invalid;
    t->messages_written += dec->kept;
    t->bytes_written += (int64_t)written;
    if (!written)
        return;
    t->last_offset = last_offset;
    if (max_ts > t->max_ts) {
        t->max_ts = max_ts;
        t->offset_of_max_ts = last_offset;
    }
}

/* The state of a filter loop: the map, the output buffer, the totals, and the pass's constants. */
typedef struct {
    Map *m;
    const Codecs *cx;
    FilterTotals *t;
    uint8_t *out;
    size_t cap, o;
    uint8_t *keep; /* per-record keep flags, one per byte of the longest batch (a batch holds no more records) */
    const int64_t *act;
    size_t nact;
    int64_t latest, upper_bound, now, retention, max_message_bytes;
} FilterRun;

/* Clean the whole batches of d[*pp, stop) into f->out: DONE at stop, else OUT_FULL or NEED_PYTHON with *pp at that
 * batch. */
static int filter_range(FilterRun *f, const uint8_t *d, size_t *pp, size_t stop) {
    Map *m = f->m;
    const Codecs *cx = f->cx;
    FilterTotals *t = f->t;
    uint8_t *out = f->out;
    size_t cap = f->cap, o = f->o, p = *pp;
    int status = DONE;
    while (p < stop) {
        Header h;
        size_t size;
        int codec = batch_at(d + p, &h, &size);
        if (!chunk_batch_ok(&h, cx->inflater != Py_None && cx->deflate != Py_None) ||
            (!codec && (size_t)h.count > size)) {
            status = NEED_PYTHON;
            break;
        }
        if (o + size + 64 > cap) {
            status = OUT_FULL;
            break;
        }
        int64_t last_offset = h.base_offset + h.last_offset_delta;
        int retain_empty = (h.producer_id >= 0 && last_batch_of_active(f->act, f->nact, h.producer_id, last_offset)) ||
                           last_offset + 1 == f->upper_bound;
        int has_horizon = (h.attributes & ATTR_HORIZON) != 0;
        FilterArgs a = {h.base_offset, h.base_ts, h.max_ts, 0, (h.attributes & ATTR_LOG_APPEND) != 0,
                        has_horizon && f->now >= h.base_ts, has_horizon, h.base_ts, f->now + f->retention, 0,
                        f->latest};
        Decision dec;
        int rebuild;
        int64_t new_base_ts = -1, horizon = -1, lookups = m->lookups, probes = m->probes;
        /* a compressed batch: inflated as a bounded stream, its records decided here, a rebuilt records section
         * deflated again with the batch's codec (MemoryRecords.filterTo keeps the codec) */
        uint8_t *rebuilt = NULL, *deflated = NULL;
        uint8_t *target = codec ? NULL : out + o + HEADER_SIZE;
        int rc = filter_batch(m, &a, codec, h.count, d + p + HEADER_SIZE, size - HEADER_SIZE, cx, f->keep, &dec,
                              &rebuild, &new_base_ts, &horizon, target, codec ? 0 : cap - o - HEADER_SIZE, &rebuilt);
        const uint8_t *body = target;
        size_t body_len = rc == 0 && rebuild ? dec.out_size : 0;
        if (rc == 0 && rebuild && codec && deflate_records(cx, codec, rebuilt, dec.out_size, &deflated, &body_len) < 0)
            rc = -1;
        if (deflated != NULL)
            body = deflated;
        size_t bsize = HEADER_SIZE + body_len;
        if (rc == 0 && rebuild && bsize > (size_t)f->max_message_bytes)
            rc = -1; /* Python rebuilds it and logs the warning */
        if (rc == 0 && rebuild && o + bsize > cap)
            rc = -2;
        if (rc < 0) {
            m->lookups = lookups; /* Python (or the next call) looks this batch's keys up again */
            m->probes = probes;
            status = rc == -2 ? OUT_FULL : NEED_PYTHON;
        } else if (rebuild) {
            if (codec)
                memcpy(out + o + HEADER_SIZE, body, body_len);
            int64_t bmax = h.attributes & ATTR_LOG_APPEND ? h.max_ts : dec.max_ts_kept;
            int16_t attrs = (int16_t)(h.attributes & (ATTR_CODEC | ATTR_LOG_APPEND | ATTR_TXN | ATTR_CONTROL));
            if (horizon >= 0)
                attrs |= ATTR_HORIZON;
            write_batch_header(out + o, &h, (int32_t)(bsize - LOG_OVERHEAD), attrs, new_base_ts, bmax,
                               (int32_t)dec.kept);
            o += bsize;
            note_batch(t, &h, size, &dec, bsize, last_offset, bmax);
        } else if (dec.kept > 0) {
            memcpy(out + o, d + p, size);
            o += size;
            note_batch(t, &h, size, &dec, size, last_offset, h.max_ts);
        } else if (retain_empty) {
            int16_t attrs = (int16_t)(h.attributes & (ATTR_LOG_APPEND | ATTR_TXN | ATTR_CONTROL));
            write_batch_header(out + o, &h, HEADER_SIZE - LOG_OVERHEAD, attrs, -1, h.max_ts, 0);
            o += HEADER_SIZE;
            note_batch(t, &h, size, &dec, HEADER_SIZE, last_offset, h.max_ts);
        } else {
            note_batch(t, &h, size, &dec, 0, last_offset, h.max_ts);
        }
        PyMem_RawFree(rebuilt);
        PyMem_RawFree(deflated);
        if (rc < 0)
            break;
        p += size;
    }
    f->o = o;
    *pp = p;
    return status;
}

static PyObject *py_filter_chunk(PyObject *self, PyObject *args) {
    PyObject *map_obj, *out_obj, *inflate = Py_None, *deflate = Py_None;
    Py_buffer chunk, active;
    long long slots, latest, upper_bound, now, retention, max_message_bytes, max_ts, offset_of_max_ts;
    Py_ssize_t pos, end, out_pos;
    if (!PyArg_ParseTuple(args, "OLLy*nnOny*LLLLLL|OO", &map_obj, &slots, &latest, &chunk, &pos, &end, &out_obj,
                          &out_pos, &active, &upper_bound, &now, &retention, &max_message_bytes, &max_ts,
                          &offset_of_max_ts, &inflate, &deflate))
        return NULL;
    Py_buffer mapview, outview;
    Map m;
    if (pos < 0 || end > chunk.len || pos > end || active.len % 16) {
        PyBuffer_Release(&chunk);
        PyBuffer_Release(&active);
        PyErr_SetString(PyExc_ValueError, "bad chunk range or active producers");
        return NULL;
    }
    if (get_map(map_obj, &mapview, &m, slots, 0) < 0) {
        PyBuffer_Release(&chunk);
        PyBuffer_Release(&active);
        return NULL;
    }
    if (PyObject_GetBuffer(out_obj, &outview, PyBUF_WRITABLE) < 0) {
        PyBuffer_Release(&mapview);
        PyBuffer_Release(&chunk);
        PyBuffer_Release(&active);
        return NULL;
    }
    /* per-record keep flags: a batch cannot hold more records than bytes */
    uint8_t *keep = out_pos >= 0 && out_pos <= outview.len ? PyMem_RawMalloc((size_t)chunk.len + 1) : NULL;
    if (keep == NULL) {
        int bad = out_pos < 0 || out_pos > outview.len;
        PyBuffer_Release(&outview);
        PyBuffer_Release(&mapview);
        PyBuffer_Release(&chunk);
        PyBuffer_Release(&active);
        return bad ? PyErr_Format(PyExc_ValueError, "bad out_pos") : PyErr_NoMemory();
    }
    FilterTotals t = {0, 0, 0, 0, 0, -1, max_ts, offset_of_max_ts};
    FilterRun f = {&m, NULL, &t, outview.buf, (size_t)outview.len, (size_t)out_pos, keep, active.buf,
                   (size_t)active.len / 16, latest, upper_bound, now, retention, max_message_bytes};
    const uint8_t *d = chunk.buf;
    size_t p = (size_t)pos, stop = whole_end(d, (size_t)pos, (size_t)end);
    int status;
    RELEASE_GIL
    Codecs cx = {&_save, &cpu0_, inflate, deflate};
    f.cx = &cx;
    status = filter_range(&f, d, &p, stop);
    ACQUIRE_GIL
    PyMem_RawFree(keep);
    PyBuffer_Release(&outview);
    PyBuffer_Release(&mapview);
    PyBuffer_Release(&chunk);
    PyBuffer_Release(&active);
    return Py_BuildValue("ninLLLLLLLLLL", (Py_ssize_t)p, status, (Py_ssize_t)f.o, (long long)t.last_offset,
                         (long long)t.max_ts, (long long)t.offset_of_max_ts, (long long)t.messages_read,
                         (long long)t.bytes_read, (long long)t.messages_written, (long long)t.bytes_written,
                         (long long)t.invalid, (long long)m.lookups, (long long)m.probes);
}

/* ------------------------------------------------------------------------------------------------ file passes */

/* A segment read straight from its file, in the chunks the Python reader (Cleaner._chunks) and Kafka's Cleaner
 * read: the window is filled to its size from the end of the previous chunk, and the chunk is its whole batches.
 * window[0, have) holds the file from pos; the chunk in progress (in_chunk) ends at window[chunk_rest]. */
typedef struct {
    int fd;
    uint8_t *window;
    size_t cap, have, chunk_rest, skip; /* skip: bytes at the window's start to drop first (file_window) */
    int in_chunk;
    int64_t pos, end, limit;
    int64_t read; /* bytes in the window at each chunk's start (what Kafka's throttle counts) */
    int err;
} FileRun;

typedef struct {
    int (*range)(void *ctx, const uint8_t *d, size_t *pp, size_t stop); /* a chunk's batches (from *pp) */
    int (*chunk_start)(void *ctx);                                        /* -1: out of memory */
    int (*chunk_end)(void *ctx);
    void *ctx;
} FileSteps;

/* Run the steps over [pos, end) with the GIL released: DONE at end or at a chunk end once `limit` bytes are done;
 * a range's other status (pos at that batch, which is at the window's start); PARTIAL when the batch at the start
 * of a chunk is not whole in the window (Python's reader grows its buffer or fails); IO_ERROR (err). */
static int file_loop(FileRun *f, const FileSteps *s) {
    int64_t done = 0;
    memmove(f->window, f->window + f->skip, f->have);
    f->skip = 0;
    for (;;) {
        if (!f->in_chunk) {
            if (f->pos >= f->end || done >= f->limit)
                return DONE;
            int64_t left = f->end - f->pos - (int64_t)f->have;
            size_t want = f->cap - f->have;
            if (left < (int64_t)want)
                want = left > 0 ? (size_t)left : 0;
            while (want > 0) {
                ssize_t r = pread(f->fd, f->window + f->have, want, (off_t)(f->pos + (int64_t)f->have));
                if (r < 0 && errno == EINTR)
                    continue;
                if (r < 0) {
                    f->err = errno;
                    return IO_ERROR;
                }
                if (r == 0)
                    break; /* shorter than its valid size: the Python reader decides what that means */
                f->have += (size_t)r;
                want -= (size_t)r;
            }
            f->chunk_rest = whole_end(f->window, 0, f->have);
            if (f->chunk_rest == 0)
                return PARTIAL;
            f->read += (int64_t)f->have;
            f->in_chunk = 1;
            if (s->chunk_start != NULL && s->chunk_start(s->ctx) < 0) {
                f->err = ENOMEM;
                return IO_ERROR;
            }
        }
        size_t p = 0;
        int status = s->range(s->ctx, f->window, &p, f->chunk_rest);
        memmove(f->window, f->window + p, f->have - p);
        f->have -= p;
        f->chunk_rest -= p;
        f->pos += (int64_t)p;
        done += (int64_t)p;
        if (status != DONE)
            return status;
        f->in_chunk = 0;
        if (s->chunk_end != NULL && s->chunk_end(s->ctx) < 0) {
            f->err = ENOMEM;
            return IO_ERROR;
        }
    }
}

/* The window arguments: a writable buffer with `have` valid bytes, the chunk in progress (if any) ending at
 * chunk_rest, and the first `skip` bytes (a batch Python handled, inside that chunk) to drop. -1 with an
 * exception. */
static int file_window(PyObject *obj, Py_buffer *view, FileRun *f, Py_ssize_t have, Py_ssize_t skip,
                       Py_ssize_t chunk_rest) {
    if (PyObject_GetBuffer(obj, view, PyBUF_WRITABLE) < 0)
        return -1;
    /* the rest of the chunk in progress must still be whole batches: the loops trust that boundary */
    if (have < 0 || skip < 0 || chunk_rest < skip || chunk_rest > have || have > view->len ||
        view->len < HEADER_SIZE || f->pos < 0 || f->limit <= 0 ||
        whole_end((const uint8_t *)view->buf + skip, 0, (size_t)(chunk_rest - skip)) != (size_t)(chunk_rest - skip)) {
        PyBuffer_Release(view);
        PyErr_SetString(PyExc_ValueError, "bad window, position or limit");
        return -1;
    }
    f->window = view->buf;
    f->cap = (size_t)view->len;
    f->skip = (size_t)skip; /* dropped by file_loop, once every argument is checked */
    f->have = (size_t)(have - skip);
    f->chunk_rest = (size_t)(chunk_rest - skip);
    f->in_chunk = chunk_rest > 0; /* Python's batch was inside the chunk, which may end with it */
    return 0;
}

static PyObject *file_error(const FileRun *f) {
    errno = f->err;
    return f->err == ENOMEM ? PyErr_NoMemory() : PyErr_SetFromErrno(PyExc_OSError);
}

typedef struct {
    Map *m;
    MapRun *run;
    int64_t start_offset;
    const Codecs *cx;
} MapFile;

static int map_file_range(void *ctx, const uint8_t *d, size_t *pp, size_t stop) {
    MapFile *c = ctx;
    return map_range(c->m, c->run, d, pp, stop, c->start_offset, c->cx);
}

static PyObject *py_map_file(PyObject *self, PyObject *args) {
    PyObject *map_obj, *dirty_obj, *window_obj, *inflate = Py_None;
    long long slots, entries, max_entries, latest, pos, end, limit, start_offset;
    Py_ssize_t have, skip, chunk_rest;
    int fd;
    if (!PyArg_ParseTuple(args, "OOLLLLiLLOnnnLL|O", &map_obj, &dirty_obj, &slots, &entries, &max_entries, &latest,
                          &fd, &pos, &end, &window_obj, &have, &skip, &chunk_rest, &limit, &start_offset, &inflate))
        return NULL;
    FileRun f = {fd, NULL, 0, 0, 0, 0, 0, pos + skip, end, limit, 0, 0};
    Py_buffer windowview, mapview, dirtyview;
    if (file_window(window_obj, &windowview, &f, have, skip, chunk_rest) < 0)
        return NULL;
    Map m;
    if (get_map_and_dirty(map_obj, dirty_obj, &mapview, &dirtyview, &m, slots, entries) < 0) {
        PyBuffer_Release(&windowview);
        return NULL;
    }
    MapRun run = {0, latest, max_entries};
    int status;
    RELEASE_GIL
    Codecs cx = {&_save, &cpu0_, inflate, Py_None};
    MapFile c = {&m, &run, start_offset, &cx};
    FileSteps steps = {map_file_range, NULL, NULL, &c};
    status = file_loop(&f, &steps);
    ACQUIRE_GIL
    PyBuffer_Release(&dirtyview);
    PyBuffer_Release(&mapview);
    PyBuffer_Release(&windowview);
    if (status == IO_ERROR)
        return file_error(&f);
    return Py_BuildValue("LnniLLLLLL", (long long)f.pos, (Py_ssize_t)f.have, (Py_ssize_t)f.chunk_rest, status,
                         (long long)f.read, (long long)m.entries, (long long)run.latest, (long long)run.records_read,
                         (long long)m.lookups, (long long)m.probes);
}

/* The filter's output per chunk, as Kafka's cleanInto appends it to the cleaned segment: the end of the chunk's
 * bytes in the output buffer, its last offset, max timestamp and the offset of that timestamp. */
typedef struct {
    int64_t out_end, last_offset, max_ts, offset_of_max_ts;
} ChunkMark;

typedef struct {
    FilterRun *f;
    size_t chunk_out; /* where the chunk in progress starts in the output */
    ChunkMark *marks;
    size_t n, cap;
} FilterFile;

static int filter_file_range(void *ctx, const uint8_t *d, size_t *pp, size_t stop) {
    return filter_range(((FilterFile *)ctx)->f, d, pp, stop);
}

static int filter_chunk_start(void *ctx) {
    FilterFile *c = ctx;
    c->chunk_out = c->f->o;
    c->f->t->last_offset = c->f->t->max_ts = c->f->t->offset_of_max_ts = -1;
    return 0;
}

static int filter_chunk_end(void *ctx) {
    FilterFile *c = ctx;
    if (c->f->o == c->chunk_out)
        return 0;
    if (c->n == c->cap) {
        size_t cap = c->cap ? 2 * c->cap : 16;
        ChunkMark *grown = PyMem_RawRealloc(c->marks, cap * sizeof(ChunkMark));
        if (grown == NULL)
            return -1;
        c->marks = grown;
        c->cap = cap;
    }
    const FilterTotals *t = c->f->t;
    c->marks[c->n++] = (ChunkMark){(int64_t)c->f->o, t->last_offset, t->max_ts, t->offset_of_max_ts};
    c->chunk_out = c->f->o;
    return 0;
}

static PyObject *py_filter_file(PyObject *self, PyObject *args) {
    PyObject *map_obj, *window_obj, *out_obj, *inflate = Py_None, *deflate = Py_None;
    Py_buffer active;
    long long slots, latest, pos, end, limit, upper_bound, now, retention, max_message_bytes, last_offset, max_ts,
        offset_of_max_ts;
    Py_ssize_t have, skip, chunk_rest, out_pos, chunk_out;
    int fd;
    if (!PyArg_ParseTuple(args, "OLLiLLOnnnLOnny*LLLLLLL|OO", &map_obj, &slots, &latest, &fd, &pos, &end,
                          &window_obj, &have, &skip, &chunk_rest, &limit, &out_obj, &out_pos, &chunk_out, &active,
                          &upper_bound, &now, &retention, &max_message_bytes, &last_offset, &max_ts,
                          &offset_of_max_ts, &inflate, &deflate))
        return NULL;
    FileRun fr = {fd, NULL, 0, 0, 0, 0, 0, pos + skip, end, limit, 0, 0};
    Py_buffer windowview, mapview, outview;
    if (active.len % 16) {
        PyBuffer_Release(&active);
        PyErr_SetString(PyExc_ValueError, "bad active producers");
        return NULL;
    }
    if (file_window(window_obj, &windowview, &fr, have, skip, chunk_rest) < 0) {
        PyBuffer_Release(&active);
        return NULL;
    }
    Map m;
    if (get_map(map_obj, &mapview, &m, slots, 0) < 0) {
        PyBuffer_Release(&windowview);
        PyBuffer_Release(&active);
        return NULL;
    }
    if (PyObject_GetBuffer(out_obj, &outview, PyBUF_WRITABLE) < 0) {
        PyBuffer_Release(&mapview);
        PyBuffer_Release(&windowview);
        PyBuffer_Release(&active);
        return NULL;
    }
    int bad = out_pos < 0 || out_pos > outview.len || chunk_out < 0 || chunk_out > out_pos;
    uint8_t *keep = bad ? NULL : PyMem_RawMalloc(fr.cap + 1); /* a batch holds no more records than bytes */
    if (keep == NULL) {
        PyBuffer_Release(&outview);
        PyBuffer_Release(&mapview);
        PyBuffer_Release(&windowview);
        PyBuffer_Release(&active);
        return bad ? PyErr_Format(PyExc_ValueError, "bad out_pos or chunk_out") : PyErr_NoMemory();
    }
    FilterTotals t = {0, 0, 0, 0, 0, last_offset, max_ts, offset_of_max_ts};
    FilterRun f = {&m, NULL, &t, outview.buf, (size_t)outview.len, (size_t)out_pos, keep, active.buf,
                   (size_t)active.len / 16, latest, upper_bound, now, retention, max_message_bytes};
    FilterFile c = {&f, (size_t)chunk_out, NULL, 0, 0};
    int status;
    RELEASE_GIL
    Codecs cx = {&_save, &cpu0_, inflate, deflate};
    f.cx = &cx;
    FileSteps steps = {filter_file_range, filter_chunk_start, filter_chunk_end, &c};
    status = file_loop(&fr, &steps);
    ACQUIRE_GIL
    PyMem_RawFree(keep);
    PyBuffer_Release(&outview);
    PyBuffer_Release(&mapview);
    PyBuffer_Release(&windowview);
    PyBuffer_Release(&active);
    PyObject *marks = status == IO_ERROR ? NULL : PyList_New((Py_ssize_t)c.n);
    for (size_t i = 0; marks != NULL && i < c.n; i++) {
        PyObject *mark = Py_BuildValue("LLLL", (long long)c.marks[i].out_end, (long long)c.marks[i].last_offset,
                                       (long long)c.marks[i].max_ts, (long long)c.marks[i].offset_of_max_ts);
        if (mark == NULL)
            Py_CLEAR(marks);
        else
            PyList_SET_ITEM(marks, (Py_ssize_t)i, mark);
    }
    PyMem_RawFree(c.marks);
    if (status == IO_ERROR)
        return file_error(&fr);
    if (marks == NULL)
        return NULL;
    return Py_BuildValue("LnniLNnnLLLLLLLLLL", (long long)fr.pos, (Py_ssize_t)fr.have, (Py_ssize_t)fr.chunk_rest,
                         status, (long long)fr.read, marks, (Py_ssize_t)f.o, (Py_ssize_t)c.chunk_out,
                         (long long)t.last_offset, (long long)t.max_ts, (long long)t.offset_of_max_ts,
                         (long long)t.messages_read, (long long)t.bytes_read, (long long)t.messages_written,
                         (long long)t.bytes_written, (long long)t.invalid, (long long)m.lookups, (long long)m.probes);
}

/* BatchFilter's record loop for one records section (a compressed one read as a bounded stream); the caller did the
 * batch-level decisions. */
static PyObject *py_filter_payload(PyObject *self, PyObject *args) {
    PyObject *map_obj, *inflate = Py_None;
    Py_buffer payload;
    long long slots, latest, base_offset, base_ts, max_ts, now, new_horizon;
    int count, attributes, marker_for_empty_txn;
    if (!PyArg_ParseTuple(args, "OLLy*LiLLiLLp|O", &map_obj, &slots, &latest, &payload, &base_offset, &count, &base_ts,
                          &max_ts, &attributes, &now, &new_horizon, &marker_for_empty_txn, &inflate))
        return NULL;
    Py_buffer mapview;
    Map m;
    if (get_map(map_obj, &mapview, &m, slots, 0) < 0) {
        PyBuffer_Release(&payload);
        return NULL;
    }
    int codec = attributes & ATTR_CODEC;
    uint8_t *keep = codec ? NULL : PyMem_RawMalloc((size_t)payload.len + 1);
    if (count < 0 || (!codec && (Py_ssize_t)count > payload.len) || !OFFSET_OK(base_offset) ||
        (codec && inflate == Py_None) || (!codec && keep == NULL)) {
        PyMem_RawFree(keep);
        PyBuffer_Release(&mapview);
        PyBuffer_Release(&payload);
        Py_RETURN_NONE;
    }
    int has_horizon = (attributes & ATTR_HORIZON) != 0;
    FilterArgs a = {base_offset, base_ts, max_ts, (attributes & ATTR_CONTROL) != 0,
                    (attributes & ATTR_LOG_APPEND) != 0, has_horizon && now >= base_ts, has_horizon, base_ts,
                    new_horizon, marker_for_empty_txn, latest};
    Decision dec;
    int rebuild = 0, rc;
    int64_t new_base_ts = -1, horizon = -1;
    uint8_t *out = NULL;
    RELEASE_GIL
    Codecs cx = {&_save, &cpu0_, inflate, Py_None};
    rc = filter_batch(&m, &a, codec, count, payload.buf, (size_t)payload.len, &cx, keep, &dec, &rebuild, &new_base_ts,
                      &horizon, NULL, 0, &out);
    ACQUIRE_GIL
    PyMem_RawFree(keep);
    PyBuffer_Release(&mapview);
    PyBuffer_Release(&payload);
    if (rc < 0) {
        PyMem_RawFree(out);
        Py_RETURN_NONE;
    }
    PyObject *records = rebuild ? PyBytes_FromStringAndSize((const char *)out, (Py_ssize_t)dec.out_size)
                                : (Py_INCREF(Py_None), Py_None);
    PyMem_RawFree(out);
    if (records == NULL)
        return NULL;
    int need_horizon = (dec.tombstones || marker_for_empty_txn) && !has_horizon;
    int64_t new_max = attributes & ATTR_LOG_APPEND ? max_ts : dec.max_ts_kept;
    return Py_BuildValue("LiiLLLNLLL", (long long)dec.kept, dec.all_kept, need_horizon, (long long)dec.invalid,
                         (long long)m.lookups, (long long)m.probes, records, (long long)new_base_ts,
                         (long long)new_max, (long long)horizon);
}

/* set_window(bytes) -> the previous window (record_stream.WINDOW; the tests make it small) */
static PyObject *py_set_window(PyObject *self, PyObject *args) {
    Py_ssize_t n;
    if (!PyArg_ParseTuple(args, "n", &n))
        return NULL;
    if (n < 16) {
        PyErr_SetString(PyExc_ValueError, "window too small");
        return NULL;
    }
    size_t old = window_size;
    window_size = (size_t)n;
    return PyLong_FromSize_t(old);
}

/* ------------------------------------------------------------------------------------------------ small entries */

/* SkimpyOffsetMap.clear: zero the map's dirty blocks and unmark them, then (`free_pages`) hand the map's pages
 * to the kernel as free-when-needed (MADV_FREE; errors ignored: the pages then just stay), all with the GIL released:
 * mmap.madvise holds it while the kernel walks the touched pages (5-8% of the GIL-held time of a pass, py-spy). */
static PyObject *py_zero_dirty_blocks(PyObject *self, PyObject *args) {
    Py_buffer map, dirty;
    int free_pages = 0;
    if (!PyArg_ParseTuple(args, "w*w*|p", &map, &dirty, &free_pages))
        return NULL;
    Py_ssize_t zeroed = 0;
    uint8_t *buf = map.buf, *marks = dirty.buf;
    Py_ssize_t blocks = dirty.len;
    RELEASE_GIL
    for (Py_ssize_t i = 0; i < blocks; i++) {
        if (!marks[i])
            continue;
        Py_ssize_t start = i * DIRTY_BLOCK;
        if (start < map.len) {
            Py_ssize_t n = map.len - start < DIRTY_BLOCK ? map.len - start : DIRTY_BLOCK;
            memset(buf + start, 0, (size_t)n);
            zeroed++;
        }
        marks[i] = 0;
    }
#ifdef MADV_FREE
    if (free_pages && zeroed)
        (void)madvise(buf, (size_t)map.len, MADV_FREE);
#endif
    ACQUIRE_GIL
    PyBuffer_Release(&dirty);
    PyBuffer_Release(&map);
    return PyLong_FromSsize_t(zeroed);
}

static PyObject *py_whole_batches_end(PyObject *self, PyObject *args) {
    Py_buffer chunk;
    if (!PyArg_ParseTuple(args, "y*", &chunk))
        return NULL;
    size_t e = whole_end(chunk.buf, 0, (size_t)chunk.len);
    PyBuffer_Release(&chunk);
    return PyLong_FromSize_t(e);
}

static PyObject *py_gil_free_seconds(PyObject *self, PyObject *args) {
    return PyFloat_FromDouble((double)__atomic_load_n(&gil_free_ns, __ATOMIC_RELAXED) / 1e9);
}

static PyObject *py_md5(PyObject *self, PyObject *args) {
    Py_buffer data;
    if (!PyArg_ParseTuple(args, "y*", &data))
        return NULL;
    uint8_t out[16];
    md5(data.buf, (size_t)data.len, out);
    PyBuffer_Release(&data);
    return PyBytes_FromStringAndSize((const char *)out, 16);
}

/* md5_many over a list of keys (for the tests: the four-lane path against hashlib) */
static PyObject *py_md5_many(PyObject *self, PyObject *list) {
    if (!PyList_Check(list) || PyList_GET_SIZE(list) > GROUP_MAX) {
        PyErr_SetString(PyExc_ValueError, "a list of at most 64 bytes objects");
        return NULL;
    }
    int n = (int)PyList_GET_SIZE(list);
    const uint8_t *keys[GROUP_MAX] = {NULL};
    size_t lens[GROUP_MAX] = {0};
    uint8_t out[GROUP_MAX][16];
    for (int i = 0; i < n; i++) {
        PyObject *item = PyList_GET_ITEM(list, i);
        if (!PyBytes_Check(item)) {
            PyErr_SetString(PyExc_TypeError, "keys must be bytes");
            return NULL;
        }
        keys[i] = (const uint8_t *)PyBytes_AS_STRING(item);
        lens[i] = (size_t)PyBytes_GET_SIZE(item);
    }
    md5_many(keys, lens, n, out);
    PyObject *result = PyList_New(n);
    if (result == NULL)
        return NULL;
    for (int i = 0; i < n; i++) {
        PyObject *digest = PyBytes_FromStringAndSize((const char *)out[i], 16);
        if (digest == NULL) {
            Py_DECREF(result);
            return NULL;
        }
        PyList_SET_ITEM(result, i, digest);
    }
    return result;
}

static PyObject *py_crc32c(PyObject *self, PyObject *args) {
    Py_buffer data;
    if (!PyArg_ParseTuple(args, "y*", &data))
        return NULL;
    uint32_t c = crc32c(data.buf, (size_t)data.len);
    PyBuffer_Release(&data);
    return PyLong_FromUnsignedLong(c);
}

static PyMethodDef methods[] = {
    {"whole_batches_end", py_whole_batches_end, METH_VARARGS, "End of the complete batches at the chunk's start."},
    {"map_chunk", py_map_chunk, METH_VARARGS, "Offset-map build over the plain batches of a chunk."},
    {"map_payload", py_map_payload, METH_VARARGS, "Offset-map build over one records section."},
    {"filter_chunk", py_filter_chunk, METH_VARARGS, "Clean the plain batches of a chunk into out."},
    {"map_file", py_map_file, METH_VARARGS, "map_chunk over a segment file read into a window."},
    {"filter_file", py_filter_file, METH_VARARGS, "filter_chunk over a segment file read into a window."},
    {"filter_payload", py_filter_payload, METH_VARARGS, "The record decisions of one records section."},
    {"set_window", py_set_window, METH_VARARGS, "Set the bounded stream's window (bytes); returns the old one."},
    {"zero_dirty_blocks", py_zero_dirty_blocks, METH_VARARGS, "Zero and unmark the map's dirty blocks."},
    {"gil_free_seconds", py_gil_free_seconds, METH_NOARGS, "CPU seconds spent with the GIL released so far."},
    {"md5", py_md5, METH_VARARGS, "MD5 digest (for the tests)."},
    {"md5_many", py_md5_many, METH_O, "MD5 digests of up to 64 keys, four at a time (for the tests)."},
    {"crc32c", py_crc32c, METH_VARARGS, "CRC-32C (for the tests)."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_cleaner_core", NULL, -1, methods, NULL, NULL, NULL, NULL};

PyMODINIT_FUNC PyInit__cleaner_core(void) {
    for (int i = 0; i < 64; i++)
        md5_k[i] = (uint32_t)(fabs(sin((double)(i + 1))) * 4294967296.0);
    for (uint32_t i = 0; i < 256; i++) {
        uint32_t c = i;
        for (int k = 0; k < 8; k++)
            c = c & 1 ? (c >> 1) ^ 0x82F63B78u : c >> 1;
        crc_table[0][i] = c;
    }
    for (int t = 1; t < 8; t++)
        for (int i = 0; i < 256; i++)
            crc_table[t][i] = (crc_table[t - 1][i] >> 8) ^ crc_table[0][crc_table[t - 1][i] & 0xFF];
#ifdef HAVE_HW_CRC
    __builtin_cpu_init();
    use_hw_crc = __builtin_cpu_supports("sse4.2");
#endif
    /* Self-check against RFC 1321's and the CRC-32C check values: a miscompiled core must not load. */
    static const uint8_t abc_md5[16] = {0x90, 0x01, 0x50, 0x98, 0x3c, 0xd2, 0x4f, 0xb0,
                                        0xd6, 0x96, 0x3f, 0x7d, 0x28, 0xe1, 0x7f, 0x72};
    uint8_t digest[16];
    md5((const uint8_t *)"abc", 3, digest);
    if (memcmp(digest, abc_md5, 16) != 0 || crc32c((const uint8_t *)"123456789", 9) != 0xE3069283u) {
        PyErr_SetString(PyExc_ImportError, "the cleaner core failed its MD5/CRC-32C self-check");
        return NULL;
    }
    return PyModule_Create(&module);
}
