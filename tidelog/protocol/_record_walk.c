/* Optional accelerator for tidelog.protocol.record_walk.walk_uncompressed: the same record walk (Kafka's
 * DefaultRecord.readFrom rules) in C. Built by setup.py when a compiler is there; the pure-Python walk is used
 * otherwise and passes the same tests. Semantics and return values match the Python function exactly:
 *
 *   walk(data, pos, end, index, count, want_null_keys, partial, lo, hi, in_order, null_keys)
 *     -> (pos, index, lo, hi, in_order, error)     error: None or the InvalidRecordException message
 *
 * and `scan`, the produce fast lane's one-call check of a single uncompressed batch (see below).
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

/* scan(data, start, end, count, want_null_keys) -> (min_ts_delta, max_ts_delta) or None.
 * The produce fast lane (storage/log_validator.py): an answer only when data[start:end] holds exactly `count` > 0
 * records that all walk cleanly, with offset deltas 0..count-1 (and, when asked, no null key). Anything else,
 * valid or not, is None and goes through the full Python validation, which owns every error answer. */
static PyObject *scan(PyObject *self, PyObject *args) {
    (void)self;
    Py_buffer buf;
    Py_ssize_t pos, end, count, index = 0;
    int want_null_keys, in_order = 1, saw_null = 0;
    if (!PyArg_ParseTuple(args, "y*nnnp", &buf, &pos, &end, &count, &want_null_keys))
        return NULL;
    int64_t lo = INT64_MAX, hi = INT64_MIN;
    PyObject *error = NULL;
    if (count <= 0 || pos < 0 || end > buf.len || pos > end) {
        PyBuffer_Release(&buf);
        Py_RETURN_NONE;
    }
    int rc = walk_core((const uint8_t *)buf.buf, &pos, end, &index, count, want_null_keys, NULL, &saw_null, &lo, &hi,
                       &in_order, &error);
    PyBuffer_Release(&buf);
    if (rc < 0)
        return NULL;
    if (error != NULL) {
        Py_DECREF(error);
        Py_RETURN_NONE;
    }
    if (index != count || pos != end || !in_order || saw_null)
        Py_RETURN_NONE;
    return Py_BuildValue("LL", (long long)lo, (long long)hi);
}

static PyMethodDef methods[] = {
    {"walk", walk, METH_VARARGS, "Walk uncompressed v2 records (see tidelog.protocol.record_walk)."},
    {"scan", scan, METH_VARARGS, "The timestamp delta range of exactly `count` clean in-order records, else None."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_record_walk", NULL, -1, methods, NULL, NULL, NULL, NULL};

PyMODINIT_FUNC PyInit__record_walk(void) { return PyModule_Create(&module); }
