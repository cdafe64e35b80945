/* Optional accelerator for tidelog.protocol.record_walk.walk_uncompressed: the same record walk (Kafka's
 * DefaultRecord.readFrom rules) in C. Built by setup.py when a compiler is there; the pure-Python walk is used
 * otherwise and passes the same tests. Semantics and return values match the Python function exactly:
 *
 *   walk(data, pos, end, index, count, want_null_keys, partial, lo, hi, in_order, null_keys)
 *     -> (pos, index, lo, hi, in_order, error)     error: None or the InvalidRecordException message
 *
 * and `check_batch`, the produce fast lane's one-call check of a single batch (see below).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>

/* 0: ok, 1: ran out of bytes (before `end`), 2: too long, 3: not an int32 */
static int read_varint(const uint8_t *d, Py_ssize_t *p, Py_ssize_t end, int max_bytes, int64_t *out) {
    uint64_t value = 0;
    int shift = 0;
    Py_ssize_t q = *p;
    for (int i = 0; i < max_bytes; i++) {
        if (q >= end)
            return 1;
        uint8_t b = d[q++];
        if (shift < 64)
            value |= (uint64_t)(b & 0x7F) << shift;
        if (b < 0x80) {
            int64_t v = (int64_t)(value >> 1) ^ -(int64_t)(value & 1);
            if (max_bytes == 5 && (v < INT32_MIN || v > INT32_MAX))
                return 3;
            *out = v;
            *p = q;
            return 0;
        }
        shift += 7;
    }
    return 2;
}

#define FAIL(...) do { error = PyUnicode_FromFormat(__VA_ARGS__); goto done; } while (0)
#define FIELD(var, maxb)                                                                  \
    do {                                                                                  \
        int rc_ = read_varint(d, &p, rend, (maxb), &(var));                               \
        if (rc_ == 1) FAIL("record %zd runs past its declared length", index);            \
        if (rc_ == 2) FAIL("varint is too long");                                         \
        if (rc_ == 3) FAIL("varint does not fit an int32");                               \
    } while (0)

/* The walk itself. A null key is appended to `null_keys` when it is a list, else only flagged in `*saw_null`.
 * Returns -1 with a Python exception set, else 0 with `*error` NULL or the InvalidRecordException message. */
static int walk_core(const uint8_t *d, Py_ssize_t *pos_io, Py_ssize_t end, Py_ssize_t *index_io, Py_ssize_t count,
                     int want_null_keys, PyObject *null_keys, int *saw_null, int64_t *lo_io, int64_t *hi_io,
                     int *in_order_io, PyObject **error_out) {
    Py_ssize_t pos = *pos_io, index = *index_io;
    int64_t lo = *lo_io, hi = *hi_io;
    int in_order = *in_order_io;
    PyObject *error = NULL;
    while (index < count) {
        if (pos >= end)
            break;
        Py_ssize_t p = pos;
        int64_t length, v, n, k;
        int rc = read_varint(d, &p, end, 5, &length);
        if (rc == 1)
            break; /* the length itself is cut */
        if (rc == 2)
            FAIL("varint is too long");
        if (rc == 3)
            FAIL("varint does not fit an int32");
        if (length <= 0)
            FAIL("record %zd has an invalid length %lld", index, (long long)length);
        Py_ssize_t rend = p + (Py_ssize_t)length;
        if (rend > end)
            break;
        p += 1; /* attributes: unused */
        FIELD(v, 10);
        if (v < lo) lo = v;
        if (v > hi) hi = v;
        FIELD(v, 5);
        if (v != index)
            in_order = 0;
        FIELD(n, 5);
        if (n >= 0) {
            p += (Py_ssize_t)n;
        } else if (want_null_keys) {
            *saw_null = 1;
            if (null_keys != NULL && null_keys != Py_None) {
                PyObject *i = PyLong_FromSsize_t(index);
                if (i == NULL || PyList_Append(null_keys, i) < 0) {
                    Py_XDECREF(i);
                    return -1;
                }
                Py_DECREF(i);
            }
        }
        if (p > rend)
            FAIL("record %zd runs past its declared length", index);
        FIELD(n, 5);
        if (n > 0)
            p += (Py_ssize_t)n;
        if (p > rend)
            FAIL("record %zd runs past its declared length", index);
        FIELD(n, 5);
        if (n) {
            if (n < 0 || n > rend - p)
                FAIL("record %zd has an invalid header count %lld", index, (long long)n);
            for (int64_t h = 0; h < n; h++) {
                FIELD(k, 5);
                if (k < 0)
                    FAIL("record %zd has a header with a negative key size %lld", index, (long long)k);
                p += (Py_ssize_t)k;
                if (p > rend)
                    FAIL("record %zd runs past its declared length", index);
                FIELD(k, 5);
                if (k > 0)
                    p += (Py_ssize_t)k;
                if (p > rend)
                    FAIL("record %zd runs past its declared length", index);
            }
        }
        if (p != rend)
            FAIL("record %zd: expected to read %lld bytes in record payload, but read %zd", index,
                 (long long)length, p - (rend - (Py_ssize_t)length));
        pos = rend;
        index++;
    }
done:
    if (error == NULL && PyErr_Occurred())
        return -1;
    *pos_io = pos;
    *index_io = index;
    *lo_io = lo;
    *hi_io = hi;
    *in_order_io = in_order;
    *error_out = error;
    return 0;
}

static PyObject *walk(PyObject *self, PyObject *args) {
    (void)self;
    Py_buffer buf;
    Py_ssize_t pos, end, index, count;
    int want_null_keys, partial, in_order, saw_null = 0;
    long long lo_arg, hi_arg;
    PyObject *null_keys, *error = NULL;
    if (!PyArg_ParseTuple(args, "y*nnnnppLLpO", &buf, &pos, &end, &index, &count, &want_null_keys, &partial,
                          &lo_arg, &hi_arg, &in_order, &null_keys))
        return NULL;
    (void)partial;
    int64_t lo = lo_arg, hi = hi_arg;
    if (end > buf.len)
        end = buf.len;
    if (index == 0) {
        lo = INT64_MAX;
        hi = INT64_MIN;
    }
    int rc = walk_core((const uint8_t *)buf.buf, &pos, end, &index, count, want_null_keys, null_keys, &saw_null, &lo,
                       &hi, &in_order, &error);
    PyBuffer_Release(&buf);
    if (rc < 0)
        return NULL;
    if (error == NULL) {
        error = Py_None;
        Py_INCREF(error);
    }
    return Py_BuildValue("nnLLNN", pos, index, (long long)lo, (long long)hi, PyBool_FromLong(in_order), error);
}

/* --- the produce fast lane's whole batch check (storage/log_validator.py, _validate_fast) ------------------ */

static PyObject *crc_fn = NULL; /* crc32c(buffer) -> int, set by set_crc() (the crc32c package's, hardware) */

static uint64_t get_be(const uint8_t *p, int n) {
    uint64_t v = 0;
    for (int i = 0; i < n; i++)
        v = (v << 8) | p[i];
    return v;
}

static void set_be(uint8_t *p, uint64_t v, int n) {
    for (int i = n - 1; i >= 0; i--, v >>= 8)
        p[i] = (uint8_t)v;
}

/* crc32c of d[21:size] (what a v2 batch's CRC covers); -1 with an exception set. */
static int64_t batch_crc(uint8_t *d, Py_ssize_t size) {
    PyObject *view = PyMemoryView_FromMemory((char *)d + 21, size - 21, PyBUF_READ);
    if (view == NULL)
        return -1;
    PyObject *r = PyObject_CallOneArg(crc_fn, view);
    Py_DECREF(view);
    if (r == NULL)
        return -1;
    unsigned long long v = PyLong_AsUnsignedLongLong(r);
    Py_DECREF(r);
    if (v == (unsigned long long)-1 && PyErr_Occurred())
        return -1;
    return (int64_t)(v & 0xFFFFFFFFu);
}

/* check_batch(buf, next_offset, leader_epoch, now_ms, max_message_bytes, segment_bytes, target_codec, compact,
 *             ts_lo, ts_hi, log_append_time, inflate, inflate_cap)
 *   -> the batch header's 13 fields (RecordBatchHeader's order) as written: BaseOffset, PartitionLeaderEpoch and,
 *      when they change, MaxTimestamp / the timestamp-type bit / CRC are set in place;
 *   -> None when the batch is not the fast lane's (nothing is changed): the full validation then decides.
 * The lane's one ordinary batch: exactly one v2 batch filling `buf`, base offset 0, within max.message.bytes and
 * segment.bytes, records count = last offset delta + 1 > 0, CreateTime, not control, a producer id only with a
 * sequence, a known codec equal to the topic's (target_codec -1: "producer"), a valid CRC, and every record
 * walking cleanly with offset deltas 0..n-1 (no null key on a compacted topic) and its timestamps within
 * [ts_lo, ts_hi]. A compressed batch's records are those `inflate(codec, payload view, inflate_cap)` returns
 * (only once the header and CRC passed; inflate None: compressed batches are not the lane's). */
static PyObject *check_batch(PyObject *self, PyObject *args) {
    (void)self;
    Py_buffer buf;
    PyObject *buf_obj, *inflate, *inflate_cap, *inflated = NULL;
    long long next_offset, now_ms, max_message_bytes, segment_bytes, ts_lo, ts_hi;
    int leader_epoch, target_codec, compact, log_append;
    if (!PyArg_ParseTuple(args, "OLiLLLipLLpOO", &buf_obj, &next_offset, &leader_epoch, &now_ms, &max_message_bytes,
                          &segment_bytes, &target_codec, &compact, &ts_lo, &ts_hi, &log_append, &inflate,
                          &inflate_cap))
        return NULL;
    if (PyObject_GetBuffer(buf_obj, &buf, PyBUF_WRITABLE) < 0)
        return NULL;
    PyObject *result = NULL;
    uint8_t *d = buf.buf;
    Py_ssize_t size = buf.len;
    if (crc_fn == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "_record_walk.set_crc() was not called");
        goto done;
    }
    if (size < 61 || d[16] != 2)
        goto not_fast;
    int64_t base_offset = (int64_t)get_be(d, 8), length = (int32_t)get_be(d + 8, 4);
    uint32_t crc = (uint32_t)get_be(d + 17, 4);
    int attributes = (int16_t)get_be(d + 21, 2);
    int32_t last_offset_delta = (int32_t)get_be(d + 23, 4);
    int64_t base_ts = (int64_t)get_be(d + 27, 8), max_ts = (int64_t)get_be(d + 35, 8);
    int64_t producer_id = (int64_t)get_be(d + 43, 8);
    int32_t base_sequence = (int32_t)get_be(d + 53, 4), count = (int32_t)get_be(d + 57, 4);
    int codec = attributes & 0x07;
    if (length + 12 != size || base_offset != 0 || size > max_message_bytes || size > segment_bytes || codec > 4 ||
        (codec != 0 && inflate == Py_None) ||
        count <= 0 || last_offset_delta != count - 1 || (attributes & (0x08 | 0x20)) ||
        (producer_id >= 0 && base_sequence < 0) || (target_codec != -1 && target_codec != codec))
        goto not_fast;
    int64_t computed = batch_crc(d, size);
    if (computed < 0)
        goto done;
    if ((uint32_t)computed != crc)
        goto not_fast;
    /* The records: in place, or (compressed) as `inflate(codec, payload, cap)` gives them whole (None: it does
     * not decode, or expands past cap). */
    const uint8_t *recs = d;
    Py_ssize_t pos = 61, recs_end = size, index = 0;
    Py_buffer inflated_buf = {0};
    if (codec != 0) {
        PyObject *payload = PySequence_GetSlice(buf_obj, 61, size);
        if (payload == NULL)
            goto done;
        PyObject *codec_o = PyLong_FromLong(codec);
        PyObject *call_args[3] = {codec_o, payload, inflate_cap};
        inflated = codec_o ? PyObject_Vectorcall(inflate, call_args, 3, NULL) : NULL;
        Py_XDECREF(codec_o);
        Py_DECREF(payload);
        if (inflated == NULL)
            goto done;
        if (inflated == Py_None)
            goto not_fast;
        if (PyObject_GetBuffer(inflated, &inflated_buf, PyBUF_SIMPLE) < 0)
            goto done;
        recs = inflated_buf.buf;
        pos = 0;
        recs_end = inflated_buf.len;
    }
    int in_order = 1, saw_null = 0;
    int64_t lo = INT64_MAX, hi = INT64_MIN;
    PyObject *error = NULL;
    int walked = walk_core(recs, &pos, recs_end, &index, count, compact, NULL, &saw_null, &lo, &hi, &in_order,
                           &error);
    if (codec != 0)
        PyBuffer_Release(&inflated_buf);
    if (walked < 0)
        goto done;
    if (error != NULL) {
        Py_DECREF(error);
        goto not_fast;
    }
    if (index != count || pos != recs_end || !in_order || saw_null)
        goto not_fast;
    if (!log_append && ((__int128)base_ts + lo < ts_lo || (__int128)base_ts + hi > ts_hi))
        goto not_fast;
    if (!log_append && ((__int128)base_ts + hi > INT64_MAX || (__int128)base_ts + hi < INT64_MIN))
        goto not_fast; /* a MaxTimestamp that does not fit: the full path answers it */
    /* Offsets and epoch sit outside the CRC; MaxTimestamp and the attributes inside it. */
    set_be(d, (uint64_t)next_offset, 8);
    set_be(d + 12, (uint64_t)(uint32_t)leader_epoch, 4);
    int new_attrs = log_append ? (attributes | 0x08) : attributes;
    int64_t new_max = log_append ? now_ms : base_ts + hi;
    if (new_attrs != attributes || new_max != max_ts) {
        set_be(d + 21, (uint64_t)(uint16_t)new_attrs, 2);
        set_be(d + 35, (uint64_t)new_max, 8);
        computed = batch_crc(d, size);
        if (computed < 0)
            goto done;
        crc = (uint32_t)computed;
        set_be(d + 17, crc, 4);
    }
    /* RecordBatchHeader's fields, in its order, as written */
    result = Py_BuildValue("LiiiIiiLLLiii", next_offset, (int)length, leader_epoch, 2, (unsigned int)crc, new_attrs,
                           (int)last_offset_delta, (long long)base_ts, (long long)new_max, (long long)producer_id,
                           (int)(int16_t)get_be(d + 51, 2), (int)base_sequence, (int)count);
    goto done;
not_fast:
    result = Py_NewRef(Py_None);
done:
    Py_XDECREF(inflated);
    PyBuffer_Release(&buf);
    return result;
}

static PyObject *set_crc(PyObject *self, PyObject *fn) {
    (void)self;
    Py_XSETREF(crc_fn, Py_NewRef(fn));
    Py_RETURN_NONE;
}

static PyMethodDef methods[] = {
    {"check_batch", check_batch, METH_VARARGS, "The produce fast lane's check and stamping of one batch (see above)."},
    {"set_crc", set_crc, METH_O, "set_crc(crc32c): the CRC-32C function check_batch uses."},
    {"walk", walk, METH_VARARGS, "Walk uncompressed v2 records (see tidelog.protocol.record_walk)."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_record_walk", NULL, -1, methods, NULL, NULL, NULL, NULL};

PyMODINIT_FUNC PyInit__record_walk(void) { return PyModule_Create(&module); }
