/* Optional accelerator of tidelog.protocol.produce_codec (Produce v3-13 request decoder and response encoder)
 * and of frame.parse_request_header. Built by setup.py when a compiler is there; without it the pure-Python
 * codec is used, and tests/protocol/test_produce_codec_c.py checks that both give the same results, the same
 * objects and the same errors on every input they are fed.
 *
 * Why C: on a 64 KiB produce request the Python decoder, header parser and response encoder cost about 80,000
 * interpreter instructions of the ~280,000 the whole request takes (callgrind), and they run once per request.
 *
 *   bind(PartitionProduceData, TopicProduceData, ProduceRequestData, uuid.UUID, WireError)   what decode builds
 *   bind_header(RequestHeader, ProtocolError)                                                 what header builds
 *   decode(frame, pos, version) -> ProduceRequestData        frame: a memoryview; records are views of it
 *   encode(version, responses, throttle_time_ms) -> bytes    the response body, as encode_produce_response
 *   header(frame) -> RequestHeader                           as frame.parse_request_header
 *   receive_buffer(size) -> bytearray                        not zero-filled: the socket fills it (frame_stream)
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

static PyObject *PartitionCls, *TopicCls, *RequestCls, *UuidCls, *WireError, *HeaderCls, *ProtocolError;
static PyObject *s_index, *s_error_code, *s_base_offset, *s_log_append_time_ms, *s_log_start_offset,
    *s_record_errors, *s_error_message, *s_bytes, *empty_tuple;

#define FLEXIBLE_MIN_VERSION 9
#define TOPIC_ID_MIN_VERSION 13
#define MAX_VERSION 13

static int16_t be16(const uint8_t *p) { return (int16_t)(((uint16_t)p[0] << 8) | p[1]); }
static int32_t be32(const uint8_t *p) {
    return (int32_t)(((uint32_t)p[0] << 24) | ((uint32_t)p[1] << 16) | ((uint32_t)p[2] << 8) | p[3]);
}

static void wire_error(const char *msg) { PyErr_SetString(WireError ? WireError : PyExc_ValueError, msg); }

/* Unsigned varint as primitives.read_uvarint: at most 5 bytes; -1 with WireError set on bad input. */
static int read_uvarint(const uint8_t *d, Py_ssize_t end, Py_ssize_t *pos, int64_t *out) {
    uint64_t value = 0;
    int shift = 0;
    Py_ssize_t p = *pos;
    for (;;) {
        if (p >= end) {
            wire_error("truncated varint");
            return -1;
        }
        uint8_t b = d[p++];
        value |= (uint64_t)(b & 0x7F) << shift;
        if (!(b & 0x80))
            break;
        shift += 7;
        if (shift > 28) {
            wire_error("unsigned varint longer than 5 bytes");
            return -1;
        }
    }
    *out = (int64_t)value;
    *pos = p;
    return 0;
}

/* A length as wire.read_string / read_bytes_view / read_array_length read it: compact (uvarint - 1) or
 * INT16 (strings) / INT32 (bytes, arrays). */
static int read_length(const uint8_t *d, Py_ssize_t end, Py_ssize_t *pos, int flexible, int width, int64_t *out) {
    if (flexible) {
        if (read_uvarint(d, end, pos, out) < 0)
            return -1;
        *out -= 1;
        return 0;
    }
    if (*pos + width > end) {
        wire_error(width == 2 ? "truncated int16" : "truncated int32");
        return -1;
    }
    *out = width == 2 ? be16(d + *pos) : be32(d + *pos);
    *pos += width;
    return 0;
}

/* STRING / NULLABLE_STRING; *out = NULL-free: Py_None for null. */
static PyObject *read_string(const uint8_t *d, Py_ssize_t end, Py_ssize_t *pos, int flexible) {
    int64_t n;
    if (read_length(d, end, pos, flexible, 2, &n) < 0)
        return NULL;
    if (n < 0) {
        if (n != -1) {
            PyErr_Format(WireError, "bad string length %lld", (long long)n);
            return NULL;
        }
        Py_RETURN_NONE;
    }
    if (*pos + n > end) {
        wire_error("truncated string");
        return NULL;
    }
    PyObject *s = PyUnicode_DecodeUTF8((const char *)d + *pos, (Py_ssize_t)n, NULL);
    if (s == NULL) {
        if (PyErr_ExceptionMatches(PyExc_UnicodeDecodeError)) {
            PyErr_Clear();
            wire_error("string is not UTF-8");
        }
        return NULL;
    }
    *pos += (Py_ssize_t)n;
    return s;
}

/* Kafka 4.4's generated readers' caps (MessageUtil.MAX_ARRAY_LENGTH, MAX_TAGGED_FIELD_COUNT), as wire.py's. */
#define MAX_ARRAY_LENGTH 1000000
#define MAX_TAGGED_FIELD_COUNT 10000

static int read_array_length(const uint8_t *d, Py_ssize_t end, Py_ssize_t *pos, int flexible, Py_ssize_t *out) {
    int64_t n;
    if (read_length(d, end, pos, flexible, 4, &n) < 0)
        return -1;
    if (n < -1) {
        PyErr_Format(WireError, "bad array length %lld", (long long)n);
        return -1;
    }
    if (n == -1) {
        wire_error("non-nullable array was serialized as null");
        return -1;
    }
    if (n > end - *pos) {
        PyErr_Format(WireError, "array length %lld exceeds the %lld bytes remaining", (long long)n,
                     (long long)(end - *pos));
        return -1;
    }
    if (n > MAX_ARRAY_LENGTH) {
        PyErr_Format(WireError, "array length %lld exceeds the maximum of %d", (long long)n, MAX_ARRAY_LENGTH);
        return -1;
    }
    *out = (Py_ssize_t)n;
    return 0;
}

static int skip_tagged_fields(const uint8_t *d, Py_ssize_t end, Py_ssize_t *pos) {
    int64_t count, tag, size;
    if (read_uvarint(d, end, pos, &count) < 0)
        return -1;
    if (count > end - *pos) {
        PyErr_Format(WireError, "%lld tagged fields exceed the %lld bytes remaining", (long long)count,
                     (long long)(end - *pos));
        return -1;
    }
    if (count > MAX_TAGGED_FIELD_COUNT) {
        PyErr_Format(WireError, "%lld tagged fields exceed the maximum of %d", (long long)count,
                     MAX_TAGGED_FIELD_COUNT);
        return -1;
    }
    for (int64_t i = 0; i < count; i++) {
        if (read_uvarint(d, end, pos, &tag) < 0 || read_uvarint(d, end, pos, &size) < 0)
            return -1;
        *pos += (Py_ssize_t)size;
        if (*pos > end) {
            wire_error("truncated tagged field");
            return -1;
        }
    }
    return 0;
}

static int check_bound(void) {
    if (PartitionCls == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "_produce_codec.bind() was not called");
        return -1;
    }
    return 0;
}

static PyObject *decode(PyObject *self, PyObject *args) {
    PyObject *frame;
    Py_ssize_t pos;
    int version;
    if (!PyArg_ParseTuple(args, "Oni", &frame, &pos, &version) || check_bound() < 0)
        return NULL;
    if (version < 3 || version > MAX_VERSION) {
        PyErr_Format(WireError, "Produce v%d is not decoded here", version);
        return NULL;
    }
    Py_buffer buf;
    if (PyObject_GetBuffer(frame, &buf, PyBUF_SIMPLE) < 0)
        return NULL;
    const uint8_t *d = buf.buf;
    Py_ssize_t end = buf.len;
    int flexible = version >= FLEXIBLE_MIN_VERSION, by_id = version >= TOPIC_ID_MIN_VERSION;
    PyObject *txn = NULL, *topics = NULL, *result = NULL;
    if (pos < 0) {
        wire_error("negative position");
        goto done;
    }
    txn = read_string(d, end, &pos, flexible);
    if (txn == NULL)
        goto done;
    if (pos + 6 > end) {
        wire_error("truncated Produce request");
        goto done;
    }
    int acks = be16(d + pos), timeout_ms = be32(d + pos + 2);
    pos += 6;
    Py_ssize_t n_topics;
    if (read_array_length(d, end, &pos, flexible, &n_topics) < 0)
        goto done;
    topics = PyList_New(0);
    if (topics == NULL)
        goto done;
    for (Py_ssize_t t = 0; t < n_topics; t++) {
        PyObject *name = NULL, *topic_id = NULL, *parts = NULL, *topic = NULL;
        if (by_id) {
            if (pos + 16 > end) {
                wire_error("truncated topic id");
                goto done;
            }
            PyObject *raw = PyBytes_FromStringAndSize((const char *)d + pos, 16);
            if (raw == NULL)
                goto done;
            PyObject *kwargs = Py_BuildValue("{OO}", s_bytes, raw);
            Py_DECREF(raw);
            if (kwargs == NULL)
                goto done;
            topic_id = PyObject_Call(UuidCls, empty_tuple, kwargs);
            Py_DECREF(kwargs);
            if (topic_id == NULL)
                goto done;
            pos += 16;
            name = Py_NewRef(Py_None);
        } else {
            name = read_string(d, end, &pos, flexible);
            if (name == NULL)
                goto done;
            if (name == Py_None) {
                Py_DECREF(name);
                wire_error("null topic name");
                goto done;
            }
            topic_id = Py_NewRef(Py_None);
        }
        Py_ssize_t n_parts;
        if (read_array_length(d, end, &pos, flexible, &n_parts) < 0 || (parts = PyList_New(0)) == NULL)
            goto topic_failed;
        for (Py_ssize_t i = 0; i < n_parts; i++) {
            if (pos + 4 > end) {
                wire_error("truncated partition index");
                goto topic_failed;
            }
            int32_t index = be32(d + pos);
            pos += 4;
            int64_t n;
            if (read_length(d, end, &pos, flexible, 4, &n) < 0)
                goto topic_failed;
            PyObject *records;
            if (n < 0) {
                if (n != -1) {
                    PyErr_Format(WireError, "bad bytes length %lld", (long long)n);
                    goto topic_failed;
                }
                records = Py_NewRef(Py_None);
            } else {
                if (pos + n > end) {
                    wire_error("truncated bytes");
                    goto topic_failed;
                }
                records = PySequence_GetSlice(frame, pos, pos + (Py_ssize_t)n); /* a view of the frame */
                if (records == NULL)
                    goto topic_failed;
                pos += (Py_ssize_t)n;
            }
            if (flexible && skip_tagged_fields(d, end, &pos) < 0) {
                Py_DECREF(records);
                goto topic_failed;
            }
            PyObject *pargs[2] = {PyLong_FromLong(index), records};
            PyObject *part = pargs[0] ? PyObject_Vectorcall(PartitionCls, pargs, 2, NULL) : NULL;
            Py_XDECREF(pargs[0]);
            Py_DECREF(records);
            if (part == NULL)
                goto topic_failed;
            int rc = PyList_Append(parts, part);
            Py_DECREF(part);
            if (rc < 0)
                goto topic_failed;
        }
        if (flexible && skip_tagged_fields(d, end, &pos) < 0)
            goto topic_failed;
        PyObject *targs[3] = {name, parts, topic_id};
        topic = PyObject_Vectorcall(TopicCls, targs, 3, NULL);
        if (topic == NULL || PyList_Append(topics, topic) < 0)
            goto topic_failed;
        Py_DECREF(topic);
        Py_DECREF(name);
        Py_DECREF(parts);
        Py_DECREF(topic_id);
        continue;
    topic_failed:
        Py_XDECREF(topic);
        Py_XDECREF(name);
        Py_XDECREF(parts);
        Py_XDECREF(topic_id);
        goto done;
    }
    if (flexible && skip_tagged_fields(d, end, &pos) < 0)
        goto done;
    {
        PyObject *acks_o = PyLong_FromLong(acks), *timeout_o = PyLong_FromLong(timeout_ms);
        if (acks_o != NULL && timeout_o != NULL) {
            PyObject *rargs[4] = {txn, acks_o, timeout_o, topics};
            result = PyObject_Vectorcall(RequestCls, rargs, 4, NULL);
        }
        Py_XDECREF(acks_o);
        Py_XDECREF(timeout_o);
    }
done:
    Py_XDECREF(txn);
    Py_XDECREF(topics);
    PyBuffer_Release(&buf);
    return result;
}

/* --- response encoding ----------------------------------------------------------------------------------- */

typedef struct {
    char *data;
    Py_ssize_t len, cap;
} Out;

static int out_reserve(Out *o, Py_ssize_t n) {
    if (o->len + n <= o->cap)
        return 0;
    Py_ssize_t cap = o->cap ? o->cap : 256;
    while (cap < o->len + n)
        cap *= 2;
    char *p = PyMem_Realloc(o->data, cap);
    if (p == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    o->data = p;
    o->cap = cap;
    return 0;
}

static int put(Out *o, const void *p, Py_ssize_t n) {
    if (out_reserve(o, n) < 0)
        return -1;
    memcpy(o->data + o->len, p, n);
    o->len += n;
    return 0;
}

static int put_be(Out *o, uint64_t v, int width) {
    uint8_t b[8];
    for (int i = 0; i < width; i++)
        b[i] = (uint8_t)(v >> (8 * (width - 1 - i)));
    return put(o, b, width);
}

static int put_uvarint(Out *o, uint64_t v) {
    uint8_t b[10];
    int n = 0;
    while (v > 0x7F) {
        b[n++] = (uint8_t)((v & 0x7F) | 0x80);
        v >>= 7;
    }
    b[n++] = (uint8_t)v;
    return put(o, b, n);
}

static int put_length(Out *o, Py_ssize_t n, int flexible) {
    return flexible ? put_uvarint(o, (uint64_t)(n + 1)) : put_be(o, (uint64_t)(uint32_t)n, 4);
}

/* STRING / NULLABLE_STRING as wire.string_bytes */
static int put_string(Out *o, PyObject *s, int flexible) {
    if (s == Py_None)
        return flexible ? put(o, "\x00", 1) : put(o, "\xff\xff", 2);
    if (!PyUnicode_Check(s)) {
        PyErr_SetString(PyExc_TypeError, "expected a str or None");
        return -1;
    }
    Py_ssize_t n;
    const char *u = PyUnicode_AsUTF8AndSize(s, &n);
    if (u == NULL)
        return -1;
    if ((flexible ? put_uvarint(o, (uint64_t)n + 1) : put_be(o, (uint64_t)(uint16_t)n, 2)) < 0)
        return -1;
    return put(o, u, n);
}

static int get_long(PyObject *obj, PyObject *name, long long *out) {
    PyObject *v = PyObject_GetAttr(obj, name);
    if (v == NULL)
        return -1;
    *out = PyLong_AsLongLong(v);
    Py_DECREF(v);
    return (*out == -1 && PyErr_Occurred()) ? -1 : 0;
}

static int encode_partition(Out *o, PyObject *p, int version, int flexible) {
    long long index, error_code, base_offset, append_time, start_offset;
    if (get_long(p, s_index, &index) < 0 || get_long(p, s_error_code, &error_code) < 0 ||
        get_long(p, s_base_offset, &base_offset) < 0 || get_long(p, s_log_append_time_ms, &append_time) < 0 ||
        get_long(p, s_log_start_offset, &start_offset) < 0)
        return -1;
    if (put_be(o, (uint32_t)index, 4) < 0 || put_be(o, (uint16_t)error_code, 2) < 0 ||
        put_be(o, (uint64_t)base_offset, 8) < 0 || put_be(o, (uint64_t)append_time, 8) < 0)
        return -1;
    if (version >= 5 && put_be(o, (uint64_t)start_offset, 8) < 0)
        return -1;
    if (version >= 8) {
        PyObject *errors = PyObject_GetAttr(p, s_record_errors);
        if (errors == NULL)
            return -1;
        PyObject *seq = PySequence_Fast(errors, "record_errors must be a sequence");
        Py_DECREF(errors);
        if (seq == NULL)
            return -1;
        Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
        int rc = put_length(o, n, flexible);
        for (Py_ssize_t i = 0; rc == 0 && i < n; i++) {
            PyObject *item = PySequence_Fast_GET_ITEM(seq, i);
            PyObject *batch_index, *message;
            if (!PyArg_ParseTuple(item, "OO", &batch_index, &message)) {
                rc = -1;
                break;
            }
            long bi = PyLong_AsLong(batch_index);
            if (bi == -1 && PyErr_Occurred()) {
                rc = -1;
                break;
            }
            rc = put_be(o, (uint32_t)bi, 4);
            if (rc == 0)
                rc = put_string(o, message, flexible);
            if (rc == 0 && flexible)
                rc = put(o, "\x00", 1);
        }
        Py_DECREF(seq);
        if (rc < 0)
            return -1;
        PyObject *message = PyObject_GetAttr(p, s_error_message);
        if (message == NULL)
            return -1;
        rc = put_string(o, message, flexible);
        Py_DECREF(message);
        if (rc < 0)
            return -1;
    }
    return flexible ? put(o, "\x00", 1) : 0;
}

static PyObject *encode(PyObject *self, PyObject *args) {
    int version, throttle;
    PyObject *responses;
    if (!PyArg_ParseTuple(args, "iOi", &version, &responses, &throttle))
        return NULL;
    int flexible = version >= FLEXIBLE_MIN_VERSION, by_id = version >= TOPIC_ID_MIN_VERSION;
    PyObject *topics = PySequence_Fast(responses, "responses must be a sequence");
    if (topics == NULL)
        return NULL;
    Out o = {NULL, 0, 0};
    PyObject *result = NULL;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(topics);
    if (put_length(&o, n, flexible) < 0)
        goto done;
    for (Py_ssize_t t = 0; t < n; t++) {
        PyObject *key, *partitions;
        if (!PyArg_ParseTuple(PySequence_Fast_GET_ITEM(topics, t), "OO", &key, &partitions))
            goto done;
        if (by_id) {
            if (!PyBytes_Check(key) || PyBytes_GET_SIZE(key) != 16) {
                PyErr_SetString(PyExc_TypeError, "a v13+ topic key must be 16 bytes");
                goto done;
            }
            if (put(&o, PyBytes_AS_STRING(key), 16) < 0)
                goto done;
        } else if (key == Py_None || put_string(&o, key, flexible) < 0) {
            if (!PyErr_Occurred())
                PyErr_SetString(PyExc_TypeError, "a topic name must be a str");
            goto done;
        }
        PyObject *parts = PySequence_Fast(partitions, "partitions must be a sequence");
        if (parts == NULL)
            goto done;
        Py_ssize_t np = PySequence_Fast_GET_SIZE(parts);
        int rc = put_length(&o, np, flexible);
        for (Py_ssize_t i = 0; rc == 0 && i < np; i++)
            rc = encode_partition(&o, PySequence_Fast_GET_ITEM(parts, i), version, flexible);
        Py_DECREF(parts);
        if (rc < 0 || (flexible && put(&o, "\x00", 1) < 0))
            goto done;
    }
    if (put_be(&o, (uint32_t)throttle, 4) < 0 || (flexible && put(&o, "\x00", 1) < 0))
        goto done;
    result = PyBytes_FromStringAndSize(o.data, o.len);
done:
    PyMem_Free(o.data);
    Py_DECREF(topics);
    return result;
}

/* --- request header ---------------------------------------------------------------------------------------- */

static PyObject *header(PyObject *self, PyObject *frame) {
    if (HeaderCls == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "_produce_codec.bind_header() was not called");
        return NULL;
    }
    Py_buffer buf;
    if (PyObject_GetBuffer(frame, &buf, PyBUF_SIMPLE) < 0)
        return NULL;
    const uint8_t *d = buf.buf;
    Py_ssize_t len = buf.len;
    PyObject *client_id = NULL, *result = NULL;
    if (len < 10) {
        PyErr_Format(ProtocolError, "request of %zd bytes is shorter than a request header", len);
        goto done;
    }
    int n = be16(d + 8);
    Py_ssize_t pos = 10;
    if (n < 0) {
        if (n != -1) {
            PyErr_Format(ProtocolError, "bad client_id length %d", n);
            goto done;
        }
        client_id = Py_NewRef(Py_None);
    } else {
        if (pos + n > len) {
            PyErr_SetString(ProtocolError, "truncated client_id");
            goto done;
        }
        client_id = PyUnicode_DecodeUTF8((const char *)d + pos, n, NULL);
        if (client_id == NULL) {
            if (PyErr_ExceptionMatches(PyExc_UnicodeDecodeError)) {
                /* as the Python parser: ProtocolError caused by the decode error */
                PyObject *type, *value, *tb;
                PyErr_Fetch(&type, &value, &tb);
                PyErr_NormalizeException(&type, &value, &tb);
                PyErr_SetString(ProtocolError, "client_id is not UTF-8");
                PyObject *t2, *v2, *tb2;
                PyErr_Fetch(&t2, &v2, &tb2);
                PyErr_NormalizeException(&t2, &v2, &tb2);
                PyException_SetCause(v2, value); /* steals value */
                PyException_SetContext(v2, Py_NewRef(value));
                Py_XDECREF(type);
                Py_XDECREF(tb);
                PyErr_Restore(t2, v2, tb2);
            }
            goto done;
        }
        pos += n;
    }
    {
        PyObject *items[5] = {PyLong_FromLong(be16(d)), PyLong_FromLong(be16(d + 2)), PyLong_FromLong(be32(d + 4)),
                              client_id, PyLong_FromSsize_t(pos)};
        if (items[0] && items[1] && items[2] && items[4])
            result = PyObject_Vectorcall(HeaderCls, items, 5, NULL);
        Py_XDECREF(items[0]);
        Py_XDECREF(items[1]);
        Py_XDECREF(items[2]);
        Py_XDECREF(items[4]);
    }
done:
    Py_XDECREF(client_id);
    PyBuffer_Release(&buf);
    return result;
}

static PyObject *bind(PyObject *self, PyObject *args) {
    PyObject *p, *t, *r, *u, *w;
    if (!PyArg_ParseTuple(args, "OOOOO", &p, &t, &r, &u, &w))
        return NULL;
    Py_XSETREF(PartitionCls, Py_NewRef(p));
    Py_XSETREF(TopicCls, Py_NewRef(t));
    Py_XSETREF(RequestCls, Py_NewRef(r));
    Py_XSETREF(UuidCls, Py_NewRef(u));
    Py_XSETREF(WireError, Py_NewRef(w));
    Py_RETURN_NONE;
}

static PyObject *bind_header(PyObject *self, PyObject *args) {
    PyObject *h, *e;
    if (!PyArg_ParseTuple(args, "OO", &h, &e))
        return NULL;
    Py_XSETREF(HeaderCls, Py_NewRef(h));
    Py_XSETREF(ProtocolError, Py_NewRef(e));
    Py_RETURN_NONE;
}

/* A bytearray the kernel is about to fill with received bytes: zero-filling 1 MiB first (bytearray(n)) costs a
 * pass over memory the read then writes again. Only the bytes received are ever handed out (frame_stream.py). */
static PyObject *receive_buffer(PyObject *self, PyObject *arg) {
    (void)self;
    Py_ssize_t size = PyNumber_AsSsize_t(arg, PyExc_OverflowError);
    if (size == -1 && PyErr_Occurred())
        return NULL;
    if (size < 0) {
        PyErr_SetString(PyExc_ValueError, "negative buffer size");
        return NULL;
    }
    return PyByteArray_FromStringAndSize(NULL, size);
}

static PyMethodDef methods[] = {
    {"bind", bind, METH_VARARGS, "bind(PartitionProduceData, TopicProduceData, ProduceRequestData, UUID, WireError)"},
    {"bind_header", bind_header, METH_VARARGS, "bind_header(RequestHeader, ProtocolError)"},
    {"decode", decode, METH_VARARGS, "decode(frame, pos, version) -> ProduceRequestData"},
    {"encode", encode, METH_VARARGS, "encode(version, responses, throttle_time_ms) -> bytes"},
    {"header", header, METH_O, "header(frame) -> RequestHeader"},
    {"receive_buffer", receive_buffer, METH_O, "receive_buffer(size) -> bytearray, not zero-filled"},
    {NULL, NULL, 0, NULL}};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_produce_codec", NULL, -1, methods, NULL, NULL, NULL, NULL};

PyMODINIT_FUNC PyInit__produce_codec(void) {
#define INTERN(var, text) if ((var = PyUnicode_InternFromString(text)) == NULL) return NULL
    INTERN(s_index, "index");
    INTERN(s_error_code, "error_code");
    INTERN(s_base_offset, "base_offset");
    INTERN(s_log_append_time_ms, "log_append_time_ms");
    INTERN(s_log_start_offset, "log_start_offset");
    INTERN(s_record_errors, "record_errors");
    INTERN(s_error_message, "error_message");
    INTERN(s_bytes, "bytes");
    if ((empty_tuple = PyTuple_New(0)) == NULL)
        return NULL;
    return PyModule_Create(&module);
}
